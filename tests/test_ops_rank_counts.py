"""``filtered_rank_counts``: the reference against a per-candidate loop, every backend against the
reference, exactly.

Exact equality is the right test here: queries and entities hold small integers, so every score is
an integer far below 2**8 and every backend's products are exact in float32, float64 and bfloat16,
whatever the summation order; ties are then common, which is what the counts must get right. The
tiled backends run with tiles small enough to need several entity chunks (target scores then come
from a first sweep) and with whole rows.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rotmem.ops import ce_tiles, native, reference
from rotmem.ops.backend import _load, available
from rotmem.ops.rank_csr import check_filter_csr, csr_from_rows, permute_rows

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = [torch.float32, torch.float64, torch.bfloat16]


def problem(batch, entities, dim, filters=2, seed=0, dtype=torch.float32):
    """Integer-valued ``q``, ``entity``, targets and ``filters`` random CSR filters (some hold the target)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(-2, 3, (batch, dim), generator=g).to(dtype)
    entity = torch.randint(-2, 3, (entities, dim), generator=g).to(dtype)
    target = torch.randint(0, entities, (batch,), generator=g)
    rows = []
    for _ in range(filters):
        lists = []
        for b in range(batch):
            ids = torch.randint(
                0, entities, (int(torch.randint(0, 6, (1,), generator=g)),), generator=g
            ).tolist()
            lists.append(ids + ([int(target[b])] if b % 3 == 0 else []))
        rows.append(lists)
    filter_ptr, filter_idx = csr_from_rows(rows)
    return q, entity, target, filter_ptr, filter_idx


def loop_counts(q, entity, target, filter_ptr, filter_idx, target_score=None, offset=0):
    """The definition, one candidate at a time, in float64."""
    scores = q.double() @ entity.double().t()
    higher = torch.zeros(filter_ptr.shape[0], q.shape[0], dtype=torch.int64)
    ties = torch.zeros_like(higher)
    for f in range(filter_ptr.shape[0]):
        for b in range(q.shape[0]):
            s = float(target_score[b]) if target_score is not None else float(scores[b, target[b] - offset])
            removed = set(filter_idx[filter_ptr[f, b] : filter_ptr[f, b + 1]].tolist()) | {int(target[b])}
            if not math.isfinite(s) or not scores[b].isfinite().all():
                higher[f, b] = ties[f, b] = -1
                continue
            for k in range(entity.shape[0]):
                if k + offset not in removed:
                    higher[f, b] += int(scores[b, k] > s)
                    ties[f, b] += int(scores[b, k] == s)
    return higher, ties


def assert_same(out, expected, label=""):
    for name, o, e in zip(("higher", "ties"), out, expected, strict=True):
        assert o.dtype == torch.int64 and o.shape == e.shape, f"{label} {name}: {o.dtype} {tuple(o.shape)}"
        assert torch.equal(o.cpu(), e.cpu()), f"{label} {name}:\n{o}\n!=\n{e}"


# --- the reference is the definition ------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    batch=st.integers(1, 6),
    entities=st.integers(1, 12),
    dim=st.integers(1, 5),
    seed=st.integers(0, 2**16),
    shard=st.booleans(),
)
def test_reference_matches_the_definition(batch, entities, dim, seed, shard):
    q, entity, target, ptr, idx = problem(batch, entities, dim, seed=seed)
    if shard:  # a shard of the middle rows, target scores given
        offset, rows = entities // 3, max(1, entities // 2)
        scores = (q.double() @ entity.double().t()).gather(1, target[:, None]).squeeze(1)
        got = reference.filtered_rank_counts(
            q, entity[offset : offset + rows], target, ptr, idx, scores, offset
        )
        assert_same(got, loop_counts(q, entity[offset : offset + rows], target, ptr, idx, scores, offset))
    else:
        assert_same(
            reference.filtered_rank_counts(q, entity, target, ptr, idx),
            loop_counts(q, entity, target, ptr, idx),
        )


def backends():
    """Every backend's ``filtered_rank_counts`` that runs here (Triton under the interpreter on the CPU)."""
    found = [reference.filtered_rank_counts]
    found += [native.filtered_rank_counts] if native.is_available(DEVICE) else []
    found += [_load("triton").filtered_rank_counts] if available("triton", DEVICE) else []
    return found


