"""``rotate`` on every backend here (``tests/ops/backends.py``) against the reference: forward and
backward, float32 and bfloat16, odd shapes, broadcasting, far angles; float64 gradcheck.

Accuracy: ``tests/accuracy.py``. The native CPU kernels meet its floor because their sines and
cosines are within 1.5 ulp on every instruction set (``csrc/cpu/sin_cos.h``, checked below over
every angle range), then rounded once; Triton's come from libdevice (the interpreter: numpy).
"""

from __future__ import annotations

import importlib

import pytest
import torch

from rotmem.ops import reference
from tests.accuracy import check, randn
from tests.ops import backends
from tests.ops.backends import leaf

DTYPES = [torch.float32, torch.bfloat16]
# (rows, complex dims): one pair, odd sizes past any vector width, the shapes
ROW_SHAPES = [(1, 1), (7, 33), (16, 5), (7, 83), (5, 249), (999, 83), (1000, 249)]
INTERPRETED = {(1, 1), (7, 33), (16, 5), (999, 83)}  # the interpreter's few seconds each; the rest on a GPU


def skip_slow(backend, shape) -> None:
    if backend.interpreted and shape not in INTERPRETED:
        pytest.skip("too slow for the Triton interpreter: runs compiled on a GPU")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, n", ROW_SHAPES)
def test_rotate(backend, dtype, rows, n):
    skip_slow(backend, (rows, n))
    x = randn(rows, 2 * n, device=backend.device, seed=rows * 100 + n)
    theta = randn(rows, n, device=backend.device, scale=3, seed=rows * 100 + n + 1)
    check(backend.ops.rotate, reference.rotate, reference.rotate, [x, theta], [0, 1], dtype, name="rotate")


# x [3, 4, 10] against angles broadcast from fewer dims; x [3, 1, 14] rotated at 4 angle sets of
# thousands of radians (range reduction must be exact)
BROADCASTS = [((3, 4, 10), (3, 1, 5), 1.0), ((3, 4, 10), (5,), 1.0), ((3, 4, 10), (3, 4, 1), 1.0),
              ((3, 1, 14), (3, 4, 7), 2000.0)]  # fmt: skip


@pytest.mark.parametrize("x_shape, theta_shape, scale", BROADCASTS)
def test_rotate_broadcasts_like_the_reference(backend, x_shape, theta_shape, scale):
    if backend.name == "triton" and theta_shape[-1] == 1:
        pytest.skip("Triton's rotate takes theta [..., n] (its own error says so): no broadcast along n")
    x = randn(*x_shape, device=backend.device)
    theta = randn(*theta_shape, device=backend.device, scale=scale, seed=len(theta_shape))
    check(backend.ops.rotate, reference.rotate, reference.rotate, [x, theta], [0, 1], torch.float32,
          name="rotate")  # fmt: skip


@pytest.mark.parametrize("backend", backends.params(("native",), ("cpu",)), indirect=True)
def test_rotate_sines_and_cosines_over_every_angle_range(backend):
    """The CPU's vectorised sin/cos (exact reduction to |t| <= 8192, libm beyond) is float32-accurate."""
    theta = torch.cat(
        [
            torch.linspace(-20.0, 20.0, 20_001),
            torch.linspace(-9000.0, 9000.0, 20_001),  # crosses the 8192 rad switch to libm
            torch.tensor([8191.99, 8192.0, 8192.01, 1e6, -3e7, 1e30, 0.0, -0.0]),
        ]
    ).reshape(1, -1)
    x = torch.cat([torch.ones_like(theta), torch.zeros_like(theta)], dim=1)
    y = backend.ops.rotate(x, theta).double()
    n = theta.shape[1]
    exact = theta.double()
    # 1.5 ulp of the polynomials (with or without FMA) and 0.5 of the rounding: 2 ulp of a value in
    # [0.5, 1] is 2 * 2^-24 = 1.2e-7; libm beyond 8192 rad is within 1 ulp
    assert (y[:, :n] - exact.cos()).abs().max() < 2e-7
    assert (y[:, n:] - exact.sin()).abs().max() < 2e-7
    odd = torch.tensor([[float("nan"), float("inf"), -float("inf")]])
    assert backend.ops.rotate(torch.ones(1, 6), odd).isnan().all()


@pytest.mark.parametrize("backend", backends.params(("triton",)), indirect=True)
def test_rotate_rejects_mismatched_widths(backend):
    with pytest.raises(ValueError, match="x has last dim 6"):
        backend.ops.rotate(torch.zeros(2, 6, device=backend.device), torch.zeros(2, 4, device=backend.device))


def test_gradcheck_float64(backend):
    x, theta = randn(4, 3, 10, device=backend.device), randn(4, 1, 5, device=backend.device, scale=3, seed=1)
    inputs = (x.requires_grad_(), theta.requires_grad_())
    assert torch.autograd.gradcheck(backend.ops.rotate, inputs, fast_mode=backend.name == "triton")


def opcheck_cases(backend) -> dict[str, tuple]:
    """``{name: (op, args)}`` of the backend's operators (``torch.ops.rotmem.*``, ``rotmem_triton.*``)."""
    x, theta = leaf(5, 8, device=backend.device), leaf(5, 4, device=backend.device, seed=1)
    grad = leaf(5, 8, device=backend.device, seed=2, grad=False)
    if backend.name == "native":
        forward, backward = torch.ops.rotmem.rotate.default, torch.ops.rotmem.rotate_backward.default
    else:
        kernels = importlib.import_module("rotmem.ops.triton.rotate")
        forward, backward = kernels._rotate, kernels._rotate_backward
    return {"rotate": (forward, (x, theta)), "rotate_backward": (backward, (grad, x, theta))}


@pytest.mark.parametrize("backend", backends.params(per_isa=False), indirect=True)
def test_opcheck(backend):
    """Schema, fakes, autograd registration and AOT tracing of the op and its backward."""
    backends.opcheck(opcheck_cases(backend))
