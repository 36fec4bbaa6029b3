"""Loading a trained model (any family) from a training checkpoint or a ``.save`` file."""

from __future__ import annotations

from pathlib import Path

import torch

from rotmem.errors import BadCheckpointError, InputFileNotFoundError, describe
from rotmem.models.base import TemporalKGE
from rotmem.models.digest import DIGEST_KEY, state_digest
from rotmem.models.history_spec import HistorySpec
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
    checkpoint = read_checkpoint(path, map_location)
    payload, state = checkpoint["rotmem"], checkpoint["state_dict"]
    config = dict(payload["config"])
    try:
        model = build_model(config.pop("family", RoMem.family), **config)
        if payload.get("history"):  # its windows: the indexed facts come with the state dict
            model.attach_history(HistorySpec(**payload["history"]))
    except (TypeError, ValueError) as error:  # a family or argument this version does not know
        raise BadCheckpointError(f"{path}: cannot build its model ({describe(error)})") from None
    state = model_state(state)
    try:
        model.load_state_dict(state)
    except RuntimeError as error:
        raise BadCheckpointError(f"{path}: weights do not fit its own config ({describe(error)})") from None
    if payload.get("entities") is not None:
        try:
            model.set_vocabulary(payload["entities"], payload["relations"])
        except ValueError as error:
            raise BadCheckpointError(f"{path}: {error}") from None
    return model.eval()


def read_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict:
    """A rotmem checkpoint's contents, read with ``torch.load(weights_only=True)`` and checked:
    ``InputFileNotFoundError`` for a missing file, ``BadCheckpointError`` for one that would run code
    when unpickled, is not a rotmem checkpoint (``check_layout``) or whose tensors do not match
    their stored SHA-256 (``check_digest``)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise InputFileNotFoundError(f"checkpoint {str(path)!r} not found")
    try:
        with torch.serialization.safe_globals(SAFE_GLOBALS):
            checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # noqa: BLE001 - torch raises many kinds for corrupt or unsafe files
        raise BadCheckpointError(f"{path}: not a loadable rotmem checkpoint ({describe(error)})") from None
    if not isinstance(checkpoint, dict) or "rotmem" not in checkpoint or "state_dict" not in checkpoint:
        raise BadCheckpointError(
            f"{path}: not a rotmem checkpoint (no 'rotmem' entry: write one with `rotmem fit` or RoMem.save)"
        )
    check_layout(path, checkpoint["rotmem"], checkpoint["state_dict"])
    check_digest(path, checkpoint["rotmem"], model_state(checkpoint["state_dict"]))
    return checkpoint


def model_state(state: dict) -> dict:
    """The model's own entries of a state dict: a LightningModule's ``model.*`` without the prefix,
    or a ``.save`` file's as they are."""
    if any(key.startswith(STATE_PREFIX) for key in state):
        return {k[len(STATE_PREFIX) :]: v for k, v in state.items() if k.startswith(STATE_PREFIX)}
    return state


def check_layout(path: Path, payload: object, state: object) -> None:
    """``BadCheckpointError`` for a checkpoint whose ``rotmem`` entry or state dict has the wrong
    shape: what weights-only loading lets through (a string for ``rotmem``, no ``config``, a
    vocabulary that is not two lists of strings)."""
    where = f"{path}: not a rotmem checkpoint"
    if not isinstance(payload, dict):
        raise BadCheckpointError(f"{where} (its 'rotmem' entry is a {type(payload).__name__}, not a dict)")
    if not isinstance(payload.get("config"), dict):
        raise BadCheckpointError(f"{where} (its 'rotmem' entry has no 'config' dict)")
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise BadCheckpointError(f"{where} (its 'state_dict' is not a dict of named tensors)")
    for kind in ("entities", "relations"):
        names = payload.get(kind)
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise BadCheckpointError(f"{where} (its {kind} are not a list of strings)")
    if (payload.get("entities") is None) != (payload.get("relations") is None):
        raise BadCheckpointError(f"{where} (it has entity names but no relation names, or the reverse)")


def check_digest(path: Path | str, payload: dict, state: dict) -> None:
    """``BadCheckpointError`` when the tensors do not match the SHA-256 stored at save time (a
    checkpoint written before digests were stored has none and is not checked)."""
    stored = payload.get(DIGEST_KEY)
    if stored is not None and stored != state_digest(state):
        raise BadCheckpointError(
            f"{path}: its tensors do not match the SHA-256 stored when it was saved (the file is "
            "corrupt: a flipped bit or a partial copy); restore it from a good copy or retrain"
        )
