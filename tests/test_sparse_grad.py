"""Sparse table gradients (``rotmem.ops.table_grad``): the same values as the dense ones on every
backend, a dense ``entity.grad`` for the training loss, one ``[N, 2n]`` table less at the peak,
and the dense gradient under ``torch.compile``."""

from __future__ import annotations

import warnings

import pytest
import torch

from benchmarks.harness import cpu_peak_bytes
from lightning_modules.phase2 import Phase2Module
from rotmem import losses
from rotmem.models.romem import RoMem
from rotmem.ops import backend
from rotmem.ops.table_grad import gather_rows, table_gradient

CPU_BACKENDS = [name for name in backend.BACKENDS if backend.available(name, "cpu")]


def test_table_gradient_sparse_equals_dense_with_repeated_rows():
    table = torch.zeros(7, 4, dtype=torch.bfloat16)
    index = torch.tensor([3, 0, 3, 6, 3])
    rows = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    sparse = table_gradient(rows, index, table, sparse=True)
    dense = table_gradient(rows, index, table, sparse=False)
    assert sparse.layout == torch.sparse_coo and dense.layout == torch.strided
    assert sparse.dtype == dense.dtype == torch.bfloat16 and sparse.shape == dense.shape == (7, 4)
    want = torch.zeros(7, 4).index_add_(0, index, rows)  # float32 sums, rounded once
    torch.testing.assert_close(dense, want.bfloat16(), rtol=0, atol=0)
    torch.testing.assert_close(sparse.to_dense().float(), want, rtol=1e-2, atol=1e-2)


def test_gather_rows_gradient_layout_follows_sparse_grad():
    table = torch.randn(9, 6, requires_grad=True)
    index = torch.tensor([[1, 8], [1, 0]])
    for sparse_grad, layout in ((False, torch.strided), (True, torch.sparse_coo)):
        table.grad = None
        rows = gather_rows(table, index, sparse_grad)
        torch.testing.assert_close(rows, table[index])
        (rows**2).sum().backward()
        assert table.grad.layout == layout
        torch.testing.assert_close(table.grad.to_dense(), 2 * table.detach() * torch.tensor(
            [1, 2, 0, 0, 0, 0, 0, 0, 1], dtype=torch.float32
        ).unsqueeze(1))  # fmt: skip


def indexed_inputs(chronor: bool):
    g = torch.Generator().manual_seed(0)
    tables = [torch.randn(50, 10, generator=g).requires_grad_() for _ in range(2 if chronor else 1)]
    ent_idx = torch.tensor([4, 49, 4, 0, 17, 4, 33])  # repeated rows sum
    rel_idx = torch.randint(0, 50, (7,), generator=g)
    tau = 16000 + 400 * torch.rand(7, generator=g)
    alpha = torch.rand(7, generator=g).requires_grad_()
    log_s, log_base = torch.tensor(-3.0, requires_grad=True), torch.tensor(9.2, requires_grad=True)
    entity = torch.randn(50, 10, generator=g).requires_grad_()
    w_hat = tables[1] if chronor else None
    return entity, tables[0], w_hat, ent_idx, rel_idx, tau, alpha, log_s, log_base, 15900.0


@pytest.mark.parametrize("chronor", [True, False])
@pytest.mark.parametrize("name", CPU_BACKENDS)
def test_indexed_query_sparse_grad_equals_dense(monkeypatch, name, chronor):
    monkeypatch.setenv("ROTMEM_BACKEND", name)
    from rotmem import ops

    args = indexed_inputs(chronor)
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    grads = {}
    for sparse_grad in (False, True):
        q = ops.unrotated_query_indexed(*args, sparse_grad=sparse_grad)
        grads[sparse_grad] = torch.autograd.grad((q * torch.linspace(-1, 1, 10)).sum(), leaves)
    assert grads[False][0].layout == torch.strided and grads[True][0].layout == torch.sparse_coo
    torch.testing.assert_close(grads[True][0].to_dense(), grads[False][0])
    for sparse, dense in zip(grads[True][1:], grads[False][1:], strict=True):
        torch.testing.assert_close(sparse, dense)


def make_model_and_facts(entities: int, dim: int, batch: int) -> tuple[RoMem, torch.Tensor]:
    torch.manual_seed(0)
    model = RoMem(entities, 6, dim=dim, k=3, speed="learned", tau0=16000.0, init_s=0.05)
    g = torch.Generator().manual_seed(1)
    columns = [(0, entities), (0, 6), (0, entities), (16000, 20000)]
    facts = torch.stack([torch.randint(low, high, (batch,), generator=g) for low, high in columns], 1)
    return model, facts


