"""``score_all`` (``q [B, 2n] @ entity[N, 2n]^T``, the evaluation's scores against every entity) on
every backend here (``tests/ops/backends.py``; one BLAS or cuBLAS product, so the native CPU backend
runs once, not per instruction set): scores and both gradients, float32 and bfloat16, shapes down to
one row, one entity, one complex pair, and past any tile or vector width."""

from __future__ import annotations

import pytest
import torch

from tests.accuracy import randn
from tests.ops import backends

DTYPES = [torch.float32, torch.bfloat16]
# (B, N, n): one row, one entity, one complex pair, and odd sizes past any tile or vector width.
SHAPES = [(1, 1, 1), (1, 10_488, 83), (999, 1, 83), (999, 10_488, 1), (999, 10_488, 83)]


def check_product(got, a, b, dtype, name):
    """``got`` (the product ``a @ b`` computed in ``dtype``) against its float64 truth, elementwise.

    ``a``, ``b``: float64 operands already rounded to ``dtype``. The bound is the classic one for a
    dot product of ``k`` terms accumulated in float32 (or wider), ``k * eps * (|a| @ |b|)``, plus the
    rounding of the result to ``dtype``. The eager reference is this same product, so its error
    cannot serve as the yardstick here.
    """
    truth = a @ b
    k = a.shape[-1]
    bound = k * torch.finfo(torch.float32).eps * (a.abs() @ b.abs()) + torch.finfo(dtype).eps * truth.abs()
    assert got.shape == truth.shape, f"{name}: shape {tuple(got.shape)} != {tuple(truth.shape)}"
    assert got.dtype == dtype, f"{name}: dtype {got.dtype} != its inputs' {dtype}"
    excess = (got.double() - truth).abs() - bound
    assert excess.max() <= 0, f"{name} {dtype}: error exceeds its bound by {excess.max().item():.3g}"


@pytest.mark.parametrize("backend", backends.params(per_isa=False), indirect=True)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch, entities, n", SHAPES)
def test_score_all(backend, dtype, batch, entities, n):
    """Scores and both gradients within the float32-accumulation bound of the float64 truth."""
    device = backend.device
    q = randn(batch, 2 * n, device=device).to(dtype)
    e = randn(entities, 2 * n, device=device, seed=1).to(dtype)
    grad = randn(batch, entities, device=device, seed=2).to(dtype)
    q_, e_ = q.clone().requires_grad_(), e.clone().requires_grad_()
    scores = backend.ops.score_all(q_, e_)
    grad_q, grad_e = torch.autograd.grad(scores, [q_, e_], grad)
    q, e, grad = q.double(), e.double(), grad.double()
    check_product(scores, q, e.t(), dtype, "score_all")
    check_product(grad_q, grad, e, dtype, "score_all grad[q]")
    check_product(grad_e, grad.t(), q, dtype, "score_all grad[entity]")


@pytest.mark.parametrize("backend", backends.params(per_isa=False), indirect=True)
def test_score_all_names_mismatched_widths(backend):
    q, entity = torch.zeros(2, 6, device=backend.device), torch.zeros(4, 8, device=backend.device)
    with pytest.raises((ValueError, RuntimeError), match=r"6.*8|8.*6"):
        backend.ops.score_all(q, entity)