def test_all_equal_scores_tie():
    """A model whose scores all tie is not flattered: every other candidate ties with the target."""
    q, entity, target, ptr, idx = (t.to(DEVICE) for t in problem(7, 30, 4, filters=1))
    filtered = [set(idx[ptr[0, b] : ptr[0, b + 1]].tolist()) - {int(t)} for b, t in enumerate(target)]
    expected_ties = torch.tensor([30 - 1 - len(ids) for ids in filtered])
    for counts in backends():
        higher, ties = counts(torch.zeros_like(q), entity, target, ptr, idx)
        assert torch.equal(higher[0].cpu(), torch.zeros(7, dtype=torch.int64)), counts.__module__
        assert torch.equal(ties[0].cpu(), expected_ties), counts.__module__


def test_csr_checks_name_the_problem():
    _, _, _, ptr, idx = problem(4, 10, 2, filters=1)
    with pytest.raises(ValueError, match="filter_ptr must be int64"):
        check_filter_csr(ptr[:, :-1], idx, 4)
    unsorted = torch.tensor([[0, 2, 2, 2, 2]]), torch.tensor([5, 3])
    with pytest.raises(ValueError, match="strictly increasing"):
        check_filter_csr(*unsorted, 4)
    repeated = torch.tensor([[0, 2, 2, 2, 2]]), torch.tensor([3, 3])
    with pytest.raises(ValueError, match="strictly increasing"):
        check_filter_csr(*repeated, 4)
    across_rows = torch.tensor([[0, 1, 2, 2, 2]]), torch.tensor([5, 3])  # a new row may start lower
    check_filter_csr(*across_rows, 4)
    with pytest.raises(ValueError, match="non-decreasing offsets"):
        check_filter_csr(torch.tensor([[0, 1, 0, 2, 2]]), torch.tensor([5, 3]), 4)


def test_permute_rows_keeps_each_rows_ids():
    _, _, _, ptr, idx = problem(9, 20, 2, filters=2, seed=3)
    order = torch.randperm(9, generator=torch.Generator().manual_seed(0))
    new_ptr, new_idx = permute_rows(ptr, idx, order)
    for f in range(2):
        for i, b in enumerate(order.tolist()):
            assert (
                new_idx[new_ptr[f, i] : new_ptr[f, i + 1]].tolist() == idx[ptr[f, b] : ptr[f, b + 1]].tolist()
            )


# --- backends against the reference ---------------------------------------------------------------

NATIVE = pytest.mark.skipif(not native.is_available("cpu"), reason=native.unavailable_reason("cpu"))
NATIVE_DEVICES = ["cpu"] + (["cuda"] if native.is_available("cuda") else [])


@NATIVE
@pytest.mark.parametrize("device", NATIVE_DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "batch, entities, block_rows, block_cols",
    [(1, 1, 1, 1), (37, 101, 8, 13), (37, 101, 64, 1000), (200, 333, 50, 40), (3, 1000, 2, 7)],
)
def test_native_matches_reference(device, dtype, batch, entities, block_rows, block_cols):
    q, entity, target, ptr, idx = (t.to(device) for t in problem(batch, entities, 10, dtype=dtype))
    expected = reference.filtered_rank_counts(q, entity, target, ptr, idx)
    got = native.filtered_rank_counts_tiled(q, entity, target, ptr, idx, None, 0, block_rows, block_cols)
    assert_same(got, expected, f"{batch}x{entities} tiles {block_rows}x{block_cols}")
    # sorted by target, as the public function runs it when the table is chunked
    assert_same(native.filtered_rank_counts(q, entity, target, ptr, idx), expected, "default tiles")


