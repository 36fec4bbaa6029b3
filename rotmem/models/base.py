"""What every temporal KG embedding family shares: 1-vs-all scoring through queries, names, saving.

A family builds, for a query ``(h, r, ?, tau)``, a vector ``q [2n]`` (split-halves layout) whose
inner product with an entity row is that entity's score: ``f(h, r, t | tau) = <q_tail, e_t>``, and
likewise ``q_head`` for ``(?, r, t, tau)``. So the fused 1-vs-all cross-entropy, the evaluator and
the inner-product index serve every family through the raw ``entity [N, 2n]`` table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from rotmem import ops


def as_days(tau: torch.Tensor | float, like: torch.Tensor) -> torch.Tensor:
    """``tau`` (days since 1970-01-01) as a float64 tensor on ``like``'s device, shaped as ``like``."""
    tau = torch.as_tensor(tau, dtype=torch.float64, device=like.device)
    return tau.expand(like.shape) if tau.dim() == 0 else tau


class TemporalKGE(nn.Module):
    """Base class of the model families. Subclasses set ``family``, ``config`` (the constructor's
    arguments), the ``entity [N, 2n]`` table, and implement ``_query``, ``score`` and
    ``regularizer``; ``time_regularizer`` is for families with per-day tables."""

    family: str = ""
    config: dict[str, Any]
    entity: nn.Parameter

    def __init__(self) -> None:
        super().__init__()
        self.entities: list[str] | None = None
        self.relations: list[str] | None = None

    @property
    def num_entities(self) -> int:
        return self.entity.shape[0]

    @property
    def num_relations(self) -> int:
        return int(self.config["num_relations"])

    # --- queries ----------------------------------------------------------------------------
    def _query(
        self, e: torch.Tensor, r: torch.Tensor, tau: torch.Tensor, head: torch.Tensor, sparse_grad: bool
    ) -> torch.Tensor:
        """Queries ``[B, 2n]`` from entity ids ``e``, relation ids ``r``, days ``tau [B]`` (float64),
        and ``head [B]`` (bool): True where ``e`` is the known tail and the query asks for the head."""
        raise NotImplementedError

    def query_tails(self, h: torch.Tensor, r: torch.Tensor, tau: torch.Tensor | float) -> torch.Tensor:
        """``q_tail [B, 2n]`` with ``f(h, r, t | tau) = <q_tail, e_t>``."""
        return self._query(h, r, as_days(tau, r), torch.zeros_like(r, dtype=torch.bool), False)

    def query_heads(self, r: torch.Tensor, t: torch.Tensor, tau: torch.Tensor | float) -> torch.Tensor:
        """``q_head [B, 2n]`` with ``f(h, r, t | tau) = <q_head, e_h>``."""
        return self._query(t, r, as_days(tau, r), torch.ones_like(r, dtype=torch.bool), False)

    def query_tails_and_heads(
        self,
        h: torch.Tensor,
        r: torch.Tensor,
        t: torch.Tensor,
        tau: torch.Tensor | float,
        sparse_grad: bool = False,
    ) -> torch.Tensor:
        """``cat([query_tails(h, r, tau), query_heads(r, t, tau)])``: ``[2B, 2n]`` in one call (one
        gather and, in training, one gradient scatter into the tables instead of two).

        ``sparse_grad``: the entity table's gradient is sparse, for a loss that also gives the
        table a dense gradient (``rotmem.ops.table_grad``).
        """
        days = as_days(tau, r)
        head = torch.cat([torch.zeros_like(r, dtype=torch.bool), torch.ones_like(r, dtype=torch.bool)])
        return self._query(torch.cat([h, t]), torch.cat([r, r]), torch.cat([days, days]), head, sparse_grad)

    # --- scores -----------------------------------------------------------------------------
    def score(
        self,
        h: torch.Tensor,
        r: torch.Tensor,
        t: torch.Tensor,
        tau: torch.Tensor | float,
        sparse_grad: bool = False,
    ) -> torch.Tensor:
        """Scores ``f(h, r, t | tau)``: ``[B]`` for ``tau [B]``, or ``[B, J]`` for ``tau [B, J]``."""
        raise NotImplementedError

    def forward(
        self, h: torch.Tensor, r: torch.Tensor, t: torch.Tensor, tau: torch.Tensor | float
    ) -> torch.Tensor:
        """``score(h, r, t, tau)``."""
        return self.score(h, r, t, tau)

    def score_tails(self, h: torch.Tensor, r: torch.Tensor, tau: torch.Tensor | float) -> torch.Tensor:
        """Scores ``[B, N]`` of every entity as the tail of ``(h, r, ?, tau)``."""
        return ops.score_all(self.query_tails(h, r, tau), self.entity)

    def score_heads(self, r: torch.Tensor, t: torch.Tensor, tau: torch.Tensor | float) -> torch.Tensor:
        """Scores ``[B, N]`` of every entity as the head of ``(?, r, t, tau)``."""
        return ops.score_all(self.query_heads(r, t, tau), self.entity)

    # --- regularisers -----------------------------------------------------------------------
    def regularizer(self, facts: torch.Tensor, kind: str, sparse_grad: bool = False) -> torch.Tensor:
        """The family's embedding regulariser over the rows a batch ``facts [B, 4]`` uses, divided by
        the batch size (``kind``: ``"l4"`` or ``"modulus3"``, see ``rotmem.ops.n3``)."""
        raise NotImplementedError

    def time_regularizer(self) -> torch.Tensor | None:
        """A smoothness penalty over per-day tables, or None for a family without them."""
        return None

    # --- vocabulary -------------------------------------------------------------------------
    def set_vocabulary(self, entities: Sequence[str], relations: Sequence[str]) -> None:
        """Attach id -> string lists so queries can use names."""
        if len(entities) != self.num_entities or len(relations) != self.num_relations:
            raise ValueError("vocabulary sizes do not match the model's tables")
        self.entities, self.relations = list(entities), list(relations)
        self._entity_ids = {e: i for i, e in enumerate(self.entities)}
        self._relation_ids = {r: i for i, r in enumerate(self.relations)}

    def entity_ids(self, names: Sequence[str]) -> torch.Tensor:
        """Ids of entity strings; a KeyError names every unknown one."""
        return self._ids(names, ("entity", "entities"), getattr(self, "_entity_ids", None))

    def relation_ids(self, names: Sequence[str]) -> torch.Tensor:
        """Ids of relation strings; a KeyError names every unknown one."""
        return self._ids(names, ("relation", "relations"), getattr(self, "_relation_ids", None))

    def _ids(self, names: Sequence[str], kind: tuple[str, str], table: dict[str, int] | None) -> torch.Tensor:
        if table is None:
            raise RuntimeError("this model has no vocabulary; load it with rotmem.load_model")
        unknown = [name for name in names if name not in table]
        if unknown:
            raise KeyError(f"unknown {kind[len(unknown) > 1]}: {unknown}")
        return torch.tensor([table[name] for name in names], device=self.entity.device)

    # --- persistence ------------------------------------------------------------------------
    def checkpoint_payload(self) -> dict[str, Any]:
        """What ``rotmem.load_model`` needs besides the state dict."""
        config = {"family": self.family, **self.config}
        return {"config": config, "entities": self.entities, "relations": self.relations}

    def save(self, path: str) -> None:
        """Save weights, configuration and vocabulary (readable by ``rotmem.load_model``)."""
        torch.save({"rotmem": self.checkpoint_payload(), "state_dict": self.state_dict()}, path)
