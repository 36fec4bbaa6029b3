"""Loading a trained RoMem from a training checkpoint or a ``RoMem.save`` file."""

from __future__ import annotations

from pathlib import Path

import torch

from rotmem.models.romem import RoMem

STATE_PREFIX = "model."  # the LightningModule keeps the RoMem at attribute ``model``


def load_model(checkpoint_path: str | Path, map_location: str | torch.device = "cpu") -> RoMem:
    """A trained ``RoMem`` with its vocabulary and reference day tau0, in eval mode."""
    checkpoint = torch.load(checkpoint_path, map_location=map_location, weights_only=False)
    if "rotmem" not in checkpoint:
        raise ValueError(f"{checkpoint_path}: not a rotmem checkpoint (no 'rotmem' entry)")
    payload = checkpoint["rotmem"]
    model = RoMem(**payload["config"])
    state = checkpoint["state_dict"]
    if any(key.startswith(STATE_PREFIX) for key in state):
        state = {k[len(STATE_PREFIX) :]: v for k, v in state.items() if k.startswith(STATE_PREFIX)}
    model.load_state_dict(state)
    if payload.get("entities") is not None:
        model.set_vocabulary(payload["entities"], payload["relations"])
    return model.eval()
