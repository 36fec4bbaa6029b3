"""``unrotated_query_indexed`` (the unrotated query fused with its table lookups and the spectrum's
angles) on every backend here (``tests/ops/backends.py``) against the reference: forward and
backward (tables with repeated ids), float32 and bfloat16, odd shapes, ChronoR and DistMult, far
angles, the spectrum's clamps, tables past 2**31 elements (GPU); ``opcheck``; float64 gradcheck.
Accuracy: ``tests/accuracy.py``."""

from __future__ import annotations

import importlib

import pytest
import torch

from rotmem.ops import reference
from tests.accuracy import check, randn
from tests.ops import backends
from tests.ops.backends import leaf

DTYPES = [torch.float32, torch.bfloat16]
TAU0 = 12784.0  # 2005-01-01 in days since 1970-01-01


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


@pytest.mark.parametrize("backend", backends.params(("triton",)), indirect=True)
def test_unrotated_query_indexed_names_bad_ids(backend):
    inputs = [t.float() if t is not None and t.is_floating_point() else t
              for t in indexed_inputs(4, 3, 5, 2, backend.device)]  # fmt: skip
    bad = [*inputs[:3], torch.tensor([0, 1, 5, 2], device=backend.device), *inputs[4:]]
    with pytest.raises(IndexError, match=r"ent_idx\[2\] = 5 is out of range for the entity table of"):
        backend.ops.unrotated_query_indexed(*bad, 0.0)
    short = [*inputs[:6], inputs[6][:3], *inputs[7:]]
    with pytest.raises(ValueError, match="alpha must have shape"):
        backend.ops.unrotated_query_indexed(*short, 0.0)


def opcheck_cases(backend) -> dict[str, tuple]:
    """``{name: (op, args)}`` of the backend's operators: ChronoR and DistMult, the entity table's
    gradient dense and sparse."""
    device, cases = backend.device, {}
    ent_idx = torch.tensor([1, 0, 1, 4, 2, 1], device=device)
    rel_idx = ent_idx % 3

    def scalar(value):
        return torch.tensor(value, device=device, requires_grad=True)

    for backbone in ("chronor", "distmult"):
        entity, w_table = leaf(5, 6, device=device), leaf(3, 6, device=device, seed=1)
        w_hat_table = leaf(3, 6, device=device, seed=2) if backbone == "chronor" else None
        tables = (entity, w_table, w_hat_table, ent_idx, rel_idx)
        grad = leaf(6, 6, device=device, seed=3, grad=False)
        if backend.name == "native":
            tau, alpha = leaf(6, device=device, scale=20, seed=4), leaf(6, device=device, seed=5)
            inputs = (*tables, tau, alpha, scalar(-1.0), scalar(2.0), 3.0)
            forward = torch.ops.rotmem.unrotated_query_indexed.default
            backward = torch.ops.rotmem.unrotated_query_indexed_backward.default
            options = ()
        else:
            kernels = importlib.import_module("rotmem.ops.triton.unrotated_query_indexed")
            inputs = (*tables, leaf(6, device=device, seed=4), scalar(2.0))  # speed [B], log_base
            forward, backward = kernels._query_indexed, kernels._query_indexed_backward
            options = (torch.float32,)  # the output dtype
        name = f"unrotated_query_indexed:{backbone}"
        cases[name] = (forward, (*inputs, *options, False))
        cases[f"{name}:sparse_grad"] = (forward, (*inputs, *options, True))
        cases[f"unrotated_query_indexed_backward:{backbone}"] = (backward, (grad, *inputs))
    return cases


@pytest.mark.parametrize("backend", backends.params(per_isa=False), indirect=True)
def test_opcheck(backend):
    """Schema, fakes, autograd registration and AOT tracing of the op and its backward."""
    backends.opcheck(opcheck_cases(backend))


@pytest.mark.gpu
@pytest.mark.parametrize("backend", backends.params(("triton",), ("cuda",)), indirect=True)
def test_tables_beyond_int32_offsets(backend):
    """Rows that start past element 2**31 of the entity table (needs ~30 GB free on the GPU); the
    cross-entropy over that table too."""
    device, ops = backend.device, backend.ops
    n, entities = 249, (1 << 31) // 498 + 64  # the last rows start past element 2**31
    entity = torch.empty(entities, 2 * n, device=device).uniform_(-0.4, 0.4)
    w = torch.empty(3, 2 * n, device=device).uniform_(-0.4, 0.4)
    ent_idx = torch.tensor([entities - 1, entities - 40, 0], device=device)
    rel_idx = torch.tensor([0, 2, 1], device=device)
    args = (ent_idx, rel_idx, torch.full((3,), 13000.0, device=device), torch.ones(3, device=device))
    spectrum = (torch.tensor(-3.0, device=device), torch.tensor(9.2, device=device), 12784.0)
    q = ops.unrotated_query_indexed(entity, w, None, *args, *spectrum)
    torch.testing.assert_close(q, reference.unrotated_query_indexed(entity, w, None, *args, *spectrum))
    target = torch.tensor([entities - 1, entities - 2, 5], device=device)
    with torch.no_grad():
        loss = ops.cross_entropy_all(q, entity, target, "none")
        want = torch.cat(
            [reference.cross_entropy_all(q[i : i + 1], entity, target[i : i + 1], "none") for i in range(3)]
        )
    torch.testing.assert_close(loss, want, rtol=1e-4, atol=1e-4)
