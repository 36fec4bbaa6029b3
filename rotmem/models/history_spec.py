"""``HistorySpec``: the history term's settings (its windows, ``causal``, ``eval_splits``), the
``history:`` block of a config, built into a ``rotmem.models.history.FactHistory`` for any family
(``TemporalKGE.attach_history``) and saved in a checkpoint's payload to be built again."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

from rotmem.models.history import FactHistory


@dataclass(frozen=True)
class HistorySpec:
    """The arguments of ``FactHistory`` but the sizes and the facts: windows in days (``None`` or
    empty: no such window; at least one kind must be set), ``causal`` and ``eval_splits``."""

    slot_windows: tuple[int, ...] | None = None
    pair_windows: tuple[int, ...] | None = None
    rule_windows: tuple[int, ...] | None = None
    causal: bool = False
    eval_splits: tuple[str, ...] = ("train",)

    def __post_init__(self) -> None:  # lists (a YAML block) as tuples: specs compare and hash alike
        for name in ("slot_windows", "pair_windows", "rule_windows", "eval_splits"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(value))

    def build(self, num_entities: int, num_relations: int, facts: torch.Tensor | None = None) -> FactHistory:
        """The history term for a model of these sizes, indexing ``facts`` when given."""
        return FactHistory(
            num_entities,
            num_relations,
            self.slot_windows,
            self.pair_windows,
            facts,
            self.causal,
            self.eval_splits,
            rule_windows=self.rule_windows,
        )

    def as_dict(self) -> dict[str, Any]:
        """Plain lists and values (a config's block, a checkpoint's payload: no class pickled)."""
        return {
            key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self).items()
        }

    @classmethod
    def of(cls, history: FactHistory) -> HistorySpec:
        """The spec that builds ``history`` again (its windows, ``causal`` and ``eval_splits``)."""
        rules = history.rule_windows.tolist() if history.rule_weight is not None else None
        return cls(
            tuple(history.slot_windows.tolist()) or None,
            tuple(history.pair_windows.tolist()) or None,
            tuple(rules) if rules else None,
            history.causal,
            tuple(history.eval_splits),
        )
