"""``rotmem.ops.linear_cross_entropy`` (the CUDA path's cross-entropy: chunked dense products with the
softmax gradient written in place) against the reference: forward and both gradients, float32 and
bfloat16, every reduction, one chunk or several, gradients made in the forward or recomputed in
backward, ignored targets; float64 gradcheck; one-line errors; no host sync in a training call.

Accuracy: ``tests/accuracy.py``'s bound. The extra roundings it is given are counted from the
arithmetic (the module's docstring): a gradient made in the forward and scaled by the output gradient
in backward is rounded once more than the reference; the table's gradient summed over several chunks
in float32 and rounded at the end, once more again.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from rotmem.ops import ce_tiles, reference
from rotmem.ops import linear_cross_entropy as lce
from tests.accuracy import check, randn

CASES = [(1, 1, 2), (13, 70, 18), (16, 37, 66), (40, 1000, 34)]


def truth(q, entity, target, reduction="mean"):
    return F.cross_entropy(q @ entity.t(), target, reduction=reduction)


def inputs(batch, entities, width, seed=0, ignore=False, scale=0.5):
    g = torch.Generator().manual_seed(seed)
    target = torch.randint(0, entities, (batch,), generator=g)
    if ignore:
        target[::3] = -100
    return [
        randn(batch, width, seed=seed, scale=scale),
        randn(entities, width, seed=seed + 1, scale=scale),
        target,
    ]


def set_chunks(monkeypatch, rows: int | None, entities: int, grad_in_forward: bool | None) -> int:
    """``rows`` query rows per chunk (None: the default); returns the number of chunks of a batch."""
    if rows is not None:
        monkeypatch.setattr(ce_tiles, "CE_TILE_ELEMENTS", rows * entities)
    monkeypatch.setattr(ce_tiles, "CE_GRAD_IN_FORWARD", grad_in_forward)
    return lce.rows_per_chunk(1 << 30, entities, torch.device("cpu"))


def run_check(case, reduction, dtype, grad_in_forward, rows_per_chunk):
    batch = case[0].shape[0]
    forward_made = grad_in_forward and reduction != "none"
    roundings = int(forward_made) + int(-(-batch // rows_per_chunk) > 1)
    check(
        lambda q, e, t: lce.linear_cross_entropy(q, e, t, reduction),
        lambda q, e, t: reference.cross_entropy_all(q, e, t, reduction),
        lambda q, e, t: truth(q, e, t, reduction),
        case,
        [0, 1],
        dtype,
        name=f"linear_cross_entropy[{reduction}]",
        grad_roundings=roundings,
    )


@pytest.mark.parametrize("rows", [None, 3], ids=["one-chunk", "3-row-chunks"])
@pytest.mark.parametrize("grad_in_forward", [True, False])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batch, entities, width", CASES)
def test_matches_the_reference(batch, entities, width, dtype, reduction, grad_in_forward, rows, monkeypatch):
    per_chunk = set_chunks(monkeypatch, rows, entities, grad_in_forward)
    run_check(inputs(batch, entities, width), reduction, dtype, grad_in_forward, per_chunk)


@pytest.mark.parametrize("grad_in_forward", [True, False])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ignored_targets(reduction, grad_in_forward, monkeypatch):
    per_chunk = set_chunks(monkeypatch, 4, 69, grad_in_forward)
    case = inputs(9, 69, 8, seed=4, scale=2.0)
    case[2] = torch.tensor([-100, 68, 16, -100, 33, 34, -100, 1, -100])
    run_check(case, reduction, torch.float32, grad_in_forward, per_chunk)


@pytest.mark.parametrize("grad_in_forward", [True, False])
def test_gradcheck_float64(grad_in_forward, monkeypatch):
    set_chunks(monkeypatch, 2, 11, grad_in_forward)
    q, entity, target = inputs(5, 11, 6)
    target[1] = -100
    for reduction in ("mean", "sum", "none"):
        fn = lambda q, e, reduction=reduction: lce.linear_cross_entropy(q, e, target, reduction)  # noqa: E731
        assert torch.autograd.gradcheck(fn, (q.requires_grad_(), entity.requires_grad_()))
        q, entity = q.detach(), entity.detach()


def test_one_input_needs_grad(monkeypatch):
    set_chunks(monkeypatch, 3, 20, True)
    q, entity, target = (t.float() if t.is_floating_point() else t for t in inputs(7, 20, 10))
    for wrt in (0, 1):
        args = [q.clone().requires_grad_(wrt == 0), entity.clone().requires_grad_(wrt == 1)]
        (got,) = torch.autograd.grad(lce.linear_cross_entropy(*args, target), [args[wrt]])
        args = [q.clone().requires_grad_(wrt == 0), entity.clone().requires_grad_(wrt == 1)]
        (want,) = torch.autograd.grad(reference.cross_entropy_all(*args, target), [args[wrt]])
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda q, e, t: (q, e, t, "avg"), "unknown reduction 'avg'"),
        (lambda q, e, t: (q[:, :3], e, t, "mean"), "expected q [B, D] and entity [N, D]"),
        (lambda q, e, t: (q, e.double(), t, "mean"), "must share a float dtype"),
        (lambda q, e, t: (q, e, t.float(), "mean"), "target must be int64 [7]"),
        (lambda q, e, t: (q, e, t[:3], "mean"), "target must be int64 [7]"),
        (
            lambda q, e, t: (q, e, torch.where(torch.arange(7) == 2, 20, t), "mean"),
            "target[2] = 20 is out of range",
        ),
        (
            lambda q, e, t: (q, e, torch.where(torch.arange(7) == 5, -1, t), "mean"),
            "target[5] = -1 is out of range",
        ),
    ],
)
def test_errors_name_the_input(change, message):
    q, entity, target = (t.float() if t.is_floating_point() else t for t in inputs(7, 20, 10))
    with pytest.raises((ValueError, IndexError)) as error:
        lce.linear_cross_entropy(*change(q, entity, target))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_chunks_on_a_gpu_hold_the_icews_step_in_one():
    """The ICEWS05-15 step (2,000 queries x 10,488 entities) is one chunk of logits on a GPU."""
    assert lce.rows_per_chunk(2000, 10488, torch.device("cuda")) == 2000
    assert lce.rows_per_chunk(4096, 1_000_000, torch.device("cuda")) == 33
    assert lce.rows_per_chunk(5, 0, torch.device("cpu")) == 5
