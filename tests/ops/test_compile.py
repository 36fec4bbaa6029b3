"""A ``torch.compile``d training step equals the eager one, on every backend that can be compiled.

The step is the Phase-2 1-vs-all objective: queries in both directions, fused cross-entropy over
all entities, and the N3 regulariser over the batch's rows. Custom ops (native, Triton) must be
traceable (fake implementations, registered autograd) for this to compile at all, and the step
compiles with ``fullgraph=True``: a graph break anywhere (the backend dispatch included) fails.
"""

from __future__ import annotations

import os

import pytest
import torch

from rotmem import ops
from rotmem.models.romem import RoMem
from rotmem.ops import native, reference
from rotmem.ops.backend import BACKENDS, available

# Triton on the CPU only runs interpreted, which compiled graphs cannot call into.
CASES = [("cpu", name) for name in BACKENDS if name != "triton" and available(name, "cpu")]
if torch.cuda.is_available():
    CASES += [("cuda", name) for name in BACKENDS if available(name, "cuda")]


def training_step(model: RoMem, facts: torch.Tensor) -> torch.Tensor:
    """``½(CE_tail + CE_head) + 0.01 · N3 / B`` for ``facts [B, 4]`` = ``(h, r, t, day)``."""
    h, r, t, day = facts.unbind(1)  # the model takes integer days (it keeps them at least float32)
    queries = torch.cat([model.query_tails(h, r, day), model.query_heads(r, t, day)])
    rows = [model.entity[h], model.w[r], model.entity[t]] + ([] if model.w_hat is None else [model.w_hat[r]])
    return (
        ops.cross_entropy_all(queries, model.entity, torch.cat([t, h])) + 0.01 * ops.n3(rows) / facts.shape[0]
    )


@pytest.mark.parametrize("device, backend", CASES, ids=[f"{b}-{d}" for d, b in CASES])
def test_compiled_step_equals_eager(device, backend, monkeypatch):
    monkeypatch.setenv("ROTMEM_BACKEND", backend)
    torch.manual_seed(0)
    model = RoMem(37, 5, dim=24, k=3, speed="learned", tau0=12784.0, init_s=0.05).to(device)
    g = torch.Generator().manual_seed(1)
    facts = torch.stack(
        [
            torch.randint(0, 37, (16,), generator=g),
            torch.randint(0, 5, (16,), generator=g),
            torch.randint(0, 37, (16,), generator=g),
            torch.randint(12784, 16801, (16,), generator=g),
        ],
        dim=1,
    ).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    eager_loss = training_step(model, facts)
    eager_grads = torch.autograd.grad(eager_loss, params)
    torch._dynamo.reset()
    # inductor on a GPU and for the default CPU backend; elsewhere aot_eager checks the same
    # tracing (fake tensors, autograd registration) without a C++ compile per case
    compiler = (
        "inductor"
        if device == "cuda" or backend == ops.backend.backend_name(torch.device("cpu"))
        else "aot_eager"
    )
    compiled = torch.compile(training_step, backend=compiler, fullgraph=True)
    loss = compiled(model, facts)
    grads = torch.autograd.grad(loss, params)
    torch.testing.assert_close(loss, eager_loss, rtol=1e-5, atol=1e-6)
    for p, got, want in zip(params, grads, eager_grads, strict=True):
        torch.testing.assert_close(
            got, want, rtol=1e-4, atol=1e-6, msg=lambda m, p=p: f"{tuple(p.shape)}: {m}"
        )
    assert os.environ["ROTMEM_BACKEND"] == backend


