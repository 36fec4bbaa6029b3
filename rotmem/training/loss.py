"""Phase 2's objective of one batch: the fit term, then ``Objective``'s terms around it."""

from __future__ import annotations

import torch

from rotmem.losses import Objective, one_vs_all_loss, self_adversarial_loss
from rotmem.models import TemporalKGE

LOSSES = ("1vsall", "self_adversarial")


def phase2_loss(
    model: TemporalKGE,
    batch: dict[str, torch.Tensor],
    objective: Objective,
    sigma_years: float,
    loss: str = "1vsall",
    temperature: float = 1.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``(total, parts)``: ``fit + λ·reg + λ_t·time + λ_s·smoothness`` over ``batch`` (``facts [B, 4]``;
    ``negative_days [B, J]`` for the time term; ``negative_tails`` / ``negative_heads [B, K]`` for
    ``loss="self_adversarial"``; ``history_counts``, the history's counts made with the batch,
    ``FactHistory.training_counts``: without them the step counts, which on a GPU waits for it),
    and its terms by name (``"fit"``, ``"reg"``, ``"time"``, ...).

    Both fit losses give the entity table a dense gradient; the other terms' rows add theirs sparse,
    made after the fit loss (``rotmem.losses.one_vs_all_loss`` says why the order matters).
    """
    facts = batch["facts"]
    if loss == "1vsall":
        fit = one_vs_all_loss(model, facts, batch.get("history_counts"))
    elif loss == "self_adversarial":
        fit = self_adversarial_loss(
            model, facts, batch["negative_tails"], batch["negative_heads"], temperature
        )
    else:
        raise ValueError(f"unknown loss {loss!r}; expected one of {LOSSES}")
    parts = {"fit": fit}
    parts |= objective.batch_terms(model, facts, batch.get("negative_days"), sigma_years, sparse_grad=True)
    parts |= objective.model_terms(model)
    return objective.total(parts), parts
