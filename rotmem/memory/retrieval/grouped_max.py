"""``GroupedMax``: the largest value of each group, over items that join groups as a store grows.

The hybrid retriever scores an evidence unit by its best fact: ``np.maximum.at(out, groups,
values[items])`` over every (fact, unit) pair, once per question. ``ufunc.at`` pays a per-item cost;
``np.maximum.reduceat`` over the items sorted by group does the same in one vectorised pass. The
maximum is exact, so the result is the same bit for bit (a NaN in a group gives NaN either way).

The sorted order is kept as the store grows: new pairs sorted by group are appended in place when
every group they join comes after the groups already held (new sessions' units); otherwise (a new
fact for an older unit) the whole order is sorted again.
"""

from __future__ import annotations

import numpy as np

from rotmem.index.growing import GrowingArray


class GroupedMax:
    """(item, group) pairs (module docs); ``max_into(out, values)`` writes each group's largest
    ``values[item]`` into ``out[group]``."""

    def __init__(self) -> None:
        self._items = GrowingArray(np.int64)  # the items, sorted by group
        self._groups = GrowingArray(np.int64)  # their groups, ascending
        self._starts = GrowingArray(np.int64)  # where each group's items begin
        self._group_ids = GrowingArray(np.int64)  # the group of each start

    def __len__(self) -> int:
        return self._items.size

    def add(self, items: np.ndarray, groups: np.ndarray) -> None:
        """Add the pairs ``(items[i], groups[i])`` (``[m]`` int64 each)."""
        items, groups = np.asarray(items, np.int64), np.asarray(groups, np.int64)
        if items.size == 0:
            return
        order = np.argsort(groups, kind="stable")
        items, groups = items[order], groups[order]
        if self._groups.size and groups[0] <= self._groups.values[-1]:  # an older group grows
            items = np.concatenate([self._items.values, items])
            groups = np.concatenate([self._groups.values, groups])
            order = np.argsort(groups, kind="stable")
            items, groups = items[order], groups[order]
            for array in (self._items, self._groups, self._starts, self._group_ids):
                array.clear()
        first = self._items.size
        self._items.extend(items)
        self._groups.extend(groups)
        starts = np.flatnonzero(np.diff(groups, prepend=groups[0] - 1))
        self._starts.extend(starts + first)
        self._group_ids.extend(groups[starts])

    def max_into(self, out: np.ndarray, values: np.ndarray) -> None:
        """``out[g] = max(values[i] for the items i of group g)`` for every group that has items
        (``np.maximum.at(out, groups, values[items])`` when ``out`` starts at -inf there)."""
        if self._items.size:
            out[self._group_ids.values] = np.maximum.reduceat(values[self._items.values], self._starts.values)
