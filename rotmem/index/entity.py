"""Temporal entity search with RoMem's query-side unrotation over one static index.

``f(h, r, t | τ) = ⟨q_tail(h, r, τ), e_t⟩`` with the raw entity table ``E`` (ROMEM.md, "Unrotation
trick"): the time lives in the query only, so one index over ``E`` answers every query time and is
never rebuilt. Build the index after training: it holds a float32 copy of ``model.entity``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rotmem.index.base import InnerProductIndex
from rotmem.index.factory import make_index
from rotmem.models import RoMem

IdsArg = int | str | Sequence[int] | Sequence[str] | torch.Tensor
TimeArg = float | Sequence[float] | torch.Tensor


class EntityIndex:
    """An inner-product index over ``model.entity`` (ids = entity ids) plus the model's queries.

    ``search_tails(h, r, tau, k)`` answers ``(h, r, ?, τ)``; ``search_heads(r, t, tau, k)`` answers
    ``(?, r, t, τ)``. Both return ``(scores [B, k], entity_ids [B, k])`` torch tensors, best
    first, equal to ``torch.topk(model.score_tails(h, r, tau), k)`` up to float32 rounding.
    Entities and relations are ids (ints, lists, LongTensors) or, for a model with a vocabulary,
    strings; ``tau`` is days since 1970-01-01 (a float, or one per query).
    """

    def __init__(self, model: RoMem, index: InnerProductIndex):
        if len(index) != model.num_entities or index.dim != model.entity.shape[1]:
            raise ValueError(
                f"index holds {len(index)} vectors of width {index.dim}; the model has "
                f"{model.num_entities} entities of width {model.entity.shape[1]}"
            )
        self.model, self.index = model, index

    @classmethod
    def from_model(
        cls,
        model: RoMem,
        backend: str = "auto",
        kind: str = "flat",
        device: str | torch.device | None = None,
        **options: Any,
    ) -> EntityIndex:
        """Index ``model.entity`` (float32, ids 0…N-1) on ``device`` (default: the model's)."""
        table = model.entity.detach().to(torch.float32)
        device = table.device if device is None else device
        index = make_index(table.shape[1], backend=backend, kind=kind, device=device, **options)
        index.add(torch.arange(table.shape[0]), table)
        return cls(model, index)

    def search_tails(self, h: IdsArg, r: IdsArg, tau: TimeArg, k: int = 10) -> tuple[Any, Any]:
        """Top-``k`` tails of ``(h, r, ?, τ)``: ``(scores [B, k], ids [B, k])``."""
        h_ids, r_ids = self._ids(h, "entity"), self._ids(r, "relation")
        with torch.no_grad():
            q = self.model.query_tails(h_ids, r_ids, self._times(tau))
        return self.index.search(q.to(torch.float32), k)

    def search_heads(self, r: IdsArg, t: IdsArg, tau: TimeArg, k: int = 10) -> tuple[Any, Any]:
        """Top-``k`` heads of ``(?, r, t, τ)``: ``(scores [B, k], ids [B, k])``."""
        r_ids, t_ids = self._ids(r, "relation"), self._ids(t, "entity")
        with torch.no_grad():
            q = self.model.query_heads(r_ids, t_ids, self._times(tau))
        return self.index.search(q.to(torch.float32), k)

    def _ids(self, values: IdsArg, kind: str) -> torch.Tensor:
        device = self.model.entity.device
        if isinstance(values, str):
            values = [values]
        if isinstance(values, Sequence) and values and isinstance(values[0], str):
            lookup = self.model.entity_ids if kind == "entity" else self.model.relation_ids
            return lookup(list(values)).to(device)
        ids = torch.as_tensor(values, dtype=torch.int64, device=device)
        return ids.reshape(1) if ids.dim() == 0 else ids

    def _times(self, tau: TimeArg) -> torch.Tensor | float:
        if isinstance(tau, int | float):
            return float(tau)
        return torch.as_tensor(tau, dtype=torch.float64, device=self.model.entity.device)
