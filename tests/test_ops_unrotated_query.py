"""The unrotated query, dense (``unrotated_query``) and fused with its table lookups and the
spectrum's angles (``unrotated_query_indexed``), on every backend here (``tests/op_backends.py``)
against the reference: forward and backward (tables with repeated ids), float32 and bfloat16, odd
shapes, ChronoR and DistMult, far angles, the spectrum's clamps; float64 gradcheck.
Accuracy: ``tests/op_accuracy.py``."""

from __future__ import annotations

import op_backends
import pytest
import torch
from op_accuracy import check, randn

from rotmem.ops import reference

DTYPES = [torch.float32, torch.bfloat16]
TAU0 = 12784.0  # 2005-01-01 in days since 1970-01-01

# --- unrotated_query (dense) ---------------------------------------------------------------------

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


# --- unrotated_query_indexed ---------------------------------------------------------------------


def indexed_inputs(batch, n, entities, relations, device, chronor=True, tau0=0.0, max_day=4017, seed=0):
    """entity, w, w_hat (or None), ent_idx, rel_idx, tau (``tau0`` + a day below ``max_day``), alpha,
    log_s (s = 0.05 rad/day), log_base (10000): float64 or int64. Few rows: ids repeat, and the
    backward must sum several rows into one table row."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    return [
        randn(entities, 2 * n, device=device, scale=0.4, seed=seed),
        randn(relations, 2 * n, device=device, scale=0.4, seed=seed + 1),
        randn(relations, 2 * n, device=device, scale=0.4, seed=seed + 2) if chronor else None,
        torch.randint(0, entities, (batch,), generator=g).to(device),
        torch.randint(0, relations, (batch,), generator=g).to(device),
        (tau0 + torch.randint(0, max_day, (batch,), generator=g).double()).to(device),
        torch.rand(batch, generator=g, dtype=torch.float64).to(device),
        torch.tensor(-3.0, dtype=torch.float64, device=device),
        torch.tensor(9.21, dtype=torch.float64, device=device),
    ]


def check_indexed(backend, dtype, shape, chronor=True, tau0=0.0, days_from=0.0, max_day=4017, **overrides):
    """``check`` of ``unrotated_query_indexed`` (every floating input differentiated, tau left
    unperturbed); ``overrides``: ``i7=...`` replaces input 7 (log_s), and so on."""
    inputs = indexed_inputs(*shape, backend.device, chronor=chronor, tau0=days_from, max_day=max_day)
    for index, value in overrides.items():
        inputs[int(index[1:])] = value
    floating = [i for i, t in enumerate(inputs) if t is not None and t.is_floating_point()]

    def fn(op):
        return lambda *args: op(*args, tau0)

    check(fn(backend.ops.unrotated_query_indexed), fn(reference.unrotated_query_indexed),
          fn(reference.unrotated_query_indexed), inputs, floating, dtype, exact=(5,),
          name="unrotated_query_indexed")  # fmt: skip


# (batch, n, entities, relations, chronor, tau0, first day)
INDEXED_CASES = [
    (1, 1, 1, 1, True, 0.0, 0.0),
    (999, 83, 50, 7, True, 0.0, 0.0),
    (64, 249, 300, 11, True, 0.0, 0.0),
    (33, 20, 40, 5, False, 2000.0, 0.0),  # days before and after tau0
    *((*shape, chronor, TAU0, TAU0) for shape in [(1000, 249, 10488, 251)] for chronor in (True, False)),
]
# the interpreter's (a few seconds each), ChronoR and DistMult, ICEWS05-15's days
INTERPRETED = [(*shape, chronor, TAU0, TAU0) for shape in [(1, 1, 11, 3), (7, 33, 11, 3), (16, 5, 11, 3),
               (999, 83, 10488, 251)] for chronor in (True, False)]  # fmt: skip
INDEXED_CASES += INTERPRETED


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", INDEXED_CASES, ids=str)
def test_unrotated_query_indexed(backend, dtype, case):
    if backend.interpreted and case not in INTERPRETED:
        pytest.skip("too slow for the Triton interpreter: runs compiled on a GPU")
    if backend.device == "cpu" and case[:4] == (1000, 249, 10488, 251):
        pytest.skip("the issue's full shape: on a GPU (the CPU runs B = 999 at n = 83 against it)")
    *shape, chronor, tau0, days_from = case
    check_indexed(backend, dtype, shape, chronor=chronor, tau0=tau0, days_from=days_from)


def test_unrotated_query_indexed_far_angles(backend):
    """s = e rad/day over 4017 days: angles up to ~11,000 rad, on both sides of the CPU's libm switch."""
    fast = torch.tensor(1.0, dtype=torch.float64, device=backend.device)  # log_s
    check_indexed(backend, torch.float32, (65, 70, 30, 4), i7=fast)


@pytest.mark.parametrize("log_s, log_base", [(-25.0, 0.5), (-30.0, 0.1)])
def test_unrotated_query_indexed_clamps(backend, log_s, log_base):
    """Below the clamps (s >= 1e-9, base >= 2) the value is the clamp's and the gradient is 0."""
    device = backend.device
    below = {"i7": torch.tensor(log_s, dtype=torch.float64, device=device),
             "i8": torch.tensor(log_base, dtype=torch.float64, device=device)}  # fmt: skip
    check_indexed(backend, torch.float32, (17, 9, 20, 3), max_day=10**7, **below)
    inputs = indexed_inputs(17, 9, 20, 3, device)
    inputs[7], inputs[8] = below["i7"].float().requires_grad_(), below["i8"].float().requires_grad_()
    inputs = [t.float() if t.is_floating_point() and not t.requires_grad else t for t in inputs]
    backend.ops.unrotated_query_indexed(*inputs, 0.0).sum().backward()
    assert inputs[7].grad.item() == 0.0 and inputs[8].grad.item() == 0.0


@pytest.mark.parametrize("chronor", [True, False])
@pytest.mark.parametrize("log_s, log_base", [(-1.0, 2.0), (-30.0, 0.1)])  # the second is below both clamps
def test_gradcheck_unrotated_query_indexed_float64(backend, chronor, log_s, log_base):
    inputs = indexed_inputs(6, 3, 5, 3, backend.device, chronor=chronor, max_day=20, seed=7)
    inputs[7] = torch.tensor(log_s, dtype=torch.float64, device=backend.device)
    inputs[8] = torch.tensor(log_base, dtype=torch.float64, device=backend.device)
    for t in inputs:
        if t is not None and t.is_floating_point():
            t.requires_grad_()
    fn = backend.ops.unrotated_query_indexed
    assert torch.autograd.gradcheck(
        lambda *args: fn(*args, 3.0), tuple(inputs), fast_mode=backend.name == "triton"
    )


@pytest.mark.parametrize("backend", op_backends.params(("triton",)), indirect=True)
def test_unrotated_query_indexed_names_bad_ids(backend):
    inputs = [t.float() if t is not None and t.is_floating_point() else t
              for t in indexed_inputs(4, 3, 5, 2, backend.device)]  # fmt: skip
    bad = [*inputs[:3], torch.tensor([0, 1, 5, 2], device=backend.device), *inputs[4:]]
    with pytest.raises(IndexError, match=r"ent_idx\[2\] = 5 is out of range for the entity table of"):
        backend.ops.unrotated_query_indexed(*bad, 0.0)
    short = [*inputs[:6], inputs[6][:3], *inputs[7:]]
    with pytest.raises(ValueError, match="alpha must have shape"):
        backend.ops.unrotated_query_indexed(*short, 0.0)
