"""Phase 1's loss: the gate's speeds against transitions mined from the training split.

A pair of consecutive observations ``Δt`` days apart changed with probability ``p_change = 1 −
exp(−α_r · s_pre · Δt)`` (exponent clamped to [0, 50]); ``α_r`` comes from the gate, ``s_pre`` (per
day) is learned. Loss: BCE of the ``changed`` labels, each row weighted by the class-balance weight
``N / (2 · N_class)`` times ``log1p(n_obs of its slot)``, normalised by the total weight. Trained by
``lightning_modules.phase1_gate`` (``rotmem gate pretrain``).
"""

from __future__ import annotations

import torch

from rotmem.gate.speed_gate import SemanticSpeedGate

MAX_EXPONENT = 50.0
PROBABILITY_EPS = 1e-6


def row_weights(changed: torch.Tensor, slot_observations: torch.Tensor) -> torch.Tensor:
    """``[P]`` weights: ``N / (2 · N_class)`` of the row's class times ``log1p(n_obs)`` of its slot."""
    n = changed.numel()
    n_changed = int(changed.sum())
    counts = torch.where(changed, torch.tensor(float(n_changed)), torch.tensor(float(n - n_changed)))
    return n / (2.0 * counts) * torch.log1p(slot_observations.double()).float()


def change_probability(alpha: torch.Tensor, scale: torch.Tensor, delta_days: torch.Tensor) -> torch.Tensor:
    """``1 − exp(−clamp(α · s_pre · Δt, 0, 50))``: ``alpha``, ``delta_days`` ``[P]``, ``scale`` per day."""
    exponent = (alpha * scale * delta_days).clamp(0.0, MAX_EXPONENT)
    return -torch.expm1(-exponent)


def weighted_bce(p_change: torch.Tensor, changed: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``Σ w · BCE(changed, p) / Σ w`` with ``p`` clamped to ``[1e-6, 1 − 1e-6]``."""
    p = p_change.clamp(PROBABILITY_EPS, 1.0 - PROBABILITY_EPS)
    y = changed.to(p.dtype)
    bce = -(y * torch.log(p) + (1.0 - y) * torch.log1p(-p))
    return (weights * bce).sum() / weights.sum().clamp(min=1e-12)


def gate_loss(gate: SemanticSpeedGate, scale: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The weighted BCE of a batch of transitions (``embeddings [R, D]``, ``relation``,
    ``delta_days``, ``changed``, ``weight`` ``[P]``) under ``gate``'s speeds and ``scale`` (per day)."""
    alpha = gate(batch["embeddings"])  # [R]: each relation's speed once, then gathered
    p_change = change_probability(alpha[batch["relation"]], scale, batch["delta_days"])
    return weighted_bce(p_change, batch["changed"], batch["weight"])
