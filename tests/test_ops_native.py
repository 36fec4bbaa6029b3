"""The native (C++/CUDA) fused cross-entropy and ``score_all`` against the reference, forward and
backward, float32 and bfloat16, on the CPU under every instruction set the machine can execute (the
``cpu_isa`` fixture: AVX-512, AVX2, baseline SSE2), and on CUDA when the extension was built with
CUDA and a GPU is present. (``rotate``, the unrotated queries and ``n3`` have one file per op over
every backend: ``tests/test_ops_rotate.py``, ``test_ops_unrotated_query.py``, ``test_ops_n3.py``.)

Accuracy rule (``check``, with the bound of ``tests/accuracy.py`` that the Triton tests share): against
a float64 truth computed from the same (rounded) inputs, the native op's error is at most
``2 * ref_err + noise + FLOOR * max|truth|``. Each term covers one part of the native op's arithmetic:

- ``ref_err``, the eager reference's own error in the same dtype on this machine, holds the
  rounding both sides share and that varies between machines: the float32 matrix products (logits
  ``q @ E^T``, ``dq``, ``dE``: one BLAS library, whose kernels depend on the CPU, serves both), the
  float32 rounding of the angles, and for bfloat16 the rounding of every intermediate. The native op
  does the same products in other blocks (tiles) and orders, which changes the rounding but not its
  size: hence the factor 2.
- ``FLOOR * max|truth|`` covers the native op's own elementwise arithmetic, which is the same on every
  instruction set by construction: sines and cosines within 1.5 ulp (``csrc/cpu/sin_cos.h``), exp
  within 2 ulp and softmax row sums accumulated in double, so exact to one float rounding whatever
  the number of SIMD lanes (``csrc/cpu/row_math.h``), then one rounding of each result. float32:
  1e-6 is 16.8 units of 2^-24, a few ulp of the largest value. A row sum in float lanes would not fit:
  with N = 10,488 entities in one serial chain (the AVX2 path before it was vectorised) it was off by
  up to ~N * 2^-24 ~ 6e-4 relative, and ``test_cross_entropy_all_icews_rows_and_entities`` failed
  (dq error 7.9e-8 against a bound of 2.4e-8). bfloat16: the final rounding is in ``ref_err`` (the
  reference rounds every intermediate); 1e-3 leaves room for the float32 internals.
- ``noise``: how far the float64 truth moves when the inputs move by ``NOISE`` (4 float32 eps,
  relative). It is the conditioning of the problem: a sine of a 4000-radian angle amplifies any
  rounding of the angle, so two correct float32 computations that round it differently may differ by
  that much.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from accuracy import check, randn  # tests/accuracy.py: the bound and the check, shared by every backend

from rotmem.ops import ce_tiles, native, reference

pytestmark = pytest.mark.skipif(not native.is_available("cpu"), reason=native.unavailable_reason("cpu"))
# ops whose CPU kernels have per-instruction-set SIMD loops (sines/cosines, softmax rows) run under each
EVERY_CPU_ISA = pytest.mark.usefixtures("cpu_isa")
DEVICES = ["cpu"] + (["cuda"] if native.is_available("cuda") else [])
DTYPES = [torch.float32, torch.bfloat16]


def truth_cross_entropy(q, entity, target, reduction="mean"):
    """The reference's math without its float32 cast of the logits, so float64 stays float64."""
    return F.cross_entropy(q @ entity.t(), target, reduction=reduction)


# --- cross-entropy over all entities -----------------------------------------------------------------

# (batch, entities, 2n, tile rows, tile cols); None: the default tiles
CE_CASES = [
    (1, 1, 2, None, None),
    (13, 70, 18, None, None),
    (13, 70, 18, 5, 16),  # several row blocks and entity chunks: online log-sum-exp
    (40, 37, 66, 40, 7),  # one row block, uneven chunks
    (1, 10488, 166, None, None),
]


def ce_fn(op, reduction, rows, cols):
    if op is native.cross_entropy_all and rows is not None:
        return lambda q, e, target: native.cross_entropy_tiled(q, e, target, reduction, rows, cols)
    return lambda q, e, target: op(q, e, target, reduction)


def ce_inputs(batch, entities, width, device, seed=0, ignore=False):
    g = torch.Generator(device="cpu").manual_seed(seed)
    target = torch.randint(0, entities, (batch,), generator=g)
    if ignore:
        target[::3] = -100
    q, e = randn(batch, width, device=device, seed=seed), randn(entities, width, device=device, seed=seed + 1)
    return [q, e, target.to(device)]


@EVERY_CPU_ISA
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CE_CASES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_all(device, dtype, case, reduction):
    batch, entities, width, rows, cols = case
    check(
        ce_fn(native.cross_entropy_all, reduction, rows, cols),
        ce_fn(reference.cross_entropy_all, reduction, 0, 0),
        ce_fn(truth_cross_entropy, reduction, 0, 0),
        ce_inputs(batch, entities, width, device),
        [0, 1],
        dtype,
        name=f"cross_entropy_all[{reduction}]",
    )


