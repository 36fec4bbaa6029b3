"""The fused 1-vs-all cross-entropy (``cross_entropy_all``) on every backend here
(``tests/ops/backends.py``: native per CPU instruction set and on CUDA, Triton interpreted and on
CUDA) against the reference: forward and both gradients, float32 and bfloat16, every reduction, odd
shapes, one tile or many (row blocks, entity chunks with an online log-sum-exp), the gradients
computed in the forward sweep or recomputed in backward, ignored targets (-100); float64 gradcheck;
errors that name the input.

Accuracy: ``tests/accuracy.py``'s bound, ``2 * ref_err + noise + FLOOR * max|truth|``. Why a fused
kernel meets it:

- ``ref_err`` (the eager reference's own error in the same dtype on this machine) holds the rounding
  both sides share and that varies between machines: the float32 matrix products (logits
  ``q @ E^T``, ``dq``, ``dE``: BLAS or cuBLAS kernels that depend on the processor), and for
  bfloat16 the rounding of every intermediate. The kernel does the same products in other tiles and
  orders, which changes the rounding but not its size: the factor 2.
- ``FLOOR * max|truth|``: the kernel's own elementwise arithmetic, the same on every CPU
  instruction set by construction (native: exp within 2 ulp and softmax row sums accumulated in
  double, ``csrc/cpu/row_math.h``; Triton: float32 tiles), then one rounding of each result.
  float32: 1e-6 is 16.8 units of 2^-24. A row sum kept in float lanes would not fit: with
  N = 10,488 entities in one serial chain (the native AVX2 path before it was vectorised) it was off
  by up to ~N * 2^-24 ~ 6e-4 relative, and ``test_cross_entropy_all_icews_rows_and_entities``
  failed (dq error 7.9e-8 against a bound of 2.4e-8).
- ``noise``: how far the float64 truth moves when the inputs move by 4 float32 eps (relative): the
  problem's conditioning.
"""

from __future__ import annotations

import importlib

import pytest
import torch
import torch.nn.functional as F

from rotmem.ops import ce_tiles, reference
from tests.accuracy import check, randn
from tests.ops import backends
from tests.ops.backends import leaf

DTYPES = [torch.float32, torch.bfloat16]
REDUCTIONS = ["mean", "sum", "none"]
# (batch, entities, 2n, tiles): tiles None is the default (one tile here); (elements, min rows)
# cuts the logits into several row blocks and entity chunks (ce_tiles.cross_entropy_blocks)
CASES = [
    (1, 1, 2, None),
    (13, 70, 18, None),
    (13, 70, 18, (5 * 16, 5)),  # 5-row blocks x 16-entity chunks: the online log-sum-exp
    (16, 37, 66, None),
    (40, 37, 66, (40 * 7, 40)),  # one row block, uneven 7-entity chunks
    (1, 10488, 166, None),
    (999, 10488, 498, None),  # the paper's batch and width: compiled on a GPU only
]
INTERPRETED = {(1, 1), (13, 70), (16, 37), (1, 10488)}  # (batch, entities) the interpreter runs
ON_CPU = {(999, 10488)}  # ... and those the native CPU kernels skip (the float64 truth alone is slow)


def truth_cross_entropy(q, entity, target, reduction="mean"):
    """The reference's math without its float32 cast of the logits, so float64 stays float64."""
    return F.cross_entropy(q @ entity.t(), target, reduction=reduction)


def use_tiles(monkeypatch, tiles: tuple[int, int] | None, grad_in_forward: bool | None = None) -> None:
    """Cut the logits as ``tiles`` says (``(elements, min rows)``, None: the default) and compute the
    gradients in the forward sweep or in backward (None: by the table's size), on every backend."""
    if tiles is not None:
        monkeypatch.setattr(ce_tiles, "CE_TILE_ELEMENTS", tiles[0])
        monkeypatch.setattr(ce_tiles, "CE_MIN_BLOCK_ROWS", tiles[1])
    monkeypatch.setattr(ce_tiles, "CE_GRAD_IN_FORWARD", grad_in_forward)


