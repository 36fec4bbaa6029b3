"""``GroupedMax``: each group's largest value, the same bits as ``np.maximum.at`` over the pairs,
whatever order the pairs arrive in (new groups appended, older groups growing, NaN values)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rotmem.memory.retrieval.grouped_max import GroupedMax

pairs = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 12)), max_size=30)


@settings(max_examples=200, deadline=None)
@given(st.lists(pairs, min_size=1, max_size=6), st.integers(0, 2**32 - 1))
def test_the_same_as_maximum_at_after_every_add(adds, seed):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(41).astype(np.float32)
    values[rng.integers(0, 41, 3)] = rng.choice([np.nan, np.inf, -np.inf], 3)
    grouped, items, groups = GroupedMax(), [], []
    for add in adds:
        grouped.add(np.array([i for i, _ in add], np.int64), np.array([g for _, g in add], np.int64))
        items += [i for i, _ in add]
        groups += [g for _, g in add]
        expected = np.full(13, -np.inf, np.float32)
        with np.errstate(invalid="ignore"):  # NaN among the values
            np.maximum.at(expected, np.array(groups, np.int64), values[np.array(items, np.int64)])
        got = np.full(13, -np.inf, np.float32)
        grouped.max_into(got, values)
        np.testing.assert_array_equal(got.view(np.int32), expected.view(np.int32))  # bit for bit
        assert len(grouped) == len(items)


def test_new_groups_are_appended_and_an_older_group_that_grows_is_sorted_in():
    grouped = GroupedMax()
    grouped.add(np.array([0, 1, 2]), np.array([1, 0, 1]))
    grouped.add(np.array([3]), np.array([2]))  # a new group after the others
    grouped.add(np.array([4]), np.array([0]))  # the oldest group gains an item
    values = np.array([1.0, 5.0, 3.0, -2.0, 7.0], np.float32)
    out = np.full(4, -np.inf, np.float32)
    grouped.max_into(out, values)
    np.testing.assert_array_equal(out, [7.0, 3.0, -2.0, -np.inf])  # group 3 has no items


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 8), pairs), min_size=1, max_size=6), st.integers(0, 2**32 - 1))
def test_an_aligned_prefix_item_i_in_group_i_gives_the_same_bits(adds, seed):
    """Facts without source turns, each its own unit, arrive as item i in group i; other pairs may
    follow, break the alignment or join older groups (the prefix copied as a slice, module docs)."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(90).astype(np.float32)
    values[rng.integers(0, 90, 3)] = rng.choice([np.nan, np.inf, -np.inf], 3)
    grouped, items, groups, next_item = GroupedMax(), [], [], 0
    for aligned, others in adds:
        run = list(range(next_item, next_item + aligned))
        next_item += aligned
        new = [(i, i) for i in run] + [(40 + i, g) for i, g in others]
        grouped.add(np.array([i for i, _ in new], np.int64), np.array([g for _, g in new], np.int64))
        items += [i for i, _ in new]
        groups += [g for _, g in new]
        expected = np.full(60, -np.inf, np.float32)
        with np.errstate(invalid="ignore"):
            np.maximum.at(expected, np.array(groups, np.int64), values[np.array(items, np.int64)])
        got = np.full(60, -np.inf, np.float32)
        grouped.max_into(got, values)
        np.testing.assert_array_equal(got.view(np.int32), expected.view(np.int32))


def test_the_aligned_prefix_grows_with_each_aligned_add_and_stops_at_the_first_other_pair():
    grouped = GroupedMax()
    grouped.add(np.arange(4), np.arange(4))
    grouped.add(np.arange(4, 6), np.arange(4, 6))
    assert grouped._aligned == 6  # copied as one slice
    grouped.add(np.array([9, 6]), np.array([6, 7]))  # item 9 in group 6: the alignment ends there
    grouped.add(np.array([8]), np.array([8]))
    assert grouped._aligned == 6
    values = np.arange(10, dtype=np.float32)
    out = np.full(9, -np.inf, np.float32)
    grouped.max_into(out, values)
    np.testing.assert_array_equal(out, [0, 1, 2, 3, 4, 5, 9, 6, 8])