@NATIVE
@pytest.mark.parametrize("device", NATIVE_DEVICES)
@pytest.mark.parametrize("tile", [1 << 23, 70])
def test_native_shards_sum_to_the_whole_table(device, tile, monkeypatch):
    """Each shard's owners give the target scores (read from their tiles), every shard counts against
    them, and the sums are the whole table's counts."""
    monkeypatch.setattr(ce_tiles, "CE_TILE_ELEMENTS", tile)  # 70: row blocks and entity chunks
    q, entity, target, ptr, idx = (t.to(device) for t in problem(40, 90, 6, seed=5))
    shards = ((0, 31), (31, 60), (60, 90))
    scores = sum(native.target_scores(q, entity[lo:hi], target, lo) for lo, hi in shards)
    assert torch.equal(scores, reference.target_scores(q, entity, target))
    total_h, total_e = 0, 0
    for lo, hi in shards:
        assert torch.equal(
            native.target_scores(q, entity[lo:hi], target, lo),
            reference.target_scores(q, entity[lo:hi], target, lo),
        )
        part = native.filtered_rank_counts(q, entity[lo:hi], target, ptr, idx, scores, lo)
        assert_same(
            part, reference.filtered_rank_counts(q, entity[lo:hi], target, ptr, idx, scores, lo), f"{lo}:{hi}"
        )
        total_h, total_e = total_h + part[0], total_e + part[1]
    assert_same(
        (total_h, total_e), reference.filtered_rank_counts(q, entity, target, ptr, idx), "summed shards"
    )


@NATIVE
@pytest.mark.parametrize("device", NATIVE_DEVICES)
def test_native_non_finite_rows_are_marked(device):
    q, entity, target, ptr, idx = (t.to(device) for t in problem(6, 20, 3))
    q[2, 0] = float("nan")  # every score of query 2
    expected = reference.filtered_rank_counts(q, entity, target, ptr, idx)
    assert expected[0][:, 2].eq(-1).all() and expected[0][:, 3].ge(0).all()
    assert_same(native.filtered_rank_counts_tiled(q, entity, target, ptr, idx, None, 0, 4, 6), expected)
    entity[0, 0] = float("inf")  # every query's score of candidate 0 (filtered or not) is ±inf or NaN
    got = native.filtered_rank_counts_tiled(q, entity, target, ptr, idx, None, 0, 4, 6)
    assert_same(got, reference.filtered_rank_counts(q, entity, target, ptr, idx))
    assert got[0].eq(-1).all()


@NATIVE
def test_native_rejects_a_target_outside_the_table():
    q, entity, target, ptr, idx = problem(4, 10, 2)
    target[2] = 10
    with pytest.raises(RuntimeError, match=r"target\[2\] = 10 is outside"):
        native.filtered_rank_counts(q, entity, target, ptr, idx)


@NATIVE
def test_native_opcheck():
    q, entity, target, ptr, idx = problem(9, 30, 4)
    scores = reference.score_all(q, entity).gather(1, target[:, None]).squeeze(1)
    op = torch.ops.rotmem.filtered_rank_counts.default
    for args in (
        (q, entity, target, None, ptr, idx, 0, 4, 7),
        (q, entity[5:20], target, scores, ptr, idx, 5, 9, 30),
    ):
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))


TRITON = _load("triton") if available("triton", DEVICE) else None


@pytest.mark.skipif(
    TRITON is None, reason=f"Triton cannot run on {DEVICE} here (TRITON_INTERPRET=1 on the CPU)"
)
@pytest.mark.parametrize(
    "dtype, batch, entities, tile",
    [(torch.float32, 9, 40, 1 << 23), (torch.bfloat16, 9, 40, 1 << 23), (torch.float32, 6, 40, 60)],
)
def test_triton_matches_reference(monkeypatch, dtype, batch, entities, tile):
    monkeypatch.setattr(ce_tiles, "CE_TILE_ELEMENTS", tile)  # 60: rows of 6 in chunks of 10 entities
    q, entity, target, ptr, idx = (t.to(DEVICE) for t in problem(batch, entities, 6, dtype=dtype))
    q[1, 0] = float("nan")
    assert_same(
        TRITON.filtered_rank_counts(q, entity, target, ptr, idx),
        reference.filtered_rank_counts(q, entity, target, ptr, idx),
    )
    scores = sum(
        TRITON.target_scores(q, entity[lo:hi], target, lo) for lo, hi in ((0, 10), (10, 33), (33, 40))
    )
    torch.testing.assert_close(
        scores, reference.target_scores(q, entity, target), rtol=0, atol=0, equal_nan=True
    )
    assert_same(
        TRITON.filtered_rank_counts(q, entity[10:30], target, ptr, idx, scores, 10),
        reference.filtered_rank_counts(q, entity[10:30], target, ptr, idx, scores, 10),
        "shard",
    )
