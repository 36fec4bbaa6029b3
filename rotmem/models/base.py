"""What every temporal KG embedding family shares: 1-vs-all scoring through queries, names, saving.

A family builds, for a query ``(h, r, ?, tau)``, a vector ``q [2n]`` (split-halves layout) whose
inner product with an entity row is that entity's score: ``f(h, r, t | tau) = <q_tail, e_t>``, and
likewise ``q_head`` for ``(?, r, t, tau)``. So the fused 1-vs-all cross-entropy, the evaluator and
the inner-product index serve every family through the raw ``entity [N, 2n]`` table.

Any family may be given a history term (``attach_history``: a ``rotmem.models.history.FactHistory``,
counts of the known facts near the asked day, or the ``HistorySpec`` that builds one): a sparse
bias on top of the embedding score, ``f = <q, e> + H(h, r, t, τ)``,
which this class adds in ``score``, ``score_tails`` and ``score_heads`` and the 1-vs-all loss reads
from ``history_bias``.
A family's own score is ``embedding_score``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from rotmem import ops
from rotmem.errors import UnknownNameError
from rotmem.models.digest import DIGEST_KEY, state_digest
from rotmem.models.history import FactHistory, HistoryCounts
from rotmem.models.history_spec import HistorySpec


def both_directions(facts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch ``facts [B, 4]`` ``(h, r, t, day)`` as its ``2B`` queries, tail queries then head
    queries: ``(known entity [2B], relation [2B], day [2B] float64, head [2B] bool)``; the answers
    are ``cat([t, h])``."""
    h, r, t, day = facts.unbind(1)
    return torch.cat([h, t]), torch.cat([r, r]), torch.cat([day, day]).double(), head_flags(r)


def head_flags(r: torch.Tensor) -> torch.Tensor:
    """``[2B]`` bool for ``B`` tail queries followed by their ``B`` head queries: False, then True."""
    return torch.cat([torch.zeros_like(r, dtype=torch.bool), torch.ones_like(r, dtype=torch.bool)])


def as_days(tau: torch.Tensor | float, like: torch.Tensor) -> torch.Tensor:
    """``tau`` (days since 1970-01-01) as a float64 tensor on ``like``'s device, shaped as ``like``."""
    tau = torch.as_tensor(tau, dtype=torch.float64, device=like.device)
    return tau.expand(like.shape) if tau.dim() == 0 else tau


