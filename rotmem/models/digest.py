"""A SHA-256 of a model's tensors, stored in its checkpoint and checked on load, so a flipped bit
or a partly copied file is refused instead of evaluating silently to a lower score.

The digest covers every state-dict entry in key order: its name, dtype, shape and bytes (tensors),
or its ``repr`` (extra state such as ``tau0``). It is written as ``checkpoint["rotmem"]["sha256"]``
(``TemporalKGE.save``, ``Phase2Module.on_save_checkpoint``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import torch

DIGEST_KEY = "sha256"


def state_digest(state: Mapping[str, Any]) -> str:
    """The hex SHA-256 of a state dict (``{name: tensor or extra state}``), independent of device."""
    digest = hashlib.sha256()
    for name in sorted(state):
        value = state[name]
        if torch.is_tensor(value):
            flat = value.detach().cpu().contiguous().reshape(-1)
            digest.update(f"{name}|{flat.dtype}|{tuple(value.shape)}\n".encode())
            digest.update(memoryview(flat.view(torch.uint8).numpy()))
        else:
            digest.update(f"{name}|{value!r}\n".encode())
    return digest.hexdigest()