@pytest.mark.skipif(not available("native", "cpu"), reason="needs the native CPU backend")
def test_compiled_code_follows_rotmem_backend_set_at_call_time(monkeypatch):
    """The compiled dispatch guards on ``ROTMEM_BACKEND``: changing it recompiles for the new backend."""
    compiled_graphs, ran = [], []

    def capture(gm, example_inputs):
        compiled_graphs.append(gm)

        def run(*args):
            ran.append(gm.code)
            return gm(*args)

        return run

    torch._dynamo.reset()
    compiled = torch.compile(lambda x: ops.n3([x]), backend=capture, fullgraph=True)
    x = torch.randn(4, 6)
    for backend, native_op_in_graph in [("torch", False), ("native", True), ("torch", False)]:
        monkeypatch.setenv("ROTMEM_BACKEND", backend)
        torch.testing.assert_close(compiled(x), ops.n3([x]))
        assert ("rotmem.n3" in ran[-1]) == native_op_in_graph, f"{backend} ran:{ran[-1]}"
    assert len(compiled_graphs) == 2  # the second "torch" call reuses the first graph


# --- the native ops inside a compiled step, against eager native and the reference ---------------


def _leaf(*shape, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).requires_grad_()


def indexed_args(chronor=True, log_s=-1.0, log_base=2.0, batch=6, n=3, entities=5, relations=3):
    g = torch.Generator().manual_seed(7)
    return (
        _leaf(entities, 2 * n, seed=1),
        _leaf(relations, 2 * n, seed=2),
        _leaf(relations, 2 * n, seed=3) if chronor else None,
        torch.randint(0, entities, (batch,), generator=g),
        torch.randint(0, relations, (batch,), generator=g),
        (torch.rand(batch, generator=g, dtype=torch.float64) * 20).requires_grad_(),
        torch.rand(batch, generator=g, dtype=torch.float64).requires_grad_(),
        torch.tensor(log_s, dtype=torch.float64, requires_grad=True),
        torch.tensor(log_base, dtype=torch.float64, requires_grad=True),
        3.0,
    )


@pytest.mark.skipif(not native.is_available("cpu"), reason=native.unavailable_reason("cpu"))
@pytest.mark.usefixtures("cpu_isa")
def test_native_compiled_step_equals_eager():
    """A training step (queries, fused CE, N3) compiled with fullgraph=True matches eager native.

    Compiled and eager run the same kernels; only the glue around them (scaling, sums of the loss
    terms) may round in another order: a few float32 ulp of values of order 1, so 1e-5. Against the
    reference: the native-vs-torch differences of test_native_model.py (angles up to 20 rad here), 1e-4.
    """
    torch._dynamo.reset()
    args = indexed_args(batch=12, n=5, entities=20, relations=4)
    tables = [a.detach().float().requires_grad_() for a in args[:3]]
    ent_idx, rel_idx = args[3], args[4]
    tail = torch.randint(0, 20, (12,), generator=torch.Generator().manual_seed(3))
    rest = [a.detach().float().requires_grad_() for a in args[5:9]]

    def step(entity, w, w_hat, tau, alpha, log_s, log_base):
        q = native.unrotated_query_indexed(
            entity, w, w_hat, ent_idx, rel_idx, tau, alpha, log_s, log_base, 3.0
        )
        loss = native.cross_entropy_all(q, entity, tail) + 0.01 * native.n3([entity[ent_idx], w[rel_idx]])
        return loss

    def grads(fn):
        inputs = [t.detach().clone().requires_grad_() for t in (*tables, *rest)]
        loss = fn(*inputs)
        return [loss, *torch.autograd.grad(loss, inputs)]

    eager = grads(step)
    compiled = grads(torch.compile(step, fullgraph=True, backend="aot_eager"))
    for a, b in zip(eager, compiled, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # and the same step with the reference agrees too
    ref = grads(
        lambda *t: (
            reference.cross_entropy_all(
                reference.unrotated_query_indexed(t[0], t[1], t[2], ent_idx, rel_idx, *t[3:], 3.0), t[0], tail
            )
            + 0.01 * reference.n3([t[0][ent_idx], t[1][rel_idx]])
        )
    )
    for a, b in zip(eager, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
