"""rotmem.index.EntityIndex: temporal entity queries through RoMem's query-side unrotation."""

from __future__ import annotations

import pytest
import torch

from rotmem import RoMem
from rotmem.index import EntityIndex, faiss_available, make_index

BACKENDS = [
    "torch",
    pytest.param("faiss", marks=pytest.mark.skipif(not faiss_available(), reason="no faiss")),
]


def small_model(backbone: str = "chronor") -> RoMem:
    torch.manual_seed(0)
    model = RoMem(83, 5, dim=24, k=3, backbone=backbone, speed="gate", tau0=100.0)
    model.speed.set_speeds(torch.tensor([0.0, 0.2, 0.5, 1.0, 0.7]))
    return model


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("backbone", ["chronor", "distmult"])
def test_tails_and_heads_match_model_scores(backend, backbone):
    model = small_model(backbone)
    index = EntityIndex.from_model(model, backend=backend)
    h, r, t = torch.tensor([0, 5, 82, 7]), torch.tensor([1, 2, 3, 4]), torch.tensor([3, 3, 9, 0])
    tau = torch.tensor([100.0, 250.5, 3000.0, -40.0])
    with torch.no_grad():
        want_t = torch.topk(model.score_tails(h, r, tau), 10)
        want_h = torch.topk(model.score_heads(r, t, tau), 10)
    scores, ids = index.search_tails(h, r, tau, k=10)
    assert torch.equal(ids, want_t.indices)
    torch.testing.assert_close(scores, want_t.values, rtol=1e-5, atol=1e-5)
    scores, ids = index.search_heads(r, t, tau, k=10)
    assert torch.equal(ids, want_h.indices)
    torch.testing.assert_close(scores, want_h.values, rtol=1e-5, atol=1e-5)


def test_one_index_serves_every_query_time():
    model = small_model()
    index = EntityIndex.from_model(model, backend="torch")
    stored = index.index.vectors()[1].clone()
    answers = []
    for day in (100.0, 400.0, 5000.0):
        with torch.no_grad():
            want = torch.topk(model.score_tails(torch.tensor([2]), torch.tensor([3]), day), 5).indices
        got = index.search_tails(2, 3, day, k=5)[1]
        assert torch.equal(got, want)
        answers.append(got)
    assert torch.equal(index.index.vectors()[1], stored)  # never rebuilt
    assert not all(torch.equal(answers[0], a) for a in answers[1:])  # time changed the answer


def test_static_relation_answers_do_not_depend_on_time():
    model = small_model()  # relation 0 has alpha = 0
    index = EntityIndex.from_model(model, backend="torch")
    first = index.search_tails([4], [0], 0.0, k=5)[1]
    assert torch.equal(first, index.search_tails([4], [0], 9999.0, k=5)[1])


def test_names_and_scalar_arguments():
    model = small_model()
    model.set_vocabulary([f"e{i}" for i in range(83)], [f"r{i}" for i in range(5)])
    index = EntityIndex.from_model(model, backend="torch")
    by_name = index.search_tails("e5", "r2", 250.5, k=3)
    by_id = index.search_tails(torch.tensor([5]), torch.tensor([2]), torch.tensor([250.5]), k=3)
    assert torch.equal(by_name[1], by_id[1])
    with pytest.raises(KeyError, match="nobody"):
        index.search_heads(["r1"], ["nobody"], 0.0)


def test_index_must_match_the_model():
    model = small_model()
    with pytest.raises(ValueError, match="83 entities"):
        EntityIndex(model, make_index(model.entity.shape[1], backend="torch"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_model_uses_a_cuda_index():
    model = small_model().cuda()
    index = EntityIndex.from_model(model)  # FAISS without faiss-gpu cannot hold CUDA vectors: torch path
    h, r, tau = torch.tensor([1, 2], device="cuda"), torch.tensor([2, 3], device="cuda"), 777.0
    scores, ids = index.search_tails(h, r, tau, k=7)
    with torch.no_grad():
        want = torch.topk(model.score_tails(h, r, tau), 7)
    assert ids.device.type == "cuda" and torch.equal(ids, want.indices)
    torch.testing.assert_close(scores, want.values, rtol=1e-4, atol=1e-4)
