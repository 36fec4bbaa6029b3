"""``GroupedMax``: the largest value of each group, over items that join groups as a store grows.

The hybrid retriever scores an evidence unit by its best fact: ``np.maximum.at(out, groups,
values[items])`` over every (fact, unit) pair, once per question. ``ufunc.at`` pays a per-item cost,
and so does ``np.maximum.reduceat`` per group (one inner-loop call each). Most units have one fact,
so the pairs are kept in two parts: the groups of one item, written by one gather and scatter, and
the others, sorted by group, reduced by ``np.maximum.reduceat``. The maximum is exact, so the result
is the same bit for bit (a NaN in a group gives NaN either way).

Most often (facts stored without source turns, each its own unit) the singles also start as item
``i`` in group ``i``: that prefix is copied as one slice, with no index arrays read.

The parts are kept as the store grows: new pairs are split and appended when every group they join
comes after the groups already held (new sessions' units); otherwise (a new fact for an older unit)
both parts are built again from every pair.
"""

from __future__ import annotations

import numpy as np

from rotmem.index.growing import GrowingArray


class GroupedMax:
    """(item, group) pairs (module docs); ``max_into(out, values)`` writes each group's largest
    ``values[item]`` into ``out[group]``."""

    def __init__(self) -> None:
        self._items, self._groups = GrowingArray(np.int64), GrowingArray(np.int64)  # every pair, as added
        self._single_items, self._single_groups = GrowingArray(np.int64), GrowingArray(np.int64)
        self._shared_items = GrowingArray(np.int64)  # items of groups with several, sorted by group
        self._shared_starts = GrowingArray(np.int64)  # where each such group's items begin
        self._shared_groups = GrowingArray(np.int64)  # the group of each start
        self._last = -1  # the largest group held
        self._aligned = 0  # singles 0 .. _aligned - 1 are item i in group i (module docs)

    def __len__(self) -> int:
        return self._items.size

    def add(self, items: np.ndarray, groups: np.ndarray) -> None:
        """Add the pairs ``(items[i], groups[i])`` (``[m]`` int64 each)."""
        items, groups = np.asarray(items, np.int64), np.asarray(groups, np.int64)
        if items.size == 0:
            return
        self._items.extend(items)
        self._groups.extend(groups)
        if groups.min() <= self._last:  # an older group grows: both parts anew
            parts = (self._single_items, self._single_groups, self._shared_items, self._shared_starts)
            for part in (*parts, self._shared_groups):
                part.clear()
            self._aligned = 0
            items, groups = self._items.values, self._groups.values
        self._split(items, groups)
        self._last = int(self._groups.values.max())

    def _split(self, items: np.ndarray, groups: np.ndarray) -> None:
        """Append pairs of groups after every group held to the two parts."""
        order = np.argsort(groups, kind="stable")
        items, groups = items[order], groups[order]
        starts = np.flatnonzero(np.diff(groups, prepend=groups[0] - 1))
        sizes = np.diff(starts, append=groups.size)
        single = np.repeat(sizes == 1, sizes)
        held = self._single_items.size
        self._single_items.extend(items[single])
        self._single_groups.extend(groups[single])
        if self._aligned == held:  # the aligned prefix may go on into the new singles
            position = np.arange(held, self._single_items.size)
            new_items, new_groups = self._single_items.values[held:], self._single_groups.values[held:]
            aligned = (new_items == position) & (new_groups == position)
            self._aligned = held + (int(np.argmin(aligned)) if not aligned.all() else aligned.size)
        shared = ~single
        if shared.any():
            first = self._shared_items.size
            shared_groups = groups[shared]
            shared_starts = np.flatnonzero(np.diff(shared_groups, prepend=shared_groups[0] - 1))
            self._shared_items.extend(items[shared])
            self._shared_starts.extend(shared_starts + first)
            self._shared_groups.extend(shared_groups[shared_starts])

    def max_into(self, out: np.ndarray, values: np.ndarray) -> None:
        """``out[g] = max(values[i] for the items i of group g)`` for every group that has items
        (``np.maximum.at(out, groups, values[items])`` when ``out`` starts at -inf there)."""
        aligned = self._aligned
        out[:aligned] = values[:aligned]
        out[self._single_groups.values[aligned:]] = values[self._single_items.values[aligned:]]
        if self._shared_items.size:
            shared = np.maximum.reduceat(values[self._shared_items.values], self._shared_starts.values)
            out[self._shared_groups.values] = shared
