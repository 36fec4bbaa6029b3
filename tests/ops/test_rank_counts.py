"""``filtered_rank_counts`` and ``target_scores``: the reference against a per-candidate loop, every
backend here (``tests/ops/backends.py``) against the reference, exactly.

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

from rotmem.ops import ce_tiles, reference
from rotmem.ops.rank_csr import check_filter_csr, csr_from_rows, permute_rows
from tests.ops import backends

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


@pytest.mark.parametrize(
    "device",
    ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU"))],
)
def test_csr_checks_name_the_problem(device):
    def csr(ptr, idx):
        return torch.tensor(ptr, device=device), torch.tensor(idx, device=device)

    _, _, _, ptr, idx = (t.to(device) for t in problem(4, 10, 2, filters=1))
    with pytest.raises(ValueError, match="filter_ptr must be int64"):
        check_filter_csr(ptr[:, :-1], idx, 4)
    with pytest.raises(ValueError, match="strictly increasing"):
        check_filter_csr(*csr([[0, 2, 2, 2, 2]], [5, 3]), 4)  # unsorted
    with pytest.raises(ValueError, match="strictly increasing"):
        check_filter_csr(*csr([[0, 2, 2, 2, 2]], [3, 3]), 4)  # repeated
    check_filter_csr(*csr([[0, 1, 2, 2, 2]], [5, 3]), 4)  # a new row may start lower
    with pytest.raises(ValueError, match="non-decreasing offsets"):
        check_filter_csr(*csr([[0, 1, 0, 2, 2]], [5, 3]), 4)


def test_permute_rows_keeps_each_rows_ids():
    _, _, _, ptr, idx = problem(9, 20, 2, filters=2, seed=3)
    order = torch.randperm(9, generator=torch.Generator().manual_seed(0))
    new_ptr, new_idx = permute_rows(ptr, idx, order)
    for f in range(2):
        for i, b in enumerate(order.tolist()):
            assert (
                new_idx[new_ptr[f, i] : new_ptr[f, i + 1]].tolist() == idx[ptr[f, b] : ptr[f, b + 1]].tolist()
            )


# --- every backend against the reference ----------------------------------------------------------

# (batch, entities, tiles): tiles (elements, min rows) cut the scores into row blocks and entity
# chunks (``ce_tiles.cross_entropy_blocks``); None: the default (whole rows here)
CASES = [
    (1, 1, None),
    (37, 101, (8 * 13, 8)),
    (37, 101, None),
    (200, 333, (50 * 40, 50)),
    (3, 1000, (2 * 7, 2)),
    (6, 40, (6 * 10, 6)),
]
# the Triton interpreter's few seconds each (one case with entity chunks); the rest on a GPU
INTERPRETED = {(1, 1, None), (37, 101, None), (6, 40, (6 * 10, 6))}


def use_tiles(monkeypatch, tiles: tuple[int, int] | None) -> None:
    if tiles is not None:
        monkeypatch.setattr(ce_tiles, "CE_TILE_ELEMENTS", tiles[0])
        monkeypatch.setattr(ce_tiles, "CE_MIN_BLOCK_ROWS", tiles[1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch, entities, tiles", CASES)
def test_matches_reference(backend, dtype, batch, entities, tiles, monkeypatch):
    """Exact counts, one tile or many (rows sorted by target when the table is chunked); a row with
    a NaN score is marked -1."""
    if backend.interpreted and (batch, entities, tiles) not in INTERPRETED:
        pytest.skip("too slow for the Triton interpreter: runs compiled on a GPU")
    use_tiles(monkeypatch, tiles)
    q, entity, target, ptr, idx = (t.to(backend.device) for t in problem(batch, entities, 10, dtype=dtype))
    if batch > 1:
        q[1, 0] = float("nan")
    got = backend.ops.filtered_rank_counts(q, entity, target, ptr, idx)
    assert_same(
        got, reference.filtered_rank_counts(q, entity, target, ptr, idx), f"{batch}x{entities} {tiles}"
    )


def test_all_equal_scores_tie(backend):
    """A model whose scores all tie is not flattered: every other candidate ties with the target."""
    q, entity, target, ptr, idx = (t.to(backend.device) for t in problem(7, 30, 4, filters=1))
    filtered = [set(idx[ptr[0, b] : ptr[0, b + 1]].tolist()) - {int(t)} for b, t in enumerate(target)]
    expected_ties = torch.tensor([30 - 1 - len(ids) for ids in filtered])
    higher, ties = backend.ops.filtered_rank_counts(torch.zeros_like(q), entity, target, ptr, idx)
    assert torch.equal(higher[0].cpu(), torch.zeros(7, dtype=torch.int64))
    assert torch.equal(ties[0].cpu(), expected_ties)


@pytest.mark.parametrize("tiles", [None, (70, 4)], ids=["one-tile", "tiles"])
def test_shards_sum_to_the_whole_table(backend, tiles, monkeypatch):
    """Each shard's owners give the target scores (read from their tiles), every shard counts against
    them, and the sums are the whole table's counts."""
    use_tiles(monkeypatch, tiles)
    q, entity, target, ptr, idx = (t.to(backend.device) for t in problem(40, 90, 6, seed=5))
    ops, shards = backend.ops, ((0, 31), (31, 60), (60, 90))
    scores = sum(ops.target_scores(q, entity[lo:hi], target, lo) for lo, hi in shards)
    assert torch.equal(scores, reference.target_scores(q, entity, target))
    total_h, total_e = 0, 0
    for lo, hi in shards:
        assert torch.equal(
            ops.target_scores(q, entity[lo:hi], target, lo),
            reference.target_scores(q, entity[lo:hi], target, lo),
        )
        part = ops.filtered_rank_counts(q, entity[lo:hi], target, ptr, idx, scores, lo)
        want = reference.filtered_rank_counts(q, entity[lo:hi], target, ptr, idx, scores, lo)
        assert_same(part, want, f"{lo}:{hi}")
        total_h, total_e = total_h + part[0], total_e + part[1]
    assert_same(
        (total_h, total_e), reference.filtered_rank_counts(q, entity, target, ptr, idx), "summed shards"
    )


