"""Native (C++/CUDA) ops against the reference, forward and backward, float32 and bfloat16, on the
CPU under every instruction set the machine can execute (the ``cpu_isa`` fixture: AVX-512, AVX2,
baseline SSE2), and on CUDA when the extension was built with CUDA and a GPU is present.

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
from accuracy import NOISE, assert_accurate  # tests/accuracy.py: the bound, shared with Triton's tests

from rotmem.ops import ce_tiles, native, reference

pytestmark = pytest.mark.skipif(not native.is_available("cpu"), reason=native.unavailable_reason("cpu"))
# ops whose CPU kernels have per-instruction-set SIMD loops (sines/cosines, softmax rows) run under each
EVERY_CPU_ISA = pytest.mark.usefixtures("cpu_isa")
DEVICES = ["cpu"] + (["cuda"] if native.is_available("cuda") else [])
DTYPES = [torch.float32, torch.bfloat16]


def truth_cross_entropy(q, entity, target, reduction="mean"):
    """The reference's math without its float32 cast of the logits, so float64 stays float64."""
    return F.cross_entropy(q @ entity.t(), target, reduction=reduction)


def run(fn, inputs, wrt, grad_out):
    """``fn(*inputs)`` and the gradients of ``inputs[i]`` for ``i in wrt``, given ``grad_out`` (float64)."""
    args = [t.detach().clone().requires_grad_(i in wrt) if i in wrt else t for i, t in enumerate(inputs)]
    out = fn(*args)
    grads = torch.autograd.grad(out, [args[i] for i in wrt], grad_out.to(out.dtype)) if wrt else ()
    return out, grads


def check(native_fn, reference_fn, truth_fn, inputs, wrt, dtype, exact=(), name="op"):
    """Compare native and reference runs in ``dtype`` with the float64 truth, output and gradients.

    ``inputs``: float64 (or integer) tensors; floating ones are rounded to ``dtype`` for the runs
    and the truth sees the same rounded values. ``exact``: indices never perturbed for the noise
    floor (days, which are exact in every dtype here).
    """
    device = inputs[0].device
    rounded = [t.to(dtype) if t.is_floating_point() else t for t in inputs]
    as64 = [t.double() if t.is_floating_point() else t for t in rounded]
    g = torch.Generator(device="cpu").manual_seed(1)
    with torch.no_grad():
        shape = truth_fn(*as64).shape
    grad_out = torch.randn(shape, generator=g, dtype=torch.float64).to(device)
    truth, truth_grads = run(truth_fn, as64, wrt, grad_out)
    perturbed = [
        t * (1 + NOISE * torch.randn(t.shape, generator=g, dtype=torch.float64).to(device))
        if t.is_floating_point() and i not in exact
        else t
        for i, t in enumerate(as64)
    ]
    moved, moved_grads = run(truth_fn, perturbed, wrt, grad_out)
    out, grads = run(native_fn, rounded, wrt, grad_out)
    ref, ref_grads = run(reference_fn, rounded, wrt, grad_out)
    labels = ["output"] + [f"grad[{i}]" for i in wrt]
    for label, o, r, t, m in zip(
        labels, [out, *grads], [ref, *ref_grads], [truth, *truth_grads], [moved, *moved_grads], strict=True
    ):
        noise = (m.detach().double() - t.detach().double()).abs().max().item() if t.numel() else 0.0
        assert_accurate(f"{name} {label}", o, r, t, dtype, noise)