class TemporalKGE(nn.Module):
    """Base class of the model families. Subclasses set ``family``, ``config`` (the constructor's
    arguments) and the ``entity [N, 2n]`` table, and implement ``_query``, ``embedding_score`` and
    ``regularizer``; ``time_regularizer`` is for families with per-day tables."""

    family: str = ""
    config: dict[str, Any]
    entity: nn.Parameter

    def __init__(self) -> None:
        super().__init__()
        self.entities: list[str] | None = None
        self.relations: list[str] | None = None
        self.history: FactHistory | None = None

    def attach_history(
        self, history: HistorySpec | FactHistory, facts: torch.Tensor | None = None
    ) -> TemporalKGE:
        """Give this model the history term ``history`` (a ``FactHistory`` of its sizes, or a
        ``HistorySpec`` built here, indexing ``facts``, the training split, when given: else at
        training setup, or from a checkpoint), moved to the model's device and float type. Returns
        the model."""
        if isinstance(history, HistorySpec):
            history = history.build(self.num_entities, self.num_relations, facts)
        elif facts is not None:
            history.index(facts)
        if (history.num_entities, history.num_relations) != (self.num_entities, self.num_relations):
            raise ValueError(
                f"a history of {history.num_entities} entities and {history.num_relations} relations "
                f"does not fit the model's {self.num_entities} and {self.num_relations}"
            )
        self.history = history.to(self.entity.device, self.entity.dtype)
        return self

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
        return self._query(
            torch.cat([h, t]), torch.cat([r, r]), torch.cat([days, days]), head_flags(r), sparse_grad
        )

    # --- scores -----------------------------------------------------------------------------
    def embedding_score(
        self,
        h: torch.Tensor,
        r: torch.Tensor,
        t: torch.Tensor,
        tau: torch.Tensor,
        sparse_grad: bool = False,
    ) -> torch.Tensor:
        """The family's own score (no history term) for days ``tau`` (float64, ``[B]`` or
        ``[B, J]``): ``[B]`` or ``[B, J]``."""
        raise NotImplementedError

    def history_bias(
        self,
        e: torch.Tensor,
        r: torch.Tensor,
        tau: torch.Tensor,
        head: torch.Tensor,
        exclude: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """The history term for queries ``(e, r, ?, tau)`` (``head`` True where ``e`` is the known
        tail) as sparse ``(rows [P], answers [P], bias [P])``, or None without a history.
        ``exclude [Q]``: each query's own answer, left out of its counts (training)."""
        if self.history is None:
            return None
        return self.history.bias(e, r + head.long() * self.num_relations, tau, exclude)

    def training_history_counts(self, facts: torch.Tensor) -> HistoryCounts | None:
        """``FactHistory.training_counts(facts)``, or None without a history."""
        return None if self.history is None else self.history.training_counts(facts)

    def score(
        self,
        h: torch.Tensor,
        r: torch.Tensor,
        t: torch.Tensor,
        tau: torch.Tensor | float,
        sparse_grad: bool = False,
    ) -> torch.Tensor:
        """Scores ``f(h, r, t | tau)``, history included: ``[B]`` for ``tau [B]``, or ``[B, J]`` for
        ``tau [B, J]``."""
        tau = as_days(tau, r)
        scores = self.embedding_score(h, r, t, tau, sparse_grad)
        if self.history is None:
            return scores
        if tau.dim() == r.dim() + 1:  # several times per fact
            h, r, t = (x.unsqueeze(-1).expand(tau.shape) for x in (h, r, t))
        flat_h, flat_r, flat_t = h.reshape(-1), r.reshape(-1), t.reshape(-1)
        rows, answers, values = self.history.bias(flat_h, flat_r, tau.reshape(-1))
        hit = answers == flat_t[rows]
        extra = torch.zeros(flat_h.numel(), dtype=scores.dtype, device=scores.device)
        return scores + extra.index_add(0, rows[hit], values[hit].to(scores.dtype)).view(scores.shape)

    def forward(
        self, h: torch.Tensor, r: torch.Tensor, t: torch.Tensor, tau: torch.Tensor | float
    ) -> torch.Tensor:
        """``score(h, r, t, tau)``."""
        return self.score(h, r, t, tau)

    def _scores_all(self, e: torch.Tensor, r: torch.Tensor, tau: torch.Tensor | float, head: bool):
        tau = as_days(tau, r)
        heads = torch.full_like(r, head, dtype=torch.bool)
        scores = ops.score_all(self._query(e, r, tau, heads, False), self.entity)
        bias = self.history_bias(e, r, tau, heads)
        if bias is not None:
            rows, answers, values = bias
            scores = scores.index_put((rows, answers), values.to(scores.dtype), accumulate=True)
        return scores

    def score_tails(self, h: torch.Tensor, r: torch.Tensor, tau: torch.Tensor | float) -> torch.Tensor:
        """Scores ``[B, N]`` of every entity as the tail of ``(h, r, ?, tau)``, history included."""
        return self._scores_all(h, r, tau, head=False)

    def score_heads(self, r: torch.Tensor, t: torch.Tensor, tau: torch.Tensor | float) -> torch.Tensor:
        """Scores ``[B, N]`` of every entity as the head of ``(?, r, t, tau)``, history included."""
        return self._scores_all(t, r, tau, head=True)

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
            raise ValueError(
                f"a vocabulary of {len(entities)} entities and {len(relations)} relations does not fit "
                f"the model's tables ({self.num_entities} entities, {self.num_relations} relations)"
            )
        self.entities, self.relations = list(entities), list(relations)
        self._entity_ids = {e: i for i, e in enumerate(self.entities)}
        self._relation_ids = {r: i for i, r in enumerate(self.relations)}

    def entity_ids(self, names: Sequence[str]) -> torch.Tensor:
        """Ids of entity strings; an ``UnknownNameError`` (a KeyError) names every unknown one."""
        return self._ids(names, ("entity", "entities"), getattr(self, "_entity_ids", None))

    def relation_ids(self, names: Sequence[str]) -> torch.Tensor:
        """Ids of relation strings; an ``UnknownNameError`` (a KeyError) names every unknown one."""
        return self._ids(names, ("relation", "relations"), getattr(self, "_relation_ids", None))

    def _ids(self, names: Sequence[str], kind: tuple[str, str], table: dict[str, int] | None) -> torch.Tensor:
        if table is None:
            raise RuntimeError("this model has no vocabulary; load it with rotmem.load_model")
        unknown = [name for name in names if name not in table]
        if unknown:
            raise UnknownNameError(f"unknown {kind[len(unknown) > 1]}: {unknown}")
        return torch.tensor([table[name] for name in names], device=self.entity.device)

    # --- persistence ------------------------------------------------------------------------
    def checkpoint_payload(self) -> dict[str, Any]:
        """What ``rotmem.load_model`` needs besides the state dict."""
        config = {"family": self.family, **self.config}
        history = None if self.history is None else HistorySpec.of(self.history).as_dict()
        return {"config": config, "history": history, "entities": self.entities, "relations": self.relations}

    def save(self, path: str) -> None:
        """Save weights, configuration, vocabulary and the weights' SHA-256 (``rotmem.models.digest``),
        readable by ``rotmem.load_model``."""
        state = self.state_dict()
        payload = self.checkpoint_payload() | {DIGEST_KEY: state_digest(state)}
        torch.save({"rotmem": payload, "state_dict": state}, path)
