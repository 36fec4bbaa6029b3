"""``top_inner_products`` (native CPU kernel, ``csrc/cpu/top_inner_products.cpp``): the top ``k``
rows by the exact scores of ``inner_products``, found through an int8 copy, must be exactly the
reference's (a stable sort of the full scan: same rows, same order, same score bits) on every
instruction set the CPU runs, for odd shapes, ties, rows the copy cannot tell apart and rows it
codes badly; the copy's error bounds hold; bad input is named; opcheck."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rotmem.index.int8_rows import Int8Rows, quantise
from rotmem.ops import reference

native = pytest.importorskip("rotmem.ops.native")
if not native.is_available("cpu"):
    pytest.skip(native.unavailable_reason("cpu"), allow_module_level=True)


def _search(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    arrays = (vectors, *quantise(vectors), queries)
    return native.top_inner_products(*(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays), k)


def _expected(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, q = torch.from_numpy(vectors), torch.from_numpy(queries)
    return reference.top_inner_products(x, q, k, scores=native.inner_products(x, q))


def _assert_same(vectors: np.ndarray, queries: np.ndarray, k: int) -> None:
    scores, rows = _search(vectors, queries, k)
    want_scores, want_rows = _expected(vectors, queries, k)
    assert rows.dtype == torch.int64 and scores.dtype == torch.float32
    assert torch.equal(rows, want_rows)
    assert torch.equal(scores, want_scores)


def _random(n: int, d: int, b: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(np.float32), rng.standard_normal((b, d)).astype(np.float32)


# widths off the 16 int16 lanes and the 8 float lanes; batches off the 4-query and 2-row tiles
@pytest.mark.parametrize(
    "n, d, b, k",
    [(1, 1, 1, 1), (7, 5, 3, 4), (40, 17, 1, 10), (301, 384, 6, 64), (500, 33, 9, 500), (64, 16, 5, 0)],
)
def test_the_top_rows_are_the_full_scans(cpu_isa, n, d, b, k):
    _assert_same(*_random(n, d, b), k)


def test_k_beyond_the_rows_gives_every_row(cpu_isa):
    vectors, queries = _random(12, 8, 2, seed=1)
    scores, rows = _search(vectors, queries, 50)
    assert rows.shape == (2, 12)
    _assert_same(vectors, queries, 50)


def test_equal_scores_come_in_row_order(cpu_isa):
    vectors = np.tile(np.float32([[0.5, -1.0, 2.0, 0.25]]), (30, 1))
    vectors[[3, 17]] *= 2  # two rows above the twenty-eight twins
    queries = np.float32([[1, 0, 1, 0], [0.5, 0.5, 0.5, 0.5]])
    scores, rows = _search(vectors, queries, 5)
    assert rows.tolist() == [[3, 17, 0, 1, 2]] * 2
    _assert_same(vectors, queries, 5)


def test_rows_the_copy_cannot_tell_apart(cpu_isa):
    """Rows that differ far below the int8 step have equal estimates: every one is a candidate, and
    the exact scores decide."""
    rng = np.random.default_rng(2)
    base = rng.standard_normal(64).astype(np.float32)
    vectors = (base + 1e-5 * rng.standard_normal((400, 64))).astype(np.float32)
    _assert_same(vectors, rng.standard_normal((3, 64)).astype(np.float32), 37)


def test_rows_the_copy_codes_badly(cpu_isa):
    """One large element per row makes the int8 step coarse for the rest (large errors); zero rows
    and rows of tiny or huge magnitude keep their exact order."""
    vectors, queries = _random(300, 40, 4, seed=3)
    vectors[::3, 0] = 300.0
    vectors[1::7] = 0.0
    vectors[2::11] *= 1e-30
    vectors[5::13] *= 1e20
    _assert_same(vectors, queries, 100)


@pytest.mark.parametrize(
    "query_scale, row_scale", [(1e-33, 1.0), (1e-25, 1e-10), (1e-3, 1e-30), (1e15, 1e15)]
)
def test_magnitudes_far_from_one(cpu_isa, query_scale, row_scale):
    """Queries too small to code (rescored against every row), estimates whose scale product falls
    in float32's subnormal range, and large magnitudes: still the exact top k."""
    vectors, queries = _random(200, 24, 3, seed=8)
    _assert_same((vectors * row_scale).astype(np.float32), (queries * query_scale).astype(np.float32), 30)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 80),
    d=st.integers(1, 40),
    b=st.integers(1, 7),
    k=st.integers(0, 90),
    clusters=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
)
def test_any_shape_and_clustering(n, d, b, k, clusters, seed):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, d))
    vectors = (centres[rng.integers(0, clusters, n)] + 1e-3 * rng.standard_normal((n, d))).astype(np.float32)
    _assert_same(vectors, rng.standard_normal((b, d)).astype(np.float32), k)


def test_the_copy_bounds_its_error_and_grows_by_appends():
    vectors, _ = _random(1000, 50, 1, seed=5)
    codes, scales, errors, norms = quantise(vectors)
    assert codes.dtype == np.int8 and np.abs(codes.astype(np.int64)).max() <= 127
    copy = codes.astype(np.float64) * scales.astype(np.float64)[:, None]
    true_errors = np.linalg.norm(vectors.astype(np.float64) - copy, axis=1)
    assert (errors >= true_errors).all() and (errors <= true_errors * (1 + 1e-6) + 1e-30).all()
    assert (norms >= np.linalg.norm(vectors.astype(np.float64), axis=1)).all()
    # each element within half a step of its row's scale
    assert (np.abs(vectors - copy) <= scales[:, None] * (0.5 + 1e-6)).all()
    rows = Int8Rows(50)
    for start, stop in ((0, 1), (1, 400), (400, 401), (401, 1000)):
        rows.append(vectors[start:stop])
    for got, want in zip(rows.arrays(), (codes, scales, errors, norms), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: {**a, "queries": a["queries"][:, :3]}, "vectors have width 8, queries 3"),
        (lambda a: {**a, "codes": a["codes"].float()}, "int8 codes"),
        (lambda a: {**a, "scales": a["scales"][:2]}, "must be [N] with N = 10"),
        (lambda a: {**a, "vectors": a["vectors"].double()}, "float32 vectors and queries"),
        (lambda a: {**a, "queries": a["queries"] * float("nan")}, "queries hold NaN or inf"),
        (lambda a: {**a, "k": -1}, "k must be >= 0, got -1"),
        (lambda a: {**a, "norms": a["norms"] + float("inf")}, "norms hold NaN or inf"),
    ],
)
def test_bad_input_is_named(change, message):
    vectors, queries = _random(10, 8, 2, seed=6)
    arrays = dict(zip(("codes", "scales", "errors", "norms"), quantise(vectors), strict=True))
    args = {"vectors": vectors, **arrays, "queries": queries}
    args = {name: torch.from_numpy(value) for name, value in args.items()} | {"k": 3}
    with pytest.raises(RuntimeError, match=re.escape(message)):
        torch.ops.rotmem.top_inner_products(**change(args))


def test_opcheck():
    vectors, queries = _random(30, 12, 3, seed=7)
    arrays = [torch.from_numpy(a) for a in (vectors, *quantise(vectors), queries)]
    torch.library.opcheck(torch.ops.rotmem.top_inner_products, (*arrays, 5))
