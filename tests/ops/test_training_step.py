"""A Phase-2 training step (queries in both directions, the fused cross-entropy over all entities,
N3 over the batch's rows) through the public dispatch of ``rotmem.ops``, on every backend here
(``tests/ops/backends.py``): loss and every parameter's gradient equal the reference's."""

from __future__ import annotations

import pytest
import torch

from rotmem import ops
from rotmem.models.romem import RoMem
from tests.ops import backends


@pytest.mark.parametrize("backend", backends.params(per_isa=False), indirect=True)
@pytest.mark.parametrize("backbone", ["chronor", "distmult"])
def test_training_step_matches_reference(backend, backbone, monkeypatch):
    """Loss and every parameter's gradient of a Phase-2 step: ``ROTMEM_BACKEND=<backend>`` vs ``torch``."""
    device = backend.device
    torch.manual_seed(0)
    model = RoMem(23, 4, dim=18, k=3, backbone=backbone, speed="learned", tau0=12784.0, init_s=0.05).to(
        device
    )
    g = torch.Generator().manual_seed(2)
    h, t = torch.randint(0, 23, (2, 9), generator=g).to(device)
    r = torch.randint(0, 4, (9,), generator=g).to(device)
    tau = (12784 + torch.randint(0, 4017, (9,), generator=g)).to(device, torch.float32)
    params = [p for p in model.parameters() if p.requires_grad]

    def step():
        queries = torch.cat([model.query_tails(h, r, tau), model.query_heads(r, t, tau)])
        rows = [model.entity[h], model.w[r], model.entity[t]] + (
            [] if model.w_hat is None else [model.w_hat[r]]
        )
        loss = ops.cross_entropy_all(queries, model.entity, torch.cat([t, h])) + 0.01 * ops.n3(rows) / 9
        return loss, torch.autograd.grad(loss, params)

    monkeypatch.setenv("ROTMEM_BACKEND", backend.env_name)
    loss, grads = step()
    monkeypatch.setenv("ROTMEM_BACKEND", "torch")
    want_loss, want_grads = step()
    torch.testing.assert_close(loss, want_loss, rtol=1e-5, atol=1e-6)
    for p, got, want in zip(params, grads, want_grads, strict=True):
        torch.testing.assert_close(
            got, want, rtol=1e-4, atol=1e-6, msg=lambda m, p=p: f"{tuple(p.shape)}: {m}"
        )