@EVERY_CPU_ISA
@pytest.mark.parametrize("device", DEVICES)
def test_cross_entropy_all_icews_rows_and_entities(device):
    """B = 999 against N = 10,488 entities (float32); narrow rows on the CPU to keep the float64
    truth cheap, the paper's width (2n = 498) on a GPU."""
    width = 498 if device == "cuda" else 18
    check(
        native.cross_entropy_all,
        reference.cross_entropy_all,
        truth_cross_entropy,
        ce_inputs(999, 10488, width, device),
        [0, 1],
        torch.float32,
        name="cross_entropy_all",
    )


@EVERY_CPU_ISA
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_all_ignores_minus_100(device, reduction):
    check(
        ce_fn(native.cross_entropy_all, reduction, 4, 9),
        ce_fn(reference.cross_entropy_all, reduction, 0, 0),
        ce_fn(truth_cross_entropy, reduction, 0, 0),
        ce_inputs(12, 30, 8, device, ignore=True),
        [0, 1],
        torch.float32,
        name="cross_entropy_all",
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("grad_in_forward", [True, False])
def test_cross_entropy_all_every_target_ignored(device, reduction, grad_in_forward, monkeypatch):
    """Every row ignored: the loss is torch's (nan for "mean", 0 else) and the gradients are 0."""
    monkeypatch.setattr(ce_tiles, "CE_GRAD_IN_FORWARD", grad_in_forward)
    q, e, _ = ce_inputs(5, 30, 8, device)
    target = torch.full((5,), -100, device=device)
    results = []
    for fn in (native.cross_entropy_all, reference.cross_entropy_all):
        qq, ee = q.detach().requires_grad_(), e.detach().requires_grad_()
        loss = fn(qq, ee, target, reduction)
        torch.nan_to_num(loss).sum().backward()
        results.append((loss.float(), qq.grad, ee.grad))
    (loss, dq, de), (want, _, _) = results
    torch.testing.assert_close(loss, want, equal_nan=True)
    assert torch.count_nonzero(dq) == 0 and torch.count_nonzero(de) == 0


@EVERY_CPU_ISA
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_all_gradient_of_one_input(device, reduction):
    """Only q, or only the table, requires grad (the other gradient is skipped)."""
    q, e, target = ce_inputs(21, 50, 12, device)
    for wrt in ([0], [1]):
        check(
            ce_fn(native.cross_entropy_all, reduction, 8, 20),
            ce_fn(reference.cross_entropy_all, reduction, 0, 0),
            ce_fn(truth_cross_entropy, reduction, 0, 0),
            [q, e, target],
            wrt,
            torch.float32,
            name="cross_entropy_all",
        )


@EVERY_CPU_ISA
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy_all_recomputing_in_backward(monkeypatch, device, reduction):
    """With ROTMEM_CE_GRAD_IN_FORWARD=0 the gradients come from the backward sweep instead."""
    monkeypatch.setattr(ce_tiles, "CE_GRAD_IN_FORWARD", False)
    check(
        ce_fn(native.cross_entropy_all, reduction, 5, 16),
        ce_fn(reference.cross_entropy_all, reduction, 0, 0),
        ce_fn(truth_cross_entropy, reduction, 0, 0),
        ce_inputs(13, 70, 18, device, ignore=True),
        [0, 1],
        torch.float32,
        name="cross_entropy_all",
    )


@EVERY_CPU_ISA
@pytest.mark.parametrize("device", DEVICES)
def test_cross_entropy_all_without_grad(device):
    q, e, target = (t.float() if t.is_floating_point() else t for t in ce_inputs(9, 40, 10, device))
    with torch.no_grad():
        loss = native.cross_entropy_tiled(q.requires_grad_(), e, target, "mean", 4, 16)
    torch.testing.assert_close(loss, reference.cross_entropy_all(q, e, target), rtol=1e-5, atol=1e-6)
    assert not loss.requires_grad


# --- score_all ----------------------------------------------------------------------------


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
    excess = (got.double() - truth).abs() - bound
    assert got.shape == truth.shape, f"{name}: shape {tuple(got.shape)} != {tuple(truth.shape)}"
    assert excess.max() <= 0, f"{name} {dtype}: error exceeds its bound by {excess.max().item():.3g}"


# (B, N, n): one row, one entity, one complex pair, and odd sizes past any tile or vector width.
SCORE_SHAPES = [(1, 1, 1), (1, 10_488, 83), (999, 1, 83), (999, 10_488, 1), (999, 10_488, 83)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch, entities, n", SCORE_SHAPES)
def test_score_all(device, dtype, batch, entities, n):
    """Scores and both gradients within the float32-accumulation bound of the float64 truth."""
    q = randn(batch, 2 * n, device=device).to(dtype)
    e = randn(entities, 2 * n, device=device, seed=1).to(dtype)
    grad = randn(batch, entities, device=device, seed=2).to(dtype)
    q_, e_ = q.clone().requires_grad_(), e.clone().requires_grad_()
    scores = native.score_all(q_, e_)
    grad_q, grad_e = torch.autograd.grad(scores, [q_, e_], grad)
    q, e, grad = q.double(), e.double(), grad.double()
    check_product(scores, q, e.t(), dtype, "score_all")
    check_product(grad_q, grad, e, dtype, "score_all grad[q]")
    check_product(grad_e, grad.t(), q, dtype, "score_all grad[entity]")
