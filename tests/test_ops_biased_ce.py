"""The biased 1-vs-all cross-entropy against its reference, on every backend that runs here."""

from __future__ import annotations

import pytest
import torch

from rotmem.ops import reference
from rotmem.ops.biased_cross_entropy import cross_entropy_all_biased


def problem(batch=37, width=22, entities=53, pairs=60, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, width, generator=g, dtype=dtype)
    entity = torch.randn(entities, width, generator=g, dtype=dtype) * 0.7
    target = torch.randint(0, entities, (batch,), generator=g)
    flat = torch.randperm(batch * entities, generator=g)[:pairs]
    flat[:5] = torch.arange(5) * entities + target[:5]  # some targets carry a bias
    flat = torch.unique(flat)
    rows, cols = flat // entities, flat % entities
    bias = torch.rand(rows.numel(), generator=g, dtype=torch.float64).to(dtype) * 3
    return q, entity, target, rows, cols, bias + 0.01


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_matches_the_reference_in_float64_with_gradients(reduction):
    q, entity, target, rows, cols, bias = problem(dtype=torch.float64)
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


def test_float32_within_the_reference_error():
    q, entity, target, rows, cols, bias = problem(batch=200, width=64, entities=999, pairs=900)
    truth = reference.cross_entropy_all_biased(q.double(), entity.double(), target, rows, cols, bias.double())
    mine = cross_entropy_all_biased(q, entity, target, rows, cols, bias)
    plain = reference.cross_entropy_all_biased(q, entity, target, rows, cols, bias)
    # float32 throughout, like the reference computed in float32: within a few times its error
    bound = 4 * max(float((plain.double() - truth).abs()), 1e-7 * float(truth.abs()))
    assert float((mine.double() - truth).abs()) <= bound


def test_gradcheck():
    q, entity, target, rows, cols, bias = problem(batch=6, width=4, entities=9, pairs=12, dtype=torch.float64)
    inputs = [t.clone().requires_grad_() for t in (q, entity, bias)]
    assert torch.autograd.gradcheck(
        lambda a, b, c: cross_entropy_all_biased(a, b, target, rows, cols, c), inputs
    )


def test_a_zero_bias_adds_nothing():
    q, entity, target, rows, cols, bias = problem()
    zeroed = bias.clone()
    zeroed[::3] = 0
    keep = zeroed > 0
    torch.testing.assert_close(
        cross_entropy_all_biased(q, entity, target, rows, cols, zeroed),
        cross_entropy_all_biased(q, entity, target, rows[keep], cols[keep], zeroed[keep]),
    )


def test_no_bias_is_the_plain_cross_entropy():
    q, entity, target, *_ = problem()
    empty = torch.zeros(0, dtype=torch.long)
    mine = cross_entropy_all_biased(q, entity, target, empty, empty, torch.zeros(0))
    torch.testing.assert_close(mine, reference.cross_entropy_all(q, entity, target))


def test_negative_bias_is_refused():
    q, entity, target, rows, cols, bias = problem()
    with pytest.raises(ValueError, match="non-negative"):
        cross_entropy_all_biased(q, entity, target, rows, cols, bias - 1)
