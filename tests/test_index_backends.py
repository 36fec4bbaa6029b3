"""rotmem.index: FAISS and torch backends against brute-force ``torch.topk``."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rotmem.index import FaissIndex, TorchIndex, faiss_available, load_index, make_index, resolve_backend

BACKENDS = [
    "torch",
    pytest.param("faiss", marks=pytest.mark.skipif(not faiss_available(), reason="no faiss")),
]


def random_vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def brute_force(queries: np.ndarray, ids: np.ndarray, vectors: np.ndarray, k: int):
    scores = torch.from_numpy(queries) @ torch.from_numpy(vectors).T
    top = torch.topk(scores, min(k, len(ids)), dim=1)
    return top.values.numpy(), ids[top.indices.numpy()]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n, dim, k", [(1, 1, 1), (257, 17, 10), (1000, 64, 1000)])
def test_search_equals_brute_force(backend, n, dim, k):
    vectors, queries = random_vectors(n, dim), random_vectors(7, dim, seed=1)
    ids = np.arange(n, dtype=np.int64) * 5 + 3
    index = make_index(dim, backend=backend)
    index.add(ids, vectors)
    scores, found = index.search(queries, k)
    want_scores, want_ids = brute_force(queries, ids, vectors, k)
    assert len(index) == n
    np.testing.assert_array_equal(found, want_ids)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-5)


def test_torch_chunks_merge_exactly():
    vectors, queries = random_vectors(101, 9), random_vectors(11, 9, seed=2)
    ids = np.arange(101, dtype=np.int64)
    index = TorchIndex(9, row_chunk=7, query_chunk=3)
    index.add(ids, vectors)
    scores, found = index.search(queries, 12)
    want_scores, want_ids = brute_force(queries, ids, vectors, 12)
    np.testing.assert_array_equal(found, want_ids)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_result_type_follows_query_type(backend):
    index = make_index(4, backend=backend)
    index.add([0, 1], random_vectors(2, 4))
    scores, ids = index.search(random_vectors(3, 4), 2)
    assert isinstance(scores, np.ndarray) and isinstance(ids, np.ndarray) and ids.dtype == np.int64
    scores, ids = index.search(torch.from_numpy(random_vectors(3, 4)), 2)
    assert isinstance(scores, torch.Tensor) and ids.dtype == torch.int64 and scores.shape == (3, 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_k_is_clipped_and_empty_index_gives_empty_results(backend):
    index = make_index(3, backend=backend)
    scores, ids = index.search(random_vectors(2, 3), 5)
    assert scores.shape == (2, 0) and ids.shape == (2, 0)
    index.add([4, 9], random_vectors(2, 3))
    assert index.search(random_vectors(2, 3), 5)[1].shape == (2, 2)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 30)), min_size=1, max_size=40), st.sampled_from([0, 1])
)
def test_add_remove_sequences_match_brute_force(ops, which):
    backend = "torch" if which == 0 or not faiss_available() else "faiss"
    dim, rng = 6, np.random.default_rng(len(ops))
    index, stored = make_index(dim, backend=backend), {}
    for is_add, key in ops:
        if is_add and key not in stored:
            stored[key] = rng.standard_normal(dim).astype(np.float32)
            index.add([key], stored[key][None])
        elif not is_add and key in stored:
            assert index.remove([key]) == 1
            del stored[key]
    assert len(index) == len(stored)
    if stored:
        ids = np.array(sorted(stored), dtype=np.int64)
        vectors = np.stack([stored[i] for i in ids])
        query = rng.standard_normal((2, dim)).astype(np.float32)
        np.testing.assert_array_equal(index.search(query, 4)[1], brute_force(query, ids, vectors, 4)[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_input_names_the_problem(backend):
    index = make_index(4, backend=backend)
    index.add([1, 2], random_vectors(2, 4))
    with pytest.raises(ValueError, match="already in the index"):
        index.add([2], random_vectors(1, 4))
    with pytest.raises(ValueError, match="repeat"):
        index.add([7, 7], random_vectors(2, 4))
    with pytest.raises(KeyError, match="not in the index"):
        index.remove([5])
    with pytest.raises(ValueError, match=r"shape \[n, 4\]"):
        index.add([3], random_vectors(1, 5))
    with pytest.raises(ValueError, match="NaN"):
        index.add([3], np.full((1, 4), np.nan, dtype=np.float32))
    with pytest.raises(ValueError, match="non-negative"):
        index.add([-1], random_vectors(1, 4))
    with pytest.raises(ValueError, match="got 2 ids for 1 vectors"):
        index.add([5, 6], random_vectors(1, 4))
    with pytest.raises(ValueError, match="k must be a positive integer"):
        index.search(random_vectors(1, 4), 0)
    assert len(index) == 2  # failed calls stored nothing


@pytest.mark.parametrize("backend", BACKENDS)
def test_save_load_round_trip(backend, tmp_path):
    vectors, queries = random_vectors(50, 8), random_vectors(3, 8, seed=3)
    index = make_index(8, backend=backend)
    index.add(np.arange(50) * 2, vectors)
    index.remove([10, 20])
    path = str(tmp_path / "index.bin")
    index.save(path)
    loaded = load_index(path)
    assert type(loaded) is type(index) and len(loaded) == 48
    np.testing.assert_array_equal(loaded.search(queries, 5)[1], index.search(queries, 5)[1])
    with pytest.raises(ValueError, match="already in the index"):
        loaded.add([0], vectors[:1])  # the id set survives the round trip


@pytest.mark.skipif(not faiss_available(), reason="no faiss")
def test_ivf_scanning_every_list_is_exact():
    vectors, queries = random_vectors(2000, 16), random_vectors(5, 16, seed=4)
    ids = np.arange(2000, dtype=np.int64)
    index = make_index(16, backend="faiss", kind="ivf", nlist=8, nprobe=8)
    index.add(ids, vectors)
    np.testing.assert_array_equal(index.search(queries, 10)[1], brute_force(queries, ids, vectors, 10)[1])
    index.remove([int(index.search(queries, 1)[1][0, 0])])
    assert len(index) == 1999


@pytest.mark.skipif(not faiss_available(), reason="no faiss")
def test_ivf_round_trip_and_training_size(tmp_path):
    index = FaissIndex(4, kind="ivf", nlist=16)
    with pytest.raises(ValueError, match="nlist=16"):
        index.add(np.arange(10), random_vectors(10, 4))
    index.add(np.arange(100), random_vectors(100, 4))
    index.save(str(tmp_path / "ivf.faiss"))
    loaded = load_index(str(tmp_path / "ivf.faiss"), nprobe=16)
    assert loaded.kind == "ivf" and len(loaded) == 100


def test_ivf_needs_faiss():
    with pytest.raises(ValueError, match="needs FAISS"):
        make_index(4, backend="torch", kind="ivf")


def test_missing_faiss_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)  # makes ``import faiss`` raise ImportError
    with pytest.raises(ImportError, match="pip install faiss-cpu"):
        make_index(4, backend="faiss")
    assert resolve_backend("auto") == "torch"
    assert isinstance(make_index(4), TorchIndex)


def test_auto_backend_choice():
    expected = "faiss" if faiss_available() else "torch"
    assert resolve_backend("auto", "cpu") == expected
    with pytest.raises(ValueError, match="unknown index backend"):
        resolve_backend("annoy")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_torch_index_on_cuda_keeps_tensors_on_the_device():
    vectors, queries = random_vectors(3000, 32), random_vectors(9, 32, seed=5)
    ids = np.arange(3000, dtype=np.int64)
    index = make_index(32, backend="torch", device="cuda", row_chunk=1000)
    index.add(torch.from_numpy(ids).cuda(), torch.from_numpy(vectors).cuda())
    scores, found = index.search(torch.from_numpy(queries).cuda(), 20)
    assert scores.device.type == "cuda" and found.device.type == "cuda"
    want_scores, want_ids = brute_force(queries, ids, vectors, 20)
    np.testing.assert_array_equal(found.cpu().numpy(), want_ids)
    np.testing.assert_allclose(scores.cpu().numpy(), want_scores, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not faiss_available(), reason="no faiss")
def test_small_batches_scan_natively_as_faiss_searches():
    """A flat CPU search of 1 to SMALL_BATCH - 1 queries on one thread runs rotmem's scan: the ids
    FAISS's own paths find (2 threads: FAISS's BLAS), each query's result the same alone and in any
    such batch, equal scores in storage order, and the id cache and the int8 copy follow adds and
    removes."""
    from rotmem.index.faiss_index import native_scan_available

    if not native_scan_available():
        pytest.skip("rotmem's native extension is not built")
    vectors, queries = random_vectors(500, 33), random_vectors(9, 33, seed=4)
    ids = np.arange(500, dtype=np.int64)[::-1] * 3
    scan, blas = FaissIndex(33, device="cpu"), FaissIndex(33, device="cpu", small_batch_threads=2)
    for index in (scan, blas):
        index.add(ids, vectors)
    (scores, found), (_, blas_found) = scan.search(queries, 20), blas.search(queries, 20)
    np.testing.assert_array_equal(found, blas_found)
    np.testing.assert_allclose(scores, brute_force(queries, ids, vectors, 20)[0], rtol=1e-5, atol=1e-5)
    for j in range(8):
        pair_scores, pair_found = scan.search(queries[j : j + 2], 20)
        np.testing.assert_array_equal(pair_scores, scores[j : j + 2])
        np.testing.assert_array_equal(pair_found, found[j : j + 2])
        one_scores, one_found = scan.search(queries[j : j + 1], 20)
        np.testing.assert_array_equal(one_scores, scores[j : j + 1])
        np.testing.assert_array_equal(one_found, found[j : j + 1])
    twins = FaissIndex(4, device="cpu")
    twins.add([30, 10, 20, 40], np.tile(np.float32([[1, 0, 0, 0]]), (4, 1)))
    np.testing.assert_array_equal(twins.search(np.float32([[1, 0, 0, 0]] * 2), 3)[1], [[30, 10, 20]] * 2)
    scan.remove(found[0, :5])
    assert not set(found[0, :5]) & set(scan.search(queries[:2], 20)[1][0].tolist())
    scan.add([7], queries[:1] * 10)
    assert scan.search(queries[:2], 1)[1][0, 0] == 7
    assert scan.search(-queries[:1] * 10, 1)[1][0, 0] != 7
