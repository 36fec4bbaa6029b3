"""One Phase-2 step: forward, loss, backward, optimiser step, with no wait on the host."""

from __future__ import annotations

import torch

from rotmem.losses import Objective
from rotmem.models import TemporalKGE
from rotmem.training.loss import phase2_loss


def train_step(
    model: TemporalKGE,
    batch: dict[str, torch.Tensor],
    objective: Objective,
    optimizer: torch.optim.Optimizer,
    sigma_years: float = 0.5,
    clip_norm: float | None = 1.0,
) -> torch.Tensor:
    """One step of the 1-vs-all ``phase2_loss`` on ``batch``; returns the loss, detached, as a tensor
    on the model's device (the caller logs it when it likes: reading it waits for the step).

    ``clip_norm``: the gradients' total norm is clipped to it (None: not clipped). Nothing here reads
    a value back to the host, so a GPU step queues without waiting.
    """
    optimizer.zero_grad(set_to_none=True)
    loss, _ = phase2_loss(model, batch, objective, sigma_years)
    loss.backward()
    if clip_norm is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    return loss.detach()
