"""``TrainConfig``: what one Phase-2 training run is, in one place."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rotmem.errors import BadSettingError
from rotmem.losses import Objective
from rotmem.models import HistorySpec
from rotmem.training.optimizer import OPTIMIZERS


@dataclass(frozen=True)
class TrainConfig:
    """A Phase-2 run: the model family, the objective, the optimiser and the loop.

    ``family``: ``{"class_path": "rotmem.models.RoMemComplEx", "init_args": {"dim": 64, ...}}``, as
    a config's ``model.family`` writes it (``rotmem.training.build_family`` links the data's sizes,
    ``tau0`` and ``num_days``). ``history``: the history term attached to it (``HistorySpec``, a
    config's ``model.history``; None: none). ``objective``: the weights of the regularisers around
    the fit term.
    ``sigma_years``: the time term's width; ``num_negative_times``: its negative days per fact.
    ``clip_norm``: the gradients' total norm is clipped to it (None: not clipped). ``threads``: torch
    CPU threads while training (restored afterwards; None keeps torch's).
    """

    family: dict[str, Any] = field(default_factory=lambda: {"class_path": "rotmem.models.RoMem"})
    history: HistorySpec | None = None
    objective: Objective = field(default_factory=Objective)
    optimizer: str = "adagrad"
    lr: float = 0.1
    epochs: int = 100
    batch_size: int = 256
    seed: int = 0
    sigma_years: float = 0.5
    num_negative_times: int = 4
    clip_norm: float | None = 1.0
    threads: int | None = None

    def __post_init__(self) -> None:
        if "class_path" not in self.family:
            raise BadSettingError(f"family: needs a class_path, got {self.family!r}")
        if self.optimizer not in OPTIMIZERS:
            raise BadSettingError(
                f"optimizer: unknown {self.optimizer!r}; expected one of {sorted(OPTIMIZERS)}"
            )
        if not self.lr > 0 or not self.sigma_years > 0:
            raise BadSettingError(
                f"lr and sigma_years must be positive, got {self.lr} and {self.sigma_years}"
            )
        if self.epochs < 0 or self.batch_size < 1 or self.num_negative_times < 0:
            raise BadSettingError(
                f"epochs and num_negative_times must be >= 0 and batch_size >= 1, got {self.epochs}, "
                f"{self.num_negative_times} and {self.batch_size}"
            )