def inputs(batch, entities, width, device, seed=0, ignore=False, scale=1.0):
    """float64 ``[q, entity, target]``; ``ignore``: every third target is -100."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    target = torch.randint(0, entities, (batch,), generator=g)
    if ignore:
        target[::3] = -100
    q = randn(batch, width, device=device, seed=seed, scale=scale)
    entity = randn(entities, width, device=device, seed=seed + 1, scale=scale)
    return [q, entity, target.to(device)]


def ce(op, reduction):
    return lambda q, entity, target: op(q, entity, target, reduction)


def forward_sweep_roundings(backend, reduction: str, q: torch.Tensor, entity: torch.Tensor) -> int:
    """1 where the op makes the gradients in its forward sweep (``ce_tiles``): they are rounded to the
    inputs' dtype there and scaled by the output gradient in backward, one rounding more than the
    reference (which scales before it rounds); 0 where backward computes them."""
    if reduction == "none" or not ce_tiles.grad_in_forward(entity):
        return 0
    cols = ce_tiles.cross_entropy_blocks(q.shape[0], entity.shape[0])[1]
    return int(backend.name == "native" or cols == entity.shape[0])  # Triton: only whole rows


def check_ce(backend, reduction, case_inputs, dtype=torch.float32, wrt=(0, 1)):
    check(
        ce(backend.ops.cross_entropy_all, reduction),
        ce(reference.cross_entropy_all, reduction),
        ce(truth_cross_entropy, reduction),
        case_inputs,
        list(wrt),
        dtype,
        name=f"cross_entropy_all[{reduction}]",
        grad_roundings=forward_sweep_roundings(backend, reduction, *case_inputs[:2]),
    )


@pytest.mark.parametrize("grad_in_forward", [True, False])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch, entities, width, tiles", CASES)
def test_cross_entropy_all(
    backend, batch, entities, width, tiles, dtype, reduction, grad_in_forward, monkeypatch
):
    if backend.interpreted and (batch, entities) not in INTERPRETED:
        pytest.skip("too slow for the Triton interpreter: runs compiled on a GPU")
    if backend.device == "cpu" and (batch, entities) in ON_CPU:
        pytest.skip("the paper's shape at its width runs on a GPU (the CPU runs it narrow below)")
    use_tiles(monkeypatch, tiles, grad_in_forward)
    if tiles is not None:
        rows, cols = ce_tiles.cross_entropy_blocks(batch, entities)
        assert (rows, cols) != (batch, entities), "the case must cut the logits into several tiles"
    check_ce(backend, reduction, inputs(batch, entities, width, backend.device, scale=0.5), dtype)


def test_cross_entropy_all_icews_rows_and_entities(backend):
    """B = 999 against N = 10,488 entities (float32); narrow rows on the CPU to keep the float64
    truth cheap, the paper's width (2n = 498) on a GPU."""
    if backend.interpreted:
        pytest.skip("too slow for the Triton interpreter: runs compiled on a GPU")
    width = 498 if backend.device == "cuda" else 18
    check_ce(backend, "mean", inputs(999, 10488, width, backend.device))


