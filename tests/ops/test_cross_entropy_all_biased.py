"""The biased 1-vs-all cross-entropy (``rotmem.ops.biased_cross_entropy``, built on the dispatched
fused ops) against its reference, on every backend here (``tests/ops/backends.py``, chosen through
``ROTMEM_BACKEND``)."""

from __future__ import annotations

import pytest
import torch

from rotmem.ops import reference
from rotmem.ops.biased_cross_entropy import cross_entropy_all_biased


@pytest.fixture
def device(backend, monkeypatch) -> str:
    """The backend's device, with ``rotmem.ops`` dispatching to the backend."""
    monkeypatch.setenv("ROTMEM_BACKEND", backend.name)
    return backend.device


def problem(device, batch=37, width=22, entities=53, pairs=60, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, width, generator=g, dtype=dtype)
    entity = torch.randn(entities, width, generator=g, dtype=dtype) * 0.7
    target = torch.randint(0, entities, (batch,), generator=g)
    flat = torch.randperm(batch * entities, generator=g)[:pairs]
    flat[:5] = torch.arange(5) * entities + target[:5]  # some targets carry a bias
    flat = torch.unique(flat)
    rows, cols = flat // entities, flat % entities
    bias = torch.rand(rows.numel(), generator=g, dtype=torch.float64).to(dtype) * 3
    return tuple(t.to(device) for t in (q, entity, target, rows, cols, bias + 0.01))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_matches_the_reference_in_float64_with_gradients(device, reduction):
    q, entity, target, rows, cols, bias = problem(device, dtype=torch.float64)
    inputs = [t.clone().requires_grad_() for t in (q, entity, bias)]
    mine = cross_entropy_all_biased(inputs[0], inputs[1], target, rows, cols, inputs[2], reduction)
    expected_inputs = [t.clone().requires_grad_() for t in (q, entity, bias)]
    logits = (expected_inputs[0] @ expected_inputs[1].T).index_put(
        (rows, cols), expected_inputs[2], accumulate=True
    )
    expected = torch.nn.functional.cross_entropy(
        logits, target, reduction=reduction
    )  # the reference, in float64
    torch.testing.assert_close(mine, expected, rtol=1e-10, atol=1e-10)
    mine.backward()
    expected.backward()
    for got, want in zip(inputs, expected_inputs, strict=True):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-9, atol=1e-10)


def test_float32_within_the_reference_error(device):
    q, entity, target, rows, cols, bias = problem(device, batch=200, width=64, entities=999, pairs=900)
    truth = reference.cross_entropy_all_biased(q.double(), entity.double(), target, rows, cols, bias.double())
    mine = cross_entropy_all_biased(q, entity, target, rows, cols, bias)
    plain = reference.cross_entropy_all_biased(q, entity, target, rows, cols, bias)
    # float32 throughout, like the reference computed in float32: within a few times its error
    bound = 4 * max(float((plain.double() - truth).abs()), 1e-7 * float(truth.abs()))
    assert float((mine.double() - truth).abs()) <= bound


def test_gradcheck(backend, device):
    q, entity, target, rows, cols, bias = problem(
        device, batch=6, width=4, entities=9, pairs=12, dtype=torch.float64
    )
    inputs = [t.clone().requires_grad_() for t in (q, entity, bias)]
    assert torch.autograd.gradcheck(
        lambda a, b, c: cross_entropy_all_biased(a, b, target, rows, cols, c),
        inputs,
        fast_mode=backend.interpreted,
    )


def test_a_zero_bias_adds_nothing(device):
    q, entity, target, rows, cols, bias = problem(device)
    zeroed = bias.clone()
    zeroed[::3] = 0
    keep = zeroed > 0
    torch.testing.assert_close(
        cross_entropy_all_biased(q, entity, target, rows, cols, zeroed),
        cross_entropy_all_biased(q, entity, target, rows[keep], cols[keep], zeroed[keep]),
    )


def test_no_bias_is_the_plain_cross_entropy(device):
    q, entity, target, *_ = problem(device)
    empty = torch.zeros(0, dtype=torch.long, device=device)
    mine = cross_entropy_all_biased(q, entity, target, empty, empty, torch.zeros(0, device=device))
    torch.testing.assert_close(mine, reference.cross_entropy_all(q, entity, target))


def test_negative_bias_is_refused(device):
    """On the CPU; on a GPU the check would wait for the device in every step, and the biases the
    library passes come from a softplus."""
    if device != "cpu":
        pytest.skip("checked on the CPU only (the docstring says why)")
    q, entity, target, rows, cols, bias = problem(device)
    with pytest.raises(ValueError, match="non-negative"):
        cross_entropy_all_biased(q, entity, target, rows, cols, bias - 1)
