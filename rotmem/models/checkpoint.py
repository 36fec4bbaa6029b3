"""Loading a trained model (any family) from a training checkpoint or a ``.save`` file."""

from __future__ import annotations

from pathlib import Path

import torch

from rotmem.errors import BadCheckpointError, InputFileNotFoundError, describe
from rotmem.models.base import TemporalKGE
from rotmem.models.romem import RoMem
from rotmem.models.romem_complex import RoMemComplEx
from rotmem.models.tntcomplex import TNTComplEx

FAMILIES: dict[str, type[TemporalKGE]] = {cls.family: cls for cls in (RoMem, RoMemComplEx, TNTComplEx)}

STATE_PREFIX = "model."  # the LightningModule keeps the RoMem at attribute ``model``
# Classes a rotmem checkpoint may hold beyond tensors and plain containers, allowed to unpickle.
# Lightning's checkpoints (hyper-parameters, loop and callback state) and RoMem.save files hold none
# today; a class added to a checkpoint must be listed here, never unpickled freely.
SAFE_GLOBALS: list = []


def build_model(family: str, **config) -> TemporalKGE:
    """A new model of ``family`` (``"romem"``, ``"romem-complex"``, ``"tntcomplex"``) from its
    constructor's arguments."""
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; expected one of {sorted(FAMILIES)}")
    return FAMILIES[family](**config)


def load_model(checkpoint_path: str | Path, map_location: str | torch.device = "cpu") -> TemporalKGE:
    """A trained model (``RoMem`` or another family) with its vocabulary, in eval mode.

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
    config = dict(payload["config"])
    try:
        model = build_model(config.pop("family", RoMem.family), **config)
    except (TypeError, ValueError) as error:  # a family or argument this version does not know
        raise BadCheckpointError(f"{path}: cannot build its model ({describe(error)})") from None
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
