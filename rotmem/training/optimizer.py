"""The one place Phase 2's optimiser is chosen."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from rotmem.errors import BadSettingError

OPTIMIZERS = {"adagrad": torch.optim.Adagrad, "adam": torch.optim.Adam}


def build_optimizer(parameters: Iterable[torch.nn.Parameter], name: str, lr: float) -> torch.optim.Optimizer:
    """``name`` (``"adagrad"``, tkbc's, or ``"adam"``) over ``parameters`` at learning rate ``lr``."""
    if name not in OPTIMIZERS:
        raise BadSettingError(f"unknown optimizer {name!r}; expected one of {sorted(OPTIMIZERS)}")
    return OPTIMIZERS[name](parameters, lr=lr)
