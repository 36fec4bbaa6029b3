"""The ``compile`` backend (``torch.compile`` of the reference ops) against the reference, and the
choice of a backend on CUDA from the measured figures (``rotmem.ops.cuda_measured``)."""

from __future__ import annotations

import math

import pytest
import torch

from rotmem.ops import backend, compiled, reference
from rotmem.ops.cuda_measured import MEASURED, UNMEASURED_ORDER, Measured, cuda_order

pytestmark = pytest.mark.skipif(not compiled.is_available("cpu"), reason=compiled.unavailable_reason("cpu"))


def _inputs(shape: tuple[int, int, int], seed: int):
    batch, n, entities = shape
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, 2 * n, generator=g, requires_grad=True)
    entity = (0.5 * torch.randn(entities, 2 * n, generator=g)).requires_grad_()
    target = torch.randint(0, entities, (batch,), generator=g)
    theta = (math.pi * torch.rand(batch, n, generator=g)).requires_grad_()
    return q, entity, target, theta


# float32; the compiled kernels reorder sums (fused reductions), so the bounds are a few float32
# roundings of values of order 1-10: 1e-5 relative, 1e-5 absolute
@pytest.mark.parametrize("shape", [(8, 4, 33), (13, 7, 50)], ids=["small", "odd"])
def test_compiled_ops_equal_the_reference(shape):
    q, entity, target, theta = _inputs(shape, seed=shape[0])
    cases = {
        "rotate": (lambda m: m.rotate(q, theta), [q, theta]),
        "score_all": (lambda m: m.score_all(q, entity), [q, entity]),
        "cross_entropy_all": (lambda m: m.cross_entropy_all(q, entity, target), [q, entity]),
        "n3": (lambda m: m.n3([q, q * 0.5], kind="l4"), [q]),
    }
    for name, (call, wrt) in cases.items():
        want = call(reference)
        got = call(compiled)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=lambda m, name=name: f"{name}: {m}")
        weights = torch.randn(want.shape, generator=torch.Generator().manual_seed(7))
        want_grads = torch.autograd.grad(want, wrt, weights)
        got_grads = torch.autograd.grad(got, wrt, weights)
        for i, (g_got, g_want) in enumerate(zip(got_grads, want_grads, strict=True)):
            torch.testing.assert_close(
                g_got, g_want, rtol=1e-5, atol=1e-5, msg=lambda m, i=i, name=name: f"{name} grad {i}: {m}"
            )


def test_compile_backend_is_forced_by_name(monkeypatch):
    monkeypatch.setenv("ROTMEM_BACKEND", "compile")
    assert backend.backend_name(torch.device("cpu"), "rotate") == "compile"
    assert backend.backend_module(torch.device("cpu"), "rotate") is compiled


def test_measured_order_puts_the_fastest_first():
    times = Measured("t", "ms", {"torch": 4.0, "native": 3.0, "triton": 5.0})
    assert times.fastest_first() == ("native", "torch", "triton")
    rates = Measured("r", "GB/s", {"torch": 600.0, "triton": 1900.0}, higher_is_better=True)
    assert rates.fastest_first() == ("triton", "torch")


def test_cuda_order_follows_the_table_then_the_unmeasured_order():
    for op, measured in MEASURED.items():
        order = cuda_order(op)
        assert order[: len(measured.values)] == measured.fastest_first()
        assert set(UNMEASURED_ORDER) <= set(order)
    assert cuda_order("filtered_rank_counts") == UNMEASURED_ORDER
    assert cuda_order(None) == UNMEASURED_ORDER
    # the figures of issue 33 (H200): Triton's rotate at 1,901 GB/s; native's step 3.58 ms
    assert cuda_order("rotate")[0] == "triton"
    assert cuda_order("cross_entropy_all")[0] == "native"


def test_cuda_choice_skips_backends_that_cannot_run(monkeypatch):
    monkeypatch.delenv("ROTMEM_BACKEND", raising=False)
    runs = {"torch", "native"}
    monkeypatch.setattr(backend, "available", lambda name, device_type: name in runs)
    assert backend.backend_name(torch.device("cuda"), "rotate") == "torch"  # triton, compile: not here
    assert backend.backend_name(torch.device("cuda"), "cross_entropy_all") == "native"
    runs.discard("native")
    assert backend.backend_name(torch.device("cuda"), "cross_entropy_all") == "torch"
