"""Loading a trained RoMem from a training checkpoint or a ``RoMem.save`` file."""

from __future__ import annotations

from pathlib import Path

import torch

from rotmem.errors import BadCheckpointError, InputFileNotFoundError, describe
from rotmem.models.romem import RoMem

STATE_PREFIX = "model."  # the LightningModule keeps the RoMem at attribute ``model``
# Classes a rotmem checkpoint may hold beyond tensors and plain containers, allowed to unpickle.
# Lightning's checkpoints (hyper-parameters, loop and callback state) and RoMem.save files hold none
# today; a class added to a checkpoint must be listed here, never unpickled freely.
SAFE_GLOBALS: list = []


def load_model(checkpoint_path: str | Path, map_location: str | torch.device = "cpu") -> RoMem:
    """A trained ``RoMem`` with its vocabulary and reference day tau0, in eval mode.

    The file is read with ``torch.load(weights_only=True)``: a checkpoint that would run code when
    unpickled (any class not in ``SAFE_GLOBALS``) is refused with ``BadCheckpointError``, as is a file
    that is not a rotmem checkpoint; a missing file raises ``InputFileNotFoundError``.
    """
    path = Path(checkpoint_path).expanduser()
    if not path.is_file():
        raise InputFileNotFoundError(f"checkpoint {str(checkpoint_path)!r} not found")
    try:
        with torch.serialization.safe_globals(SAFE_GLOBALS):
            checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # noqa: BLE001 - torch raises many kinds for corrupt or unsafe files
        raise BadCheckpointError(f"{path}: not a loadable rotmem checkpoint ({describe(error)})") from None
    if not isinstance(checkpoint, dict) or "rotmem" not in checkpoint or "state_dict" not in checkpoint:
        raise BadCheckpointError(
            f"{path}: not a rotmem checkpoint (no 'rotmem' entry: write one with `rotmem fit` or RoMem.save)"
        )
    payload = checkpoint["rotmem"]
    model = RoMem(**payload["config"])
    state = checkpoint["state_dict"]
    if any(key.startswith(STATE_PREFIX) for key in state):
        state = {k[len(STATE_PREFIX) :]: v for k, v in state.items() if k.startswith(STATE_PREFIX)}
    try:
        model.load_state_dict(state)
    except RuntimeError as error:
        raise BadCheckpointError(f"{path}: weights do not fit its own config ({describe(error)})") from None
    if payload.get("entities") is not None:
        model.set_vocabulary(payload["entities"], payload["relations"])
    return model.eval()