@pytest.mark.parametrize("grad_in_forward", [True, False])
@pytest.mark.parametrize("tiles", [None, (5 * 16, 4)], ids=["one-tile", "tiles"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_all_ignores_minus_100(backend, reduction, tiles, grad_in_forward, monkeypatch):
    """Targets of -100 as in F.cross_entropy: loss 0, no gradient, "mean" over the other rows;
    targets on the chunks' edges."""
    use_tiles(monkeypatch, tiles, grad_in_forward)
    q, entity, _ = inputs(9, 69, 8, backend.device, seed=4, scale=2.0)
    target = torch.tensor([-100, 68, 16, -100, 33, 34, -100, 1, -100], device=backend.device)
    check_ce(backend, reduction, [q, entity, target])


@pytest.mark.parametrize("backend", backends.params(("triton",)), indirect=True)
@pytest.mark.parametrize("tiles", [None, (5 * 16, 4)], ids=["one-tile", "tiles"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_triton_takes_one_sweep_only_for_whole_rows(backend, reduction, tiles, monkeypatch):
    """Triton computes the gradients in the forward sweep only when a tile holds every entity and a
    reduction is asked for ("none" needs per-row output gradients)."""
    use_tiles(monkeypatch, tiles, True)
    module = importlib.import_module("rotmem.ops.triton.cross_entropy")
    train, calls = module._cross_entropy_train, []
    monkeypatch.setattr(module, "_cross_entropy_train", lambda *args: calls.append(1) or train(*args))
    q, entity, target = (t.float() if t.is_floating_point() else t for t in inputs(9, 69, 8, backend.device))
    backend.ops.cross_entropy_all(q.requires_grad_(), entity, target, reduction)
    assert len(calls) == (tiles is None and reduction != "none")


@pytest.mark.parametrize("grad_in_forward", [True, False])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_all_every_target_ignored(backend, reduction, grad_in_forward, monkeypatch):
    """Every row ignored: the loss is torch's (nan for "mean", 0 else) and the gradients are 0."""
    use_tiles(monkeypatch, None, grad_in_forward)
    q, entity, _ = (t.float() for t in inputs(5, 30, 8, backend.device))
    target = torch.full((5,), -100, device=backend.device)
    results = []
    for fn in (backend.ops.cross_entropy_all, reference.cross_entropy_all):
        qq, ee = q.detach().requires_grad_(), entity.detach().requires_grad_()
        loss = fn(qq, ee, target, reduction)
        torch.nan_to_num(loss).sum().backward()
        results.append((loss.float(), qq.grad, ee.grad))
    (loss, dq, de), (want, _, _) = results
    torch.testing.assert_close(loss, want, equal_nan=True)
    assert torch.count_nonzero(dq) == 0 and torch.count_nonzero(de) == 0


@pytest.mark.parametrize("grad_in_forward", [True, False])
@pytest.mark.parametrize("wrt", [(0,), (1,)], ids=["q", "entity"])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_all_gradient_of_one_input(backend, reduction, wrt, grad_in_forward, monkeypatch):
    """Only q, or only the table, requires grad (the other gradient is skipped)."""
    use_tiles(monkeypatch, (8 * 20, 8), grad_in_forward)
    check_ce(backend, reduction, inputs(21, 50, 12, backend.device), wrt=wrt)


def test_cross_entropy_all_output_gradient_scales_the_forward_gradients(backend, monkeypatch):
    """Gradients computed in the forward sweep are scaled by the output gradient in backward."""
    use_tiles(monkeypatch, None, True)
    q, entity, _ = (t.float().requires_grad_() for t in inputs(4, 9, 6, backend.device))
    target = torch.tensor([1, 8, 0, 3], device=backend.device)
    got = torch.autograd.grad(-2.5 * backend.ops.cross_entropy_all(q, entity, target, "sum"), [q, entity])
    want = torch.autograd.grad(-2.5 * reference.cross_entropy_all(q, entity, target, "sum"), [q, entity])
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


def test_cross_entropy_all_without_grad(backend, monkeypatch):
    use_tiles(monkeypatch, (4 * 16, 4))
    q, entity, target = (t.float() if t.is_floating_point() else t for t in inputs(9, 40, 10, backend.device))
    with torch.no_grad():
        loss = backend.ops.cross_entropy_all(q.requires_grad_(), entity, target, "mean")
    torch.testing.assert_close(loss, reference.cross_entropy_all(q, entity, target), rtol=1e-5, atol=1e-6)
    assert not loss.requires_grad


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("tiles", [None, (4 * 3, 4), (2 * 11, 2)], ids=["one-tile", "chunks", "row-blocks"])
def test_gradcheck_float64(backend, tiles, reduction, monkeypatch):
    """float64 in, float64 out: both gradients by finite differences, with an ignored row."""
    use_tiles(monkeypatch, tiles)
    target = torch.tensor([0, 3, 10, -100, 5, 5, 1, 9, 2], device=backend.device)
    q = randn(9, 6, device=backend.device).requires_grad_()
    entity = randn(11, 6, device=backend.device, seed=1).requires_grad_()
    fast = backend.name == "triton"
    assert torch.autograd.gradcheck(
        lambda q, e: backend.ops.cross_entropy_all(q, e, target, reduction), (q, entity), fast_mode=fast
    )


def test_cross_entropy_all_errors_name_the_input(backend):
    device = backend.device
    q, entity = torch.zeros(2, 6, device=device), torch.zeros(4, 6, device=device)
    target = torch.tensor([0, 1], device=device)
    fn = backend.ops.cross_entropy_all
    errors = (ValueError, IndexError, RuntimeError)
    for bad in (4, -101):  # N, and a negative id other than the ignored -100 (on every device)
        with pytest.raises(IndexError, match=rf"^cross_entropy_all: target\[1\] = {bad} is out of range"):
            fn(q, entity, torch.tensor([0, bad], device=device))
    with pytest.raises(errors, match="reduction.*'avg'"):
        fn(q, entity, target, "avg")
    with pytest.raises(errors, match=r"entity.*\b8\b"):
        fn(q, torch.zeros(4, 8, device=device), target)
    with pytest.raises(errors, match="empty"):
        fn(q, torch.zeros(0, 6, device=device), target)
    with pytest.raises(errors, match="target must"):
        fn(q, entity, target[:1])
    with pytest.raises(errors, match="float64.*float32"):
        fn(q.double(), entity, target)


def opcheck_cases(backend) -> dict[str, tuple]:
    """``{name: (op, args)}`` of the backend's operators: forward (a -100 target ignored), backward and
    the training op that makes the gradients in the forward sweep, in several tiles."""
    device = backend.device
    q, entity = leaf(7, 6, device=device), leaf(9, 6, device=device, seed=1)
    target = torch.tensor([0, 8, 3, 3, -100, 1, 2], device=device)
    if backend.name == "triton":
        kernels = importlib.import_module("rotmem.ops.triton.cross_entropy")
        lse = torch.randn(7, device=device)
        return {
            "cross_entropy_all": (kernels._cross_entropy, (q, entity, target, 3, 4)),
            "cross_entropy_all_backward": (
                kernels._cross_entropy_backward,
                (torch.randn(7, device=device), q, entity, target, lse, 3, 4, True, True),
            ),
            "cross_entropy_all_train": (
                kernels._cross_entropy_train,
                (q, entity, target, "mean", 3, True, True),
            ),
        }
    ops, cases = torch.ops.rotmem, {}
    for reduction in ("mean", "none"):
        cases[f"cross_entropy_all:{reduction}"] = (
            ops.cross_entropy_all.default,
            (q, entity, target, reduction, 3, 4),
        )
        lse = ops.cross_entropy_all.default(q.detach(), entity.detach(), target, reduction, 3, 4)[1]
        grad = torch.ones(7, device=device) if reduction == "none" else torch.tensor(1.0, device=device)
        cases[f"cross_entropy_all_backward:{reduction}"] = (
            ops.cross_entropy_all_backward.default,
            (grad, q, entity, target, lse, reduction, 3, 4, True, True),
        )
    for need_q, need_e in ((True, True), (True, False), (False, True)):
        args = (q if need_q else q.detach(), entity if need_e else entity.detach(), target, "mean", 3, 4)
        cases[f"cross_entropy_all_train:{need_q}-{need_e}"] = (
            ops.cross_entropy_all_train.default,
            (*args, need_q, need_e),
        )
    return cases


@pytest.mark.parametrize("backend", backends.params(per_isa=False), indirect=True)
def test_opcheck(backend):
    """Schema, fakes, autograd registration and AOT tracing of the ops and their backward."""
    backends.opcheck(opcheck_cases(backend))


@pytest.mark.parametrize("backend", backends.params(("native",), ("cpu",), per_isa=False), indirect=True)
def test_cross_entropy_gradients_survive_retain_graph_and_accumulation(backend):
    """The fused CE hands its saved gradients to autograd (unit output gradient): repeated backward
    passes must neither see them modified nor modify them."""
    q, e = leaf(6, 4), leaf(9, 4, seed=1)
    target = torch.tensor([0, 8, 3, 3, 1, 2])
    loss = backend.ops.cross_entropy_all(q, e, target)
    first = torch.autograd.grad(loss, [q, e], retain_graph=True)
    loss.backward(retain_graph=True)
    loss.backward(retain_graph=True)
    for leaf_, grad in zip((q, e), first, strict=True):
        torch.testing.assert_close(leaf_.grad, 2 * grad)
    torch.testing.assert_close(torch.autograd.grad(loss, [q, e])[0], first[0])
