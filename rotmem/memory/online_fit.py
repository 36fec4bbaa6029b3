"""Online Phase 2: train a small RoMem on a memory's timed facts (``TemporalMemory.fit``).

The facts arrive as an in-memory ``TemporalKG`` (all in ``train``, each at its ``t_happen`` day);
training is ``lightning_modules.phase2.Phase2Module`` on the CPU with the relation speeds frozen
(alpha = 1, or a per-relation table: the "gate" speed source). Lightning is imported here, when a
fit runs, never when ``rotmem.memory`` is imported.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from rotmem.data import TemporalKG
from rotmem.models import RoMem


@dataclass
class FitConfig:
    """Online Phase-2 settings (``Phase2Module`` / ``TemporalKGDataModule`` arguments).

    A memory holds a few years of facts, so the default rotation is slow (``init_s = 0.001``
    rad/day: the fastest component turns once in about 17 years) and the model small.
    """

    dim: int = 64
    k: int = 1
    backbone: str = "chronor"
    init_scale: float = 0.4
    init_s: float = 0.001
    optimizer: str = "adagrad"
    lr: float = 0.1
    epochs: int = 100
    batch_size: int = 256
    regularizer_weight: float = 0.01
    time_weight: float = 0.5
    sigma_years: float = 0.5
    num_negative_times: int = 4
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def fit_romem(kg: TemporalKG, config: FitConfig, alpha: torch.Tensor | None = None) -> tuple[RoMem, float]:
    """Train RoMem on ``kg.train`` for ``config.epochs``; ``alpha [R]`` freezes the relation speeds
    (None: alpha = 1). Returns the trained model (with the KG's vocabulary) and the last epoch's
    mean loss (NaN when Lightning logged none)."""
    try:
        import pytorch_lightning as pl
    except ImportError:
        raise ImportError(
            "TemporalMemory.fit needs Lightning: pip install 'rotmem[train]' (or pytorch-lightning)"
        ) from None
    from lightning_modules.kg_data import TemporalKGDataModule
    from lightning_modules.phase2 import Phase2Module
    from rotmem.models import RelationSpeed

    data = TemporalKGDataModule(
        kg=kg, batch_size=config.batch_size, num_negative_times=config.num_negative_times, seed=config.seed
    )
    with torch.random.fork_rng(), _quiet_lightning():
        torch.manual_seed(config.seed)
        module = Phase2Module(
            kg.num_entities,
            kg.num_relations,
            tau0=data.tau0,
            dim=config.dim,
            k=config.k,
            backbone=config.backbone,
            init_scale=config.init_scale,
            init_s=config.init_s,
            optimizer=config.optimizer,
            lr=config.lr,
            regularizer_weight=config.regularizer_weight,
            time_weight=config.time_weight,
            sigma_years=config.sigma_years,
            **config.extra,
        )
        if alpha is not None:  # a frozen per-relation table: the "gate" speed source
            module.model.speed = RelationSpeed(kg.num_relations, source="gate")
            module.model.speed.set_speeds(alpha)
            module.model.config["speed"] = "gate"
        trainer = pl.Trainer(
            max_epochs=config.epochs,
            accelerator="cpu",
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            num_sanity_val_steps=0,
            gradient_clip_val=1.0,
        )
        trainer.fit(module, datamodule=data)
    loss = trainer.callback_metrics.get("train/loss_epoch")
    return module.model, float("nan") if loss is None else float(loss)


@contextlib.contextmanager
def _quiet_lightning() -> Iterator[None]:
    """Silence Lightning's banner lines and data-loader hints for a short in-process fit."""
    loggers = [logging.getLogger(name) for name in ("pytorch_lightning", "lightning", "lightning.pytorch")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module="pytorch_lightning")
            warnings.filterwarnings("ignore", module="lightning")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
