"""Online Phase 2: train a small temporal KGE on a memory's timed facts (``TemporalMemory.fit``).

The facts arrive as an in-memory ``TemporalKG`` (all in ``train``, each at its ``t_happen`` day) and
train through the training core (``rotmem.training.fit``: a plain torch loop, no Lightning), any
model family. ``FitConfig`` gives a ``TrainConfig`` with a memory's defaults: a memory holds a few
years of facts, so RoMem's rotation starts slow (``init_s = 0.001`` rad/day: the fastest component
turns once in about 17 years) and the model is small. The relation speeds stay frozen (alpha = 1,
or a per-relation table: the "gate" speed source). ``knowledge_graph`` builds that graph from the
timed facts; ``relation_speeds`` reads the speeds a memory was given.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from rotmem.data import TemporalKG
from rotmem.errors import BadSettingError
from rotmem.losses import Objective
from rotmem.memory.temporal.records import TemporalFact
from rotmem.models import HistorySpec, RelationSpeed, TemporalKGE
from rotmem.training import TrainConfig, build_family, fit
from rotmem.training.family import LINKED, class_path, family_class

# a memory's defaults for each family, beside the family's own
DEFAULTS: dict[str, dict[str, Any]] = {
    "romem": dict(dim=64, k=1, init_scale=0.4, init_s=0.001),
    "romem-complex": dict(dim=64, init_s=0.001),
    "tntcomplex": dict(dim=64, init_scale=0.4),
}
# the discrete-time ablation trains without the time term, as it always has online
OBJECTIVES = {"tntcomplex": Objective(time_weight=0.0)}
LOOP_SETTINGS = {f.name for f in dataclasses.fields(TrainConfig)} - {"family", "history", "objective"}
OBJECTIVE_SETTINGS = {f.name for f in dataclasses.fields(Objective)}
NOT_FAMILY_SETTINGS = LINKED


def FitConfig(
    family: str = "romem", history: HistorySpec | Mapping[str, Any] | None = None, **settings: Any
) -> TrainConfig:
    """A ``TrainConfig`` for ``TemporalMemory.fit``: ``family`` (``romem``, ``romem-complex`` or
    ``tntcomplex``, or a class path) with a memory's defaults, then ``settings``: the loop's
    (``epochs``, ``lr``, ``batch_size``, ``seed``, ``threads``, ...: ``TrainConfig``'s), the objective's
    weights (``regularizer_weight``, ``time_weight``, ``smoothness_weight``) and the family's own
    arguments (``dim``, ``init_s``, ...); ``history``: the history term (a ``HistorySpec`` or its
    dict, a config's ``history:`` block; None: none). An unknown setting is a ``BadSettingError``
    naming what the family takes."""
    cls = family_class(family)
    accepted = [name for name in inspect.signature(cls).parameters if name not in NOT_FAMILY_SETTINGS]
    unknown = sorted(set(settings) - LOOP_SETTINGS - OBJECTIVE_SETTINGS - set(accepted))
    if unknown:
        raise BadSettingError(
            f"FitConfig: unknown setting {unknown[0]!r} for {cls.__name__}; the loop takes "
            f"{sorted(LOOP_SETTINGS)}, the objective {sorted(OBJECTIVE_SETTINGS)}, the family {accepted}"
        )
    init_args = DEFAULTS.get(cls.family, {}) | {k: v for k, v in settings.items() if k in accepted}
    if isinstance(history, Mapping):
        history = HistorySpec(**history)
    objective = dataclasses.replace(
        OBJECTIVES.get(cls.family, Objective()),
        **{k: v for k, v in settings.items() if k in OBJECTIVE_SETTINGS},
    )
    return TrainConfig(
        family={"class_path": class_path(cls), "init_args": init_args},
        history=history,
        objective=objective,
        **{k: v for k, v in settings.items() if k in LOOP_SETTINGS},
    )


def fit_model(
    kg: TemporalKG, config: TrainConfig, alpha: torch.Tensor | None = None
) -> tuple[TemporalKGE, float]:
    """Train a fresh model of ``config.family`` on ``kg.train`` (``rotmem.training.fit``), seeded by
    ``config.seed``; ``alpha [R]`` freezes the relation speeds of a family that has them (None:
    alpha = 1). Returns the model in eval mode (with the KG's vocabulary) and the last epoch's mean
    loss (NaN for zero epochs)."""
    if kg.train.shape[0] == 0:
        raise ValueError("no facts to fit")
    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        model = build_family(config.family, kg, config.history)
        if alpha is not None and isinstance(getattr(model, "speed", None), RelationSpeed):
            model.speed = RelationSpeed(kg.num_relations, source="gate")  # frozen: the gate's table
            model.speed.set_speeds(alpha)
            model.config["speed"] = "gate"
        history = fit(model, kg, config)
    return model, history[-1] if history else float("nan")


def knowledge_graph(facts: Sequence[TemporalFact]) -> TemporalKG:
    """``facts`` as a ``TemporalKG`` (all in ``train``, each at ``floor(t_happen)``)."""
    if not facts:
        raise ValueError("the memory holds no facts to fit")
    entities = sorted({f.head for f in facts} | {f.tail for f in facts})
    relations = sorted({f.relation for f in facts})
    ent = {e: i for i, e in enumerate(entities)}
    rel = {r: i for i, r in enumerate(relations)}
    train = torch.tensor(
        [[ent[f.head], rel[f.relation], ent[f.tail], math.floor(f.t_happen)] for f in facts],
        dtype=torch.int64,
    )
    empty = torch.zeros(0, 4, dtype=torch.int64)
    return TemporalKG("temporal-memory", entities, relations, train, empty, empty)


def relation_speeds(
    speeds: Mapping[str, float] | str | Path | None, relations: Sequence[str]
) -> torch.Tensor | None:
    """``alpha [R]`` for ``relations``: None for ``speeds=None`` (the constant alpha = 1); from a
    mapping relation -> alpha in [0, 1] (missing relations get 1); or from the path of a saved
    Semantic Speed Gate (``rotmem.gate.relation_speeds``)."""
    if speeds is None:
        return None
    if isinstance(speeds, Mapping):
        bad = {r: a for r, a in speeds.items() if not 0.0 <= float(a) <= 1.0}
        if bad:
            raise ValueError(f"relation speeds must be in [0, 1], got {bad}")
        return torch.tensor([float(speeds.get(r, 1.0)) for r in relations])
    from rotmem.gate import relation_speeds as gate_speeds

    return gate_speeds(speeds, list(relations))
