"""Where a relation's rotation speed ``alpha_r`` in (0, 1] comes from."""

from __future__ import annotations

import torch
from torch import nn

SPEED_SOURCES = ("constant", "learned", "gate")


class RelationSpeed(nn.Module):
    """Per-relation speeds ``alpha [R]``.

    - ``"constant"``: alpha = 1 for every relation (the "no gate" ablation).
    - ``"learned"``: alpha = sigmoid(logit), one learnable logit per relation (init alpha = 0.5).
    - ``"gate"``: a frozen table, filled once per run from the Semantic Speed Gate through
      ``set_speeds`` (it is saved in the checkpoint).
    """

    def __init__(self, num_relations: int, source: str = "constant"):
        super().__init__()
        if source not in SPEED_SOURCES:
            raise ValueError(f"unknown speed source {source!r}; expected one of {SPEED_SOURCES}")
        self.source = source
        if source == "learned":
            self.logit = nn.Parameter(torch.zeros(num_relations))
        else:
            self.register_buffer("table", torch.ones(num_relations))
        # "gate": the table holds 1 until set_speeds or a loaded state dict fills it; using it before
        # would silently train or score the "no gate" model
        self.speeds_set = source != "gate"
        self.register_load_state_dict_post_hook(_mark_loaded)

    def set_speeds(self, alpha: torch.Tensor) -> None:
        """Fix the per-relation speeds (``[R]``, values in [0, 1]); only for ``source="gate"``."""
        if self.source != "gate":
            raise ValueError(f"set_speeds needs source='gate', this model uses {self.source!r}")
        if alpha.shape != self.table.shape:
            raise ValueError(f"expected {tuple(self.table.shape)} speeds, got {tuple(alpha.shape)}")
        self.table.copy_(alpha.detach().to(self.table))
        self.speeds_set = True

    def forward(self, r: torch.Tensor) -> torch.Tensor:
        """Speeds of relation ids ``r`` (any shape)."""
        if self.source == "learned":
            return torch.sigmoid(self.logit[r])
        if not self.speeds_set:
            raise RuntimeError(
                "speed='gate' but no speeds were set: call model.speed.set_speeds(alpha) with the gate's "
                "speeds (rotmem.gate.relation_speeds(gate_path, relations)) or load a trained checkpoint; "
                "for alpha = 1 use speed='constant'"
            )
        return self.table[r]


def _mark_loaded(module: RelationSpeed, incompatible_keys) -> None:
    """After ``load_state_dict``: a table that came from a checkpoint holds real speeds."""
    if not incompatible_keys.missing_keys:
        module.speeds_set = True
