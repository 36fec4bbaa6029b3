"""rotmem: GPU-accelerated training and scoring kernels for RoMem temporal KG memory.

The names below are imported when first used (PEP 562), so ``import rotmem`` loads no model, no
memory store and no optional extra: ``rotmem.RoMemComplEx`` imports ``rotmem.models``,
``rotmem.TEMStore`` imports ``rotmem.memory``.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "TemporalKG": "rotmem.data",
    "load_dataset": "rotmem.data",
    "evaluate": "rotmem.evaluation",
    "SemanticSpeedGate": "rotmem.gate",
    "RoMem": "rotmem.models",
    "RoMemComplEx": "rotmem.models",
    "TNTComplEx": "rotmem.models",
    "load_model": "rotmem.models",
    "TEMStore": "rotmem.memory",
    "TemporalMemory": "rotmem.memory",
    "FitConfig": "rotmem.memory",
    "TrainConfig": "rotmem.training",
    "HashingEncoder": "rotmem.memory",
    "SentenceEncoder": "rotmem.memory",
    "RelationWeights": "rotmem.memory",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """``rotmem.NAME`` for a name of ``__all__``: imported from its module on first use, then cached."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rotmem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