def test_non_finite_rows_are_marked(backend, monkeypatch):
    use_tiles(monkeypatch, (4 * 6, 4))
    q, entity, target, ptr, idx = (t.to(backend.device) for t in problem(6, 20, 3))
    q[2, 0] = float("nan")  # every score of query 2
    expected = reference.filtered_rank_counts(q, entity, target, ptr, idx)
    assert expected[0][:, 2].eq(-1).all() and expected[0][:, 3].ge(0).all()
    assert_same(backend.ops.filtered_rank_counts(q, entity, target, ptr, idx), expected)
    entity[0, 0] = float("inf")  # every query's score of candidate 0 (filtered or not) is ±inf or NaN
    got = backend.ops.filtered_rank_counts(q, entity, target, ptr, idx)
    assert_same(got, reference.filtered_rank_counts(q, entity, target, ptr, idx))
    assert got[0].eq(-1).all()


def test_a_target_outside_the_table_is_named(backend):
    q, entity, target, ptr, idx = (t.to(backend.device) for t in problem(4, 10, 2))
    target[2] = 10
    with pytest.raises(IndexError, match=r"^filtered_rank_counts: target\[2\] = 10 is out of range"):
        backend.ops.filtered_rank_counts(q, entity, target, ptr, idx)


@pytest.mark.parametrize("backend", backends.params(("native",), per_isa=False), indirect=True)
def test_native_opcheck(backend):
    q, entity, target, ptr, idx = (t.to(backend.device) for t in problem(9, 30, 4))
    scores = reference.score_all(q, entity).gather(1, target[:, None]).squeeze(1)
    op = torch.ops.rotmem.filtered_rank_counts.default
    for args in (
        (q, entity, target, None, ptr, idx, 0, 4, 7),
        (q, entity[5:20], target, scores, ptr, idx, 5, 9, 30),
    ):
        torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("backend", backends.params(("native",), per_isa=False), indirect=True)
def test_the_native_op_checks_its_filter_offsets_itself(backend):
    """Called directly (no Python wrapper), the op still refuses offsets past filter_idx."""
    q, entity, target, ptr, idx = (t.to(backend.device) for t in problem(4, 10, 2, filters=1))
    ptr = ptr.clone()
    ptr[0, -1] = idx.numel() + 1
    with pytest.raises(
        ValueError, match=r"^rotmem::filtered_rank_counts: filter_ptr rows must be non-decreasing offsets"
    ):
        torch.ops.rotmem.filtered_rank_counts(q, entity, target, None, ptr, idx, 0, 4, 10)
