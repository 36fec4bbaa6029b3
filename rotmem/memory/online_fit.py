"""Online Phase 2: train a small temporal KGE on a memory's timed facts (``TemporalMemory.fit``).

The facts arrive as an in-memory ``TemporalKG`` (all in ``train``, each at its ``t_happen`` day);
training is a plain torch loop on the CPU (no Lightning) over the package's own Phase-2 losses
(``rotmem.losses``): ``½(CE_tail + CE_head) + λ·N3 + λ_t·L_time``, negative times from
``rotmem.data.negatives``, gradient-norm clip 1.0, one seeded permutation per epoch. The relation
speeds stay frozen (alpha = 1, or a per-relation table: the "gate" speed source).

``family="tntcomplex"`` trains TNTComplEx instead (a learned embedding per day of the facts' range
in place of RoMem's functional time; ``dim = 2·rank``): the paper's discrete-time ablation. Its
per-day table is kept smooth by ``smoothness_weight`` (tkbc's ``time_reg``).

``history_windows`` / ``pair_windows`` / ``rule_windows`` give either family the history term of the
accuracy work (``rotmem.models.history``: counts of the memory's own facts near the asked day, for
the same triple, for the entity pair, and for the pair per relation, with learned weights; each
training fact leaves itself out of its counts), built over the facts being fitted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from rotmem.data import TemporalKG
from rotmem.data.negatives import SlotDays, negative_times
from rotmem.losses import embedding_regularizer, one_vs_all_loss, time_contrastive_loss
from rotmem.models import RelationSpeed, RoMem, TemporalKGE, TNTComplEx

FAMILIES = ("romem", "tntcomplex")


@dataclass
class FitConfig:
    """Online Phase-2 settings.

    A memory holds a few years of facts, so the default rotation is slow (``init_s = 0.001``
    rad/day: the fastest component turns once in about 17 years) and the model small.
    ``threads``: torch CPU threads during the fit (restored afterwards; None keeps torch's).
    ``history_windows`` / ``pair_windows`` / ``rule_windows``: the history term's windows in days
    (module docs; empty: no history), e.g. ``(1, 3, 7, 30, 90, 365)``, ``(1, 3, 7, 30)`` and
    ``(0, 1, 3, 7, 30)`` as in ``icews05-15-tntcomplex-rules``.
    ``extra``: more constructor arguments of the model.
    """

    dim: int = 64
    k: int = 1
    backbone: str = "chronor"
    family: str = "romem"
    init_scale: float = 0.4
    init_s: float = 0.001
    optimizer: str = "adagrad"
    lr: float = 0.1
    epochs: int = 100
    batch_size: int = 256
    regularizer_weight: float = 0.01
    time_weight: float = 0.5
    smoothness_weight: float = 0.0
    sigma_years: float = 0.5
    num_negative_times: int = 4
    seed: int = 0
    threads: int | None = None
    history_windows: tuple[int, ...] = ()
    pair_windows: tuple[int, ...] = ()
    rule_windows: tuple[int, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


def build(kg: TemporalKG, config: FitConfig, alpha: torch.Tensor | None) -> TemporalKGE:
    """A fresh ``config.family`` model for ``kg``, vocabulary set; ``alpha [R]`` freezes RoMem's speeds."""
    days = kg.train[:, 3]
    tau0 = int(days.min())
    history: dict[str, Any] = {}
    if config.history_windows or config.pair_windows or config.rule_windows:
        history = dict(
            history_windows=list(config.history_windows) or None,
            pair_windows=list(config.pair_windows) or None,
            rule_windows=list(config.rule_windows) or None,
            facts=kg.train,
        )
    if config.family == "tntcomplex":
        num_days = int(days.max()) - tau0 + 1
        # positional: the reference day's keyword is being renamed (first_day -> tau0)
        model = TNTComplEx(
            kg.num_entities,
            kg.num_relations,
            config.dim,
            tau0,
            num_days,
            init_scale=config.init_scale,
            **history,
            **config.extra,
        )
    elif config.family == "romem":
        model = RoMem(
            kg.num_entities,
            kg.num_relations,
            dim=config.dim,
            k=config.k,
            backbone=config.backbone,
            init_scale=config.init_scale,
            tau0=float(tau0),
            init_s=config.init_s,
            **history,
            **config.extra,
        )
        if alpha is not None:  # a frozen per-relation table: the "gate" speed source
            model.speed = RelationSpeed(kg.num_relations, source="gate")
            model.speed.set_speeds(alpha)
            model.config["speed"] = "gate"
    else:
        raise ValueError(f"unknown family {config.family!r} for an online fit; expected one of {FAMILIES}")
    model.set_vocabulary(kg.entities, kg.relations)
    return model


def optimizer_for(model: TemporalKGE, config: FitConfig) -> torch.optim.Optimizer:
    if config.optimizer == "adagrad":
        return torch.optim.Adagrad(model.parameters(), lr=config.lr)
    if config.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=config.lr)
    raise ValueError(f"unknown optimizer {config.optimizer!r}; expected 'adagrad' or 'adam'")


