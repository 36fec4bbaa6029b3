"""The training core: Phase 2's one step and one plain-torch loop, for every model family.

``phase2_loss`` is the objective of a batch (the fit term, then ``rotmem.losses.Objective``'s
terms); ``train_step`` is one optimiser step on it; ``fit`` trains a model on a ``TemporalKG`` for a
``TrainConfig``. ``lightning_modules.phase2.Phase2Module`` and ``TemporalMemory.fit`` both train
through it (docs/training.md, "The training core").
"""

from rotmem.training.config import TrainConfig
from rotmem.training.family import build_family
from rotmem.training.fit import fit
from rotmem.training.loss import LOSSES, phase2_loss
from rotmem.training.optimizer import OPTIMIZERS, build_optimizer
from rotmem.training.step import train_step

__all__ = [
    "LOSSES",
    "OPTIMIZERS",
    "TrainConfig",
    "build_family",
    "build_optimizer",
    "fit",
    "phase2_loss",
    "train_step",
]
