"""16-bit tables' gradients are summed in float32 and rounded once, on every backend and device.

The inputs make every product and sum exact in float32 (theta = 0, small integers, sums far below
2**24), so any order of float32 additions gives the exact sum, and its one rounding to bfloat16 is
the only error allowed: a backend that adds in bfloat16 (8 bits of mantissa; these sums reach the
thousands) is off by whole units, and one whose float32 sums depended on the order (atomics on a
GPU) could not give equal gradients run after run.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from rotmem.ops import backend

KERNEL_BACKENDS = ("native", "triton")  # the torch backend's gradients are torch's own
CASES = [
    pytest.param(name, device, id=f"{name}-{device}")
    for name in KERNEL_BACKENDS
    for device in ("cpu", "cuda")
]


def exact_inputs(device: str, chronor: bool):
    """512 facts over 2 entities and 2 relations, entries integers 1..4: exact in float32."""
    g = torch.Generator().manual_seed(0)
    batch, n, rows = 512, 8, 2

    def ints(*shape):
        return torch.randint(1, 5, shape, generator=g).to(torch.bfloat16).to(device)

    entity, w_table = ints(rows, 2 * n), ints(rows, 2 * n)
    w_hat = ints(rows, 2 * n) if chronor else None
    ent_idx = torch.randint(0, rows, (batch,), generator=g).to(device)
    rel_idx = torch.randint(0, rows, (batch,), generator=g).to(device)
    tau = torch.full((batch,), 100.0, device=device)  # tau = tau0: every angle is 0
    alpha = torch.full((batch,), 0.5, device=device)
    log_s, log_base = torch.tensor(-3.0, device=device), torch.tensor(9.2, device=device)
    grad = ints(batch, 2 * n)
    return entity, w_table, w_hat, ent_idx, rel_idx, tau, alpha, log_s, log_base, 100.0, grad


def gradients(module, inputs) -> list[torch.Tensor]:
    entity, w_table, w_hat, *rest, grad = inputs
    tables = [t.clone().requires_grad_() for t in (entity, w_table, w_hat) if t is not None]
    w_hat_leaf = tables[2] if w_hat is not None else None
    q = module.unrotated_query_indexed(tables[0], tables[1], w_hat_leaf, *rest)
    return list(torch.autograd.grad(q, tables, grad))


def exact_gradients(inputs) -> list[torch.Tensor]:
    """The same gradients in float64 (exact here), rounded once to bfloat16."""
    entity, w_table, w_hat, ent_idx, rel_idx, *_, grad = inputs
    e, w, g = entity.double(), w_table.double(), grad.double()
    v = w_hat.double() if w_hat is not None else torch.ones_like(w)
    rows = torch.zeros_like(e).index_add_(0, ent_idx, g * w[rel_idx] * v[rel_idx])  # q = h * w * w_hat
    rel_rows = g * e[ent_idx]
    out = [rows, torch.zeros_like(w).index_add_(0, rel_idx, rel_rows * v[rel_idx])]
    if w_hat is not None:
        out.append(torch.zeros_like(w).index_add_(0, rel_idx, rel_rows * w[rel_idx]))
    return [t.to(torch.bfloat16) for t in out]


@pytest.mark.parametrize("chronor", [False, True], ids=["distmult", "chronor"])
@pytest.mark.parametrize(("name", "device"), CASES)
def test_bf16_table_gradients_are_float32_sums_rounded_once(name, device, chronor):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device is visible")
    if not backend.available(name, device):
        pytest.skip(f"backend {name} does not run on {device} here")
    module = importlib.import_module(backend._MODULES[name])
    inputs = exact_inputs(device, chronor)
    first = gradients(module, inputs)
    want = exact_gradients(inputs)
    assert max(float(t.double().abs().max()) for t in want) > 512  # bfloat16 sums would round
    for got, expected, table in zip(first, want, ("entity", "w_table", "w_hat_table"), strict=False):
        assert got.dtype == torch.bfloat16, table
        torch.testing.assert_close(got.cpu(), expected.cpu(), rtol=0, atol=0, msg=f"{name} {device} {table}")
    # run to run: the same bits (on a GPU the atomics' order changes between runs)
    for again, got in zip(gradients(module, inputs), first, strict=True):
        assert torch.equal(again, got)
