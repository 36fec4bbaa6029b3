"""A model family from its spec, ``{"class_path": ..., "init_args": ...}`` as a config writes it,
with the dataset's sizes and days linked in as ``RoMemCLI`` links them."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any

from rotmem.data import TemporalKG
from rotmem.errors import BadSettingError
from rotmem.models import FAMILIES, HistorySpec, TemporalKGE

# the arguments linked from the data, never set in a config
LINKED = ("num_entities", "num_relations", "tau0", "num_days")


def family_class(class_path: str) -> type[TemporalKGE]:
    """The class a spec names: ``rotmem.models.RoMem``, a family's short name (``romem``), or any
    importable ``module.Class`` that is a ``TemporalKGE``."""
    if class_path in FAMILIES:
        return FAMILIES[class_path]
    module, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name) if module else None
    except (ImportError, AttributeError):
        cls = None
    if not (isinstance(cls, type) and issubclass(cls, TemporalKGE)):
        raise BadSettingError(
            f"family: {class_path!r} is not a model family (one of {sorted(FAMILIES)}, or a class path "
            "such as rotmem.models.RoMemComplEx)"
        )
    return cls


def class_path(cls: type[TemporalKGE]) -> str:
    """The import path a config names ``cls`` by: ``rotmem.models.NAME`` when exported there."""
    import rotmem.models

    if getattr(rotmem.models, cls.__name__, None) is cls:
        return f"rotmem.models.{cls.__name__}"
    return f"{cls.__module__}.{cls.__qualname__}"


def linked_arguments(cls: type[TemporalKGE], kg: TemporalKG) -> dict[str, Any]:
    """The arguments ``RoMemCLI`` links from the data (sizes, ``tau0``, ``num_days``) that ``cls`` takes."""
    days = kg.train[:, 3]
    linked = (kg.num_entities, kg.num_relations, float(kg.first_day), int(days.max()) - int(days.min()) + 1)
    accepted = inspect.signature(cls).parameters
    return {name: value for name, value in zip(LINKED, linked, strict=True) if name in accepted}


def build_family(spec: Mapping[str, Any], kg: TemporalKG, history: HistorySpec | None = None) -> TemporalKGE:
    """A fresh model of ``spec`` for ``kg``: its class with ``init_args`` and the linked arguments,
    ``history`` (if any) attached and indexed over ``kg.train``, the vocabulary set."""
    cls = family_class(spec["class_path"])
    try:
        model = cls(**linked_arguments(cls, kg), **dict(spec.get("init_args") or {}))
    except TypeError as error:
        raise BadSettingError(f"family {cls.__name__}: {error}") from None
    if history is not None:
        model.attach_history(history, kg.train)
    model.set_vocabulary(kg.entities, kg.relations)
    return model