def batch_loss(
    model: TemporalKGE, facts: torch.Tensor, negative_days: torch.Tensor | None, config: FitConfig
):
    """One batch's Phase-2 loss (``Phase2Module``'s 1-vs-all objective, without its logging)."""
    loss = one_vs_all_loss(model, facts)
    loss = loss + config.regularizer_weight * embedding_regularizer(model, facts, "l4", sparse_grad=True)
    if negative_days is not None:
        time = time_contrastive_loss(model, facts, negative_days, config.sigma_years, sparse_grad=True)
        loss = loss + config.time_weight * time
    smoothness = model.time_regularizer()
    if config.smoothness_weight > 0 and smoothness is not None:
        loss = loss + config.smoothness_weight * smoothness
    return loss


def fit_model(
    kg: TemporalKG, config: FitConfig, alpha: torch.Tensor | None = None
) -> tuple[TemporalKGE, float]:
    """Train a model of ``config.family`` on ``kg.train`` for ``config.epochs``; ``alpha [R]`` freezes
    RoMem's relation speeds (None: alpha = 1). Returns the trained model in eval mode (with the KG's
    vocabulary) and the last epoch's mean loss (NaN for zero epochs)."""
    facts = kg.train
    if facts.shape[0] == 0:
        raise ValueError("no facts to fit")
    saved_threads = torch.get_num_threads()
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    try:
        with torch.random.fork_rng():
            torch.manual_seed(config.seed)
            model = build(kg, config, alpha)
            optimizer = optimizer_for(model, config)
            generator = torch.Generator().manual_seed(config.seed)
            timed = config.time_weight > 0 and config.num_negative_times > 0 and config.family == "romem"
            slots = SlotDays(facts, kg.num_relations) if timed else None
            day_range = (int(facts[:, 3].min()), int(facts[:, 3].max()))
            if timed and day_range[1] - day_range[0] < config.num_negative_times:
                timed = False  # the facts span too few days for distinct negative times
            model.train()
            loss_mean = float("nan")
            for _ in range(config.epochs):
                order = torch.randperm(facts.shape[0], generator=generator)
                total, batches = 0.0, 0
                for start in range(0, facts.shape[0], config.batch_size):
                    batch = facts[order[start : start + config.batch_size]]
                    negatives = (
                        negative_times(
                            slots, batch, config.num_negative_times, generator, day_range=day_range
                        )
                        if timed
                        else None
                    )
                    optimizer.zero_grad(set_to_none=True)
                    loss = batch_loss(model, batch, negatives, config)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    total, batches = total + float(loss.detach()), batches + 1
                loss_mean = total / batches
    finally:
        torch.set_num_threads(saved_threads)
    return model.eval(), loss_mean