def training_loss(model: RoMem, facts: torch.Tensor, sparse_grad: bool) -> torch.Tensor:
    """Phase 2's 1-vs-all objective; ``sparse_grad=False`` is the all-dense version of it."""
    if sparse_grad:
        fit = losses.one_vs_all_loss(model, facts)
    else:
        h, r, t, day = facts.unbind(1)
        queries = model.query_tails_and_heads(h, r, t, day)
        fit = losses.ops.cross_entropy_all(queries, model.entity, torch.cat([t, h]))
    return fit + 0.01 * losses.embedding_regularizer(model, facts, sparse_grad=sparse_grad)


@pytest.mark.parametrize("name", CPU_BACKENDS)
def test_training_loss_entity_grad_is_dense_and_equals_all_dense(monkeypatch, name):
    monkeypatch.setenv("ROTMEM_BACKEND", name)
    model, facts = make_model_and_facts(entities=40, dim=12, batch=9)
    params = [p for p in model.parameters() if p.requires_grad]
    grads = {}
    for sparse_grad in (False, True):
        model.zero_grad(set_to_none=True)
        training_loss(model, facts, sparse_grad).backward()
        grads[sparse_grad] = [p.grad for p in params]
    assert all(g.layout == torch.strided for g in grads[True])  # the CE made the sum dense
    for sparse, dense in zip(grads[True], grads[False], strict=True):
        torch.testing.assert_close(sparse, dense)
    # the public loss is the sparse one
    model.zero_grad(set_to_none=True)
    (
        losses.one_vs_all_loss(model, facts)
        + 0.01 * losses.embedding_regularizer(model, facts, sparse_grad=True)
    ).backward()
    torch.testing.assert_close(model.entity.grad, grads[False][params.index(model.entity)])


@pytest.mark.skipif("native" not in CPU_BACKENDS, reason="the native backend is not built")
def test_phase2_step_holds_one_table_at_its_peak(monkeypatch):
    """At N = 20,000 entities and 2n = 198 the [N, 2n] table (15 MiB) dwarfs the batch's tensors.
    Phase 2's step (1-vs-all, regulariser, time-contrastive) holds the table's gradient and little
    else at its peak; the all-dense step holds a second table (a zeros-and-rows gradient) before
    autograd sums the two."""
    monkeypatch.setenv("ROTMEM_BACKEND", "native")
    module = Phase2Module(RoMem(20_000, 6, tau0=16000.0, dim=200, k=3, speed="learned", init_s=0.05))
    model = module.model
    _, facts = make_model_and_facts(entities=20_000, dim=200, batch=8)
    negative_days = facts[:, 3:].double() + torch.tensor([[-300.0, -30.0, 40.0, 500.0]])
    batch = {"facts": facts, "negative_days": negative_days}
    table_bytes = model.entity.numel() * model.entity.element_size()

    def peak_tables(step) -> float:
        model.zero_grad(set_to_none=True)
        peak = cpu_peak_bytes(lambda: step().backward())
        assert model.entity.grad.layout == torch.strided
        return peak / table_bytes

    with warnings.catch_warnings():  # self.log without a Trainer warns and does nothing
        warnings.simplefilter("ignore")
        phase2 = peak_tables(lambda: module.training_step(batch, 0))
    dense = peak_tables(lambda: training_loss(model, facts, sparse_grad=False))
    assert phase2 < 1.25 and dense > 1.9, (phase2, dense)


@pytest.mark.parametrize("name", [n for n in ("native", "torch") if n in CPU_BACKENDS])
def test_compiled_sparse_loss_gives_the_dense_gradient(monkeypatch, name):
    monkeypatch.setenv("ROTMEM_BACKEND", name)
    model, facts = make_model_and_facts(entities=30, dim=8, batch=5)
    params = [p for p in model.parameters() if p.requires_grad]
    eager = torch.autograd.grad(training_loss(model, facts, sparse_grad=False), params)
    torch._dynamo.reset()
    compiled = torch.compile(training_loss, backend="aot_eager", fullgraph=True)
    got = torch.autograd.grad(compiled(model, facts, True), params)
    assert got[params.index(model.entity)].layout == torch.strided
    for g, want in zip(got, eager, strict=True):
        torch.testing.assert_close(g, want, rtol=1e-5, atol=1e-6)
