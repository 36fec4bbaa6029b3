"""The N3 regulariser (``n3``, kinds ``l4`` and ``modulus3``) on every backend here
(``tests/ops/backends.py``) against the reference: forward and backward, float32 and bfloat16, odd
shapes, several tensors of any leading shape; float64 gradcheck; errors that name the input.
Accuracy: ``tests/accuracy.py`` (elementwise powers summed in float32 or wider, rounded once)."""

from __future__ import annotations

import importlib

import pytest
import torch

from rotmem.ops import reference
from tests.accuracy import check, randn
from tests.ops import backends
from tests.ops.backends import leaf

DTYPES = [torch.float32, torch.bfloat16]
KINDS = ["l4", "modulus3"]
# (rows, complex dims): one pair, odd sizes, the shapes
SHAPES = [(1, 1), (7, 33), (16, 5), (4, 249), (999, 83), (1000, 249)]
INTERPRETED = {(1, 1), (7, 33), (16, 5), (999, 83)}


def truth_n3(tensors, kind="l4"):
    n = tensors[0].shape[-1] // 2
    if kind == "l4":
        return sum((x**4).sum() for x in tensors)
    return sum(((x[..., :n] ** 2 + x[..., n:] ** 2) ** 1.5).sum() for x in tensors)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, n", SHAPES)
def test_n3(backend, dtype, kind, rows, n):
    """A ``[rows, 2n]`` tensor and a ``[2, 3, 2n]`` one (other rows, a leading dim), summed into one value."""
    if backend.interpreted and (rows, n) not in INTERPRETED:
        pytest.skip("too slow for the Triton interpreter: runs compiled on a GPU")
    a = randn(rows, 2 * n, device=backend.device, scale=0.4, seed=rows * n)
    b = randn(2, 3, 2 * n, device=backend.device, scale=0.4, seed=rows * n + 1)

    def wrap(op):
        return lambda a, b: op([a, b], kind)

    check(wrap(backend.ops.n3), wrap(reference.n3), wrap(truth_n3), [a, b], [0, 1], dtype, name=f"n3[{kind}]")


def test_n3_takes_any_leading_shape(backend):
    x = randn(2, 3, 8, device=backend.device).float()
    torch.testing.assert_close(backend.ops.n3([x], "modulus3"), reference.n3([x], "modulus3"))
    torch.testing.assert_close(backend.ops.n3([x[0, 0]]), reference.n3([x[0, 0]]))


@pytest.mark.parametrize("kind", KINDS)
def test_gradcheck_float64(backend, kind):
    a = randn(3, 8, device=backend.device).requires_grad_()
    b = randn(2, 4, 8, device=backend.device, seed=1).requires_grad_()
    fast = backend.name == "triton"
    assert torch.autograd.gradcheck(lambda a, b: backend.ops.n3([a, b], kind), (a, b), fast_mode=fast)


@pytest.mark.parametrize("backend", backends.params(("triton",)), indirect=True)
def test_n3_errors_name_the_input(backend):
    with pytest.raises(ValueError, match="unknown regulariser kind 'l3'"):
        backend.ops.n3([torch.zeros(2, 4, device=backend.device)], kind="l3")
    with pytest.raises(ValueError, match="at least one tensor"):
        backend.ops.n3([])


def opcheck_cases(backend) -> dict[str, tuple]:
    """``{name: (op, args)}`` of the backend's operators, both kinds."""
    x, grad = leaf(4, 8, device=backend.device), torch.tensor(2.0, device=backend.device)
    cases = {}
    for kind in ("l4", "modulus3"):
        if backend.name == "native":
            ops, forward_args = torch.ops.rotmem, (x, kind)
            forward, backward = ops.n3.default, ops.n3_backward.default
        else:
            kernels = importlib.import_module("rotmem.ops.triton.n3")
            forward, backward, forward_args = kernels._n3, kernels._n3_backward, (x, kind == "modulus3")
        cases[f"n3:{kind}"] = (forward, forward_args)
        cases[f"n3_backward:{kind}"] = (backward, (grad, *forward_args))
    return cases


@pytest.mark.parametrize("backend", backends.params(per_isa=False), indirect=True)
def test_opcheck(backend):
    """Schema, fakes, autograd registration and AOT tracing of the op and its backward."""
    backends.opcheck(opcheck_cases(backend))
