"""Rotation invariants (ROMEM.md) as Hypothesis properties, on every backend that runs here.

The ops are called through the public dispatch (``rotmem.ops.*`` with ``ROTMEM_BACKEND`` forced),
so these check what users get: the torch reference always, the native build when present, and
Triton (compiled on a GPU, interpreted on the CPU, with small shapes) when it can run.
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports rotmem.ops.triton

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rotmem import ops  # noqa: E402
from rotmem.models.romem import RoMem  # noqa: E402
from rotmem.ops.backend import BACKENDS, available  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# every backend on every device here: one that cannot run (a failed native build) shows as skipped
CASES = [
    pytest.param(
        name,
        device,
        id=f"{name}-{device}",
        marks=pytest.mark.skipif(not available(name, device), reason=f"{name} cannot run on {device} here"),
    )
    for device in DEVICES
    for name in BACKENDS
]
ATOL = 2e-5  # float32, values of order 1-4, angles up to 10 radians
PROPERTY = settings(max_examples=12, deadline=None, derandomize=True)


@contextmanager
def forced(backend: str):
    """``ROTMEM_BACKEND=backend`` for the duration (Hypothesis re-enters it for every example)."""
    old = os.environ.get("ROTMEM_BACKEND")
    os.environ["ROTMEM_BACKEND"] = backend
    try:
        yield
    finally:
        if old is None:
            del os.environ["ROTMEM_BACKEND"]
        else:
            os.environ["ROTMEM_BACKEND"] = old


@st.composite
def rotation_inputs(draw, tensors: int = 1, angles: int = 1):
    """``tensors`` vectors ``[rows, 2n]`` and ``angles`` angle sets ``[rows, n]`` (float32)."""
    rows, n = draw(st.integers(1, 5)), draw(st.integers(1, 9))
    seed = draw(st.integers(0, 2**31 - 1))
    x_scale, theta_scale = draw(st.floats(0.01, 4.0)), draw(st.floats(0.0, 10.0))
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(rows, 2 * n, generator=g) * x_scale for _ in range(tensors)]
    thetas = [(torch.rand(rows, n, generator=g) * 2 - 1) * theta_scale for _ in range(angles)]
    return xs, thetas


def on(device, *tensors):
    return [t.to(device) for t in tensors]


def pair_norms(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1] // 2
    return torch.hypot(x[..., :n], x[..., n:])


def close(a: torch.Tensor, b: torch.Tensor, scale: float = 1.0) -> None:
    torch.testing.assert_close(a.cpu(), b.cpu(), atol=ATOL * max(scale, 1.0), rtol=1e-5)


pytestmark = pytest.mark.parametrize("backend, device", CASES)


@PROPERTY
@given(rotation_inputs())
def test_pair_norms_are_preserved(backend, device, data):
    (x,), (theta,) = data
    x, theta = on(device, x, theta)
    with forced(backend):
        close(pair_norms(ops.rotate(x, theta)), pair_norms(x))


@PROPERTY
@given(rotation_inputs(angles=2))
def test_composition_adds_angles(backend, device, data):
    (x,), (a, b) = data
    x, a, b = on(device, x, a, b)
    with forced(backend):
        close(ops.rotate(ops.rotate(x, a), b), ops.rotate(x, a + b), x.abs().max().item())


@PROPERTY
@given(rotation_inputs())
def test_rotating_back_is_the_inverse(backend, device, data):
    (x,), (theta,) = data
    x, theta = on(device, x, theta)
    with forced(backend):
        close(ops.rotate(ops.rotate(x, theta), -theta), x, x.abs().max().item())


@PROPERTY
@given(rotation_inputs())
def test_zero_angle_is_the_identity(backend, device, data):
    (x,), (theta,) = data
    x, theta = on(device, x, theta)
    with forced(backend):
        assert torch.equal(ops.rotate(x, torch.zeros_like(theta)), x)


@PROPERTY
@given(rotation_inputs(), st.integers(-3, 3))
def test_period_is_two_pi(backend, device, data, turns):
    (x,), (theta,) = data
    x, theta = on(device, x, theta)
    with forced(backend):
        # theta + 2*pi*k rounds in float32 by up to ~ulp(30): that, times |x|, is the tolerance
        close(ops.rotate(x, theta + 2 * math.pi * turns), ops.rotate(x, theta), 4 * x.abs().max().item())


@PROPERTY
@given(rotation_inputs(tensors=2), st.floats(-3, 3), st.floats(-3, 3))
def test_rotation_is_linear(backend, device, data, a, b):
    (x, y), (theta,) = data
    x, y, theta = on(device, x, y, theta)
    with forced(backend):
        scale = abs(a) * x.abs().max().item() + abs(b) * y.abs().max().item()
        close(ops.rotate(a * x + b * y, theta), a * ops.rotate(x, theta) + b * ops.rotate(y, theta), scale)


@PROPERTY
@given(rotation_inputs(tensors=2))
def test_rotation_is_orthogonal(backend, device, data):
    """Adjointness: ``<Rot(x, theta), y> = <x, Rot(y, -theta)>``."""
    (x, y), (theta,) = data
    x, y, theta = on(device, x, y, theta)
    with forced(backend):
        left = (ops.rotate(x, theta) * y).sum(-1)
        right = (x * ops.rotate(y, -theta)).sum(-1)
        close(left, right, x.shape[-1] * x.abs().max().item() * y.abs().max().item())


@PROPERTY
@given(
    st.sampled_from(["chronor", "distmult"]),
    st.integers(0, 2**31 - 1),
    st.lists(st.floats(0.0, 400.0), min_size=1, max_size=6),
)
def test_unrotation_trick_equals_direct_scoring(backend, device, backbone, seed, days):
    """``score(h, r, t, tau)`` = ``score_tails(h, r, tau)[t]`` = ``score_heads(r, t, tau)[h]``."""
    torch.manual_seed(seed)
    model = RoMem(9, 3, dim=18, k=3, backbone=backbone, speed="learned", tau0=100.0, init_s=0.05)
    model = model.to(device)
    rows = len(days)
    g = torch.Generator().manual_seed(seed)
    h, t = (torch.randint(0, 9, (rows,), generator=g).to(device) for _ in range(2))
    r = torch.randint(0, 3, (rows,), generator=g).to(device)
    tau = torch.tensor(days, device=device)
    with forced(backend), torch.no_grad():
        direct = model.score(h, r, t, tau)
        picks = torch.arange(rows, device=device)
        close(model.score_tails(h, r, tau)[picks, t], direct, 10.0)
        close(model.score_heads(r, t, tau)[picks, h], direct, 10.0)