def randn(*shape, device="cpu", scale=1.0, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(device)


# --- unrotated_query ----------------------------------------------------------------------

ROW_SHAPES = [(1, 1), (7, 83), (999, 83), (5, 249)]


@EVERY_CPU_ISA
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, n", ROW_SHAPES)
@pytest.mark.parametrize("chronor", [True, False])
def test_unrotated_query(device, dtype, rows, n, chronor):
    h, w = randn(rows, 2 * n, device=device), randn(rows, 2 * n, device=device, seed=1)
    theta = randn(rows, n, device=device, scale=3, seed=2)
    w_hat = randn(rows, 2 * n, device=device, seed=3)
    inputs = [h, w, w_hat, theta] if chronor else [h, w, theta]

    def wrap(op):
        return op if chronor else (lambda h, w, theta: op(h, w, None, theta))

    check(
        wrap(native.unrotated_query),
        wrap(reference.unrotated_query),
        wrap(reference.unrotated_query),
        inputs,
        list(range(len(inputs))),
        dtype,
        name="unrotated_query",
    )


# --- the fused, indexed query ------------------------------------------------------------------------

# (batch, n, entities, relations): duplicates in the indices are the rule with few rows.
INDEXED_SHAPES = [(1, 1, 1, 1), (999, 83, 50, 7), (64, 249, 300, 11)]


def indexed_inputs(batch, n, entities, relations, device, chronor=True, max_day=4017, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    inputs = [
        randn(entities, 2 * n, device=device, scale=0.4, seed=seed),
        randn(relations, 2 * n, device=device, scale=0.4, seed=seed + 1),
        randn(relations, 2 * n, device=device, scale=0.4, seed=seed + 2) if chronor else None,
        torch.randint(0, entities, (batch,), generator=g).to(device),
        torch.randint(0, relations, (batch,), generator=g).to(device),
        torch.randint(0, max_day, (batch,), generator=g).double().to(device),
        torch.rand(batch, generator=g, dtype=torch.float64).to(device),
        torch.tensor(-3.0, dtype=torch.float64, device=device),  # log_s: s = 0.05 rad/day
        torch.tensor(9.21, dtype=torch.float64, device=device),  # log_base: base = 10000
    ]
    return inputs


def indexed_fn(op, chronor, tau0):
    def fn(entity, w, *rest):
        if chronor:
            w_hat, ent_idx, rel_idx, tau, alpha, log_s, log_base = rest
        else:
            w_hat, (ent_idx, rel_idx, tau, alpha, log_s, log_base) = None, rest
        return op(entity, w, w_hat, ent_idx, rel_idx, tau, alpha, log_s, log_base, tau0)

    return fn


def check_indexed(device, dtype, shape, chronor=True, tau0=0.0, max_day=4017, **overrides):
    inputs = indexed_inputs(*shape, device, chronor=chronor, max_day=max_day)
    for index, value in overrides.items():
        inputs[int(index[1:])] = value
    if not chronor:
        inputs.pop(2)
    floating = [i for i, t in enumerate(inputs) if t.is_floating_point()]
    tau = 4 if chronor else 3
    check(
        indexed_fn(native.unrotated_query_indexed, chronor, tau0),
        indexed_fn(reference.unrotated_query_indexed, chronor, tau0),
        indexed_fn(reference.unrotated_query_indexed, chronor, tau0),
        inputs,
        floating,
        dtype,
        exact=(tau + 1,),
        name="unrotated_query_indexed",
    )


@EVERY_CPU_ISA
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", INDEXED_SHAPES)
def test_unrotated_query_indexed(device, dtype, shape):
    check_indexed(device, dtype, shape)


@EVERY_CPU_ISA
@pytest.mark.parametrize("device", DEVICES)
def test_unrotated_query_indexed_distmult_and_tau0(device):
    check_indexed(device, torch.float32, (33, 20, 40, 5), chronor=False, tau0=2000.0)


@EVERY_CPU_ISA
@pytest.mark.parametrize("device", DEVICES)
def test_unrotated_query_indexed_far_angles(device):
    """s = e rad/day over 4017 days: angles up to ~11,000 rad, on both sides of the CPU's libm switch."""
    fast = torch.tensor(1.0, dtype=torch.float64, device=device)  # log_s
    check_indexed(device, torch.float32, (65, 70, 30, 4), i7=fast)


@EVERY_CPU_ISA
@pytest.mark.parametrize("device", DEVICES)
def test_unrotated_query_indexed_clamps(device):
    """Below the clamps (s >= 1e-9, base >= 2) the value is the clamp's and the gradient is 0."""
    below = {
        "i7": torch.tensor(-25.0, dtype=torch.float64, device=device),
        "i8": torch.tensor(0.5, dtype=torch.float64, device=device),
    }
    check_indexed(device, torch.float32, (17, 9, 20, 3), max_day=10**7, **below)
    inputs = indexed_inputs(17, 9, 20, 3, device)
    inputs[7], inputs[8] = below["i7"].float().requires_grad_(), below["i8"].float().requires_grad_()
    inputs = [t.float() if t.is_floating_point() and not t.requires_grad else t for t in inputs]
    native.unrotated_query_indexed(*inputs, 0.0).sum().backward()
    assert inputs[7].grad.item() == 0.0 and inputs[8].grad.item() == 0.0


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
