"""``unrotated_query`` (dense: ``Rot(Rot(h, theta) * w * w_hat, -theta)``) on every backend here
(``tests/ops/backends.py``) against the reference: forward and backward, float32 and bfloat16, odd
shapes, ChronoR (``w_hat`` per row or broadcast) and DistMult; ``opcheck``; float64 gradcheck.
The indexed, fused query is ``test_unrotated_query_indexed.py``. Accuracy: ``tests/accuracy.py``."""

from __future__ import annotations

import importlib

import pytest
import torch

from rotmem.ops import reference
from tests.accuracy import check, randn
from tests.ops import backends
from tests.ops.backends import leaf

DTYPES = [torch.float32, torch.bfloat16]

# (rows, complex dims); the interpreter runs the first three
DENSE_SHAPES = [(1, 1), (7, 33), (16, 5), (7, 83), (5, 249), (999, 83)]
# w_hat per row, w_hat [1, 2n] broadcast over the rows, or none (DistMult)
BACKBONES = ["chronor", "chronor-broadcast", "distmult"]


@pytest.mark.parametrize("backbone", BACKBONES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, n", DENSE_SHAPES)
def test_unrotated_query(backend, dtype, rows, n, backbone):
    if backend.interpreted and (rows, n) not in DENSE_SHAPES[:3]:
        pytest.skip("too slow for the Triton interpreter: runs compiled on a GPU")
    device, seed = backend.device, rows + n
    h, w = randn(rows, 2 * n, device=device, seed=seed), randn(rows, 2 * n, device=device, seed=seed + 1)
    theta = randn(rows, n, device=device, scale=3, seed=seed + 2)
    w_hat = randn(1 if backbone == "chronor-broadcast" else rows, 2 * n, device=device, seed=seed + 3)
    inputs = [h, w, theta] if backbone == "distmult" else [h, w, w_hat, theta]

    def wrap(op):
        return (lambda h, w, theta: op(h, w, None, theta)) if backbone == "distmult" else op

    check(wrap(backend.ops.unrotated_query), wrap(reference.unrotated_query), wrap(reference.unrotated_query),
          inputs, list(range(len(inputs))), dtype, name="unrotated_query")  # fmt: skip


@pytest.mark.parametrize("chronor", [True, False])
def test_gradcheck_unrotated_query_float64(backend, chronor):
    device, fast = backend.device, backend.name == "triton"
    h, w, theta = (randn(7, 8, device=device), randn(7, 8, device=device, seed=1),
                   randn(7, 4, device=device, seed=3))  # fmt: skip
    w_hat = randn(7, 8, device=device, seed=2).requires_grad_() if chronor else None
    inputs = tuple(t.requires_grad_() for t in (h, w, theta))
    fn = backend.ops.unrotated_query
    assert torch.autograd.gradcheck(lambda h, w, t: fn(h, w, w_hat, t), inputs, fast_mode=fast)
    if chronor:
        assert torch.autograd.gradcheck(lambda v: fn(h.detach(), w.detach(), v, theta.detach()), (w_hat,),
                                        fast_mode=fast)  # fmt: skip


def opcheck_cases(backend) -> dict[str, tuple]:
    """``{name: (op, args)}`` of the backend's operators, with and without ``w_hat``."""
    device = backend.device
    h, w, w_hat = (leaf(5, 8, device=device, seed=seed) for seed in range(3))
    theta, grad = leaf(5, 4, device=device, seed=3), leaf(5, 8, device=device, seed=4, grad=False)
    if backend.name == "native":
        forward = torch.ops.rotmem.unrotated_query.default
        backward = torch.ops.rotmem.unrotated_query_backward.default
    else:
        kernels = importlib.import_module("rotmem.ops.triton.unrotated_query")
        forward, backward = kernels._query, kernels._query_backward
    return {
        "unrotated_query": (forward, (h, w, None, theta)),
        "unrotated_query:w_hat": (forward, (h, w, w_hat, theta)),
        "unrotated_query_backward": (backward, (grad, h, w, None, theta)),
        "unrotated_query_backward:w_hat": (backward, (grad, h, w, w_hat, theta)),
    }


@pytest.mark.parametrize("backend", backends.params(per_isa=False), indirect=True)
def test_opcheck(backend):
    """Schema, fakes, autograd registration and AOT tracing of the op and its backward."""
    backends.opcheck(opcheck_cases(backend))
