"""Loading a trained model (any family) from a training checkpoint or a ``.save`` file."""

from __future__ import annotations

from pathlib import Path

import torch

from rotmem.models.base import TemporalKGE
from rotmem.models.romem import RoMem
from rotmem.models.romem_complex import RoMemComplEx
from rotmem.models.tntcomplex import TNTComplEx

FAMILIES: dict[str, type[TemporalKGE]] = {cls.family: cls for cls in (RoMem, RoMemComplEx, TNTComplEx)}

STATE_PREFIX = "model."  # the LightningModule keeps the RoMem at attribute ``model``


def build_model(family: str, **config) -> TemporalKGE:
    """A new model of ``family`` (``"romem"``, ``"romem-complex"``, ``"tntcomplex"``) from its
    constructor's arguments."""
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; expected one of {sorted(FAMILIES)}")
    return FAMILIES[family](**config)


def load_model(checkpoint_path: str | Path, map_location: str | torch.device = "cpu") -> TemporalKGE:
    """A trained model (``RoMem`` or another family) with its vocabulary, in eval mode."""
    checkpoint = torch.load(checkpoint_path, map_location=map_location, weights_only=False)
    if "rotmem" not in checkpoint:
        raise ValueError(f"{checkpoint_path}: not a rotmem checkpoint (no 'rotmem' entry)")
    payload = checkpoint["rotmem"]
    config = dict(payload["config"])
    model = build_model(config.pop("family", RoMem.family), **config)
    state = checkpoint["state_dict"]
    if any(key.startswith(STATE_PREFIX) for key in state):
        state = {k[len(STATE_PREFIX) :]: v for k, v in state.items() if k.startswith(STATE_PREFIX)}
    model.load_state_dict(state)
    if payload.get("entities") is not None:
        model.set_vocabulary(payload["entities"], payload["relations"])
    return model.eval()
