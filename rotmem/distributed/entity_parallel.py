"""Entity-parallel tables: each rank holds a contiguous slice of the entity table's rows.

For graphs whose entity table, its gradient and its optimizer state do not fit one device. Every rank
works on the same (global) batch: the rows the batch names are looked up on their owners and summed
over ranks (``lookup``), every rank builds the same queries from them with the model's own code
(``with_entity_rows``), and the 1-vs-all cross-entropy and the filtered ranking run over each rank's
shard and are combined with collectives (``rotmem.distributed.sharded_cross_entropy``,
``rank_counts``). The table's gradient and optimizer state stay on the rank that owns the rows;
the other parameters (relations, spectrum, speeds) are replicated and get the same full gradient on
every rank, with no reduction.

Per-rank memory of the table, its gradient and an Adagrad/Adam state: ``(1 + 1 + k) · N/world · D``
values instead of ``(2 + k) · N · D``, plus ``[B, D]`` activations that every rank holds whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from rotmem import ops
from rotmem.distributed.collectives import sum_over_shards
from rotmem.distributed.sharded_cross_entropy import sharded_cross_entropy
from rotmem.distributed.shards import EntityShard
from rotmem.ops.rank_csr import permute_rows
from rotmem.ops.table_grad import gather_rows


class _CallWith(nn.Module):
    """Holds a model so that ``torch.func.functional_call`` can swap one of its parameters."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(self.model, *args)


def with_entity_rows(model: nn.Module, rows: torch.Tensor, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(model, *args)`` with ``model.entity`` replaced by ``rows [M, D]`` for the call, so the
    model's own query and score code runs on gathered rows (entity ids ``0 .. M - 1``)."""
    return torch.func.functional_call(_CallWith(model), {"model.entity": rows}, (fn, *args), strict=False)


class ShardedEntityTable:
    """This rank's rows ``weight [shard.rows, D]`` of an entity table of ``shard.total`` rows.

    ``weight`` is a parameter a model owns (``take_from`` makes it the model's ``entity``, so names,
    optimizers and checkpoints see the same parameter as in one process, only smaller).
    """

    def __init__(self, weight: nn.Parameter, shard: EntityShard, group: dist.ProcessGroup | None = None):
        if weight.dim() != 2 or weight.shape[0] != shard.rows:
            raise ValueError(f"weight {tuple(weight.shape)} does not hold the {shard.rows} rows of {shard}")
        self.weight = weight
        self.shard = shard
        self.group = group

    @classmethod
    def take_from(cls, model: nn.Module, group: dist.ProcessGroup | None = None) -> ShardedEntityTable:
        """Cut ``model.entity [N, D]`` down to this rank's rows, in place: ``model.entity`` becomes the
        shard ``[N / world, D]`` (its queries then run through ``with_entity_rows``)."""
        entity = model.entity
        shard = EntityShard.current(entity.shape[0], group)
        rows = entity.detach()[shard.offset : shard.offset + shard.rows].clone()
        model.entity = nn.Parameter(rows, requires_grad=entity.requires_grad)
        return cls(model.entity, shard, group)

    def lookup(self, ids: torch.Tensor, sparse_grad: bool = False) -> torch.Tensor:
        """Rows of the global ``ids`` (any rank's): ``[*ids.shape, D]``, the same on every rank.

        Owners gather their rows, zeros elsewhere, summed over ranks; each owner's rows get the
        gradient of the (replicated) loss. ``sparse_grad``: as ``rotmem.ops.table_grad``.
        """
        owned = self.shard.owns(ids)
        rows = gather_rows(self.weight, self.shard.local(ids), sparse_grad)
        return sum_over_shards(rows * owned.unsqueeze(-1).to(rows.dtype), self.group)

    def cross_entropy(self, q: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
        """1-vs-all cross-entropy of ``q [B, D]`` against the whole table (``sharded_cross_entropy``)."""
        return sharded_cross_entropy(q, self.weight, target, self.shard, reduction, self.group)

    @torch.no_grad()
    def rank_counts(
        self, q: torch.Tensor, target: torch.Tensor, filter_ptr: torch.Tensor, filter_idx: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``ops.filtered_rank_counts`` over the whole table, the same ``(higher, ties) [F, B]`` on
        every rank: owners read their targets' scores from their tiles, every rank counts its shard
        against them, and the counts are summed (-1 where any rank saw a NaN or infinite score)."""
        order = torch.argsort(target)  # a row block's targets then fall in few of the owner's chunks
        q, target = q[order], target[order]
        filter_ptr, filter_idx = permute_rows(filter_ptr, filter_idx, order)
        offset = self.shard.offset
        scores = ops.target_scores(q, self.weight, target, offset)
        dist.all_reduce(scores, group=self.group)
        higher, ties = ops.filtered_rank_counts(
            q, self.weight, target, filter_ptr, filter_idx, scores, offset
        )
        bad = higher.lt(0).any(0, keepdim=True).long()
        summed = torch.cat([higher.clamp_min(0), ties.clamp_min(0), bad])
        dist.all_reduce(summed, group=self.group)
        filters = higher.shape[0]
        flagged = summed[-1:].gt(0)
        higher = summed[:filters].masked_fill(flagged, -1)
        ties = summed[filters : 2 * filters].masked_fill(flagged, -1)
        back = torch.empty_like(order)
        back[order] = torch.arange(order.numel(), device=order.device)
        return higher[:, back], ties[:, back]

    @torch.no_grad()
    def full(self, rows: torch.Tensor | None = None, dst: int | None = None) -> torch.Tensor | None:
        """The whole table ``[total, ...]`` on the CPU, from each rank's ``rows`` (default: the shard's
        weights; or any per-row state, e.g. an optimizer's), for checkpoints and tests.

        The shards travel one at a time (a broadcast from each owner), so the device never holds
        more than one shard beside its own. ``dst``: only that rank keeps the table (the others
        return None); None: every rank does.
        """
        rows = self.weight.detach() if rows is None else rows
        me = dist.get_rank(self.group)
        keep = dst is None or dst == me
        parts = []
        for rank in range(self.shard.world):
            shard = EntityShard.of(self.shard.total, rank, self.shard.world)
            buffer = rows if rank == me else rows.new_empty(shard.rows, *rows.shape[1:])
            dist.broadcast(
                buffer, dist.get_global_rank(self.group, rank) if self.group else rank, group=self.group
            )
            if keep:
                parts.append(buffer.cpu())
        return torch.cat(parts) if keep else None

    def mine(self, full: torch.Tensor) -> torch.Tensor:
        """This rank's rows of a whole-table tensor ``[total, ...]`` (a copy)."""
        return full[self.shard.offset : self.shard.offset + self.shard.rows].clone()


def local_facts(facts: torch.Tensor) -> torch.Tensor:
    """``facts [B, 4]`` with heads renamed ``0 .. B-1`` and tails ``B .. 2B-1``: the rows of
    ``lookup(cat([h, t]))``, for running the model's code under ``with_entity_rows``."""
    batch = facts.shape[0]
    ids = torch.arange(2 * batch, device=facts.device)
    return torch.stack([ids[:batch], facts[:, 1], ids[batch:], facts[:, 3]], 1)


def entity_parallel_loss(
    model: nn.Module,
    table: ShardedEntityTable,
    facts: torch.Tensor,
    terms: Callable[[nn.Module, torch.Tensor], dict[str, torch.Tensor]] | None = None,
) -> dict[str, torch.Tensor]:
    """``{"fit": ½(CE_tail + CE_head), **terms(model, local_facts)}`` for the global batch ``facts [B, 4]``.

    The fit term is the 1-vs-all cross-entropy over the sharded table; ``terms`` (e.g. the
    regulariser and the time-contrastive loss) run on the model with the batch's gathered rows.
    Every rank must pass the same ``facts`` and gets the same values.
    """
    h, r, t, day = facts.unbind(1)
    # The table's dense CE gradient goes through this alias, made before the lookup's sparse rows,
    # so it arrives after them and they are added into it in place (rotmem.losses.one_vs_all_loss).
    candidates = torch.ops.aten.alias(table.weight)
    rows = table.lookup(torch.cat([h, t]), sparse_grad=True)
    mine = local_facts(facts)

    def queries(m: nn.Module) -> torch.Tensor:
        return m.query_tails_and_heads(mine[:, 0], r, mine[:, 2], day)

    q = with_entity_rows(model, rows, queries)
    fit = sharded_cross_entropy(q, candidates, torch.cat([t, h]), table.shard, "mean", table.group)
    out = {"fit": fit}
    if terms is not None:
        out.update(with_entity_rows(model, rows, terms, mine))
    return out


class ShardedRanking:
    """What ``rotmem.evaluation.ranking.batch_ranks`` needs of a model whose entity table is sharded:
    its queries for global ids (rows looked up over ranks) and ``rank_counts`` over the whole table.

    ``batch_ranks(ShardedRanking(model, table), facts, ..., rank_counts=view.rank_counts)``, with the
    same ``facts`` on every rank, gives every rank the ranks of the whole table.
    """

    def __init__(self, model: nn.Module, table: ShardedEntityTable):
        self.model, self.table = model, table
        self.entity = table.weight

    def query_tails(self, h: torch.Tensor, r: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        ids = torch.arange(h.numel(), device=h.device)
        return with_entity_rows(self.model, self.table.lookup(h), lambda m: m.query_tails(ids, r, tau))

    def query_heads(self, r: torch.Tensor, t: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        ids = torch.arange(t.numel(), device=t.device)
        return with_entity_rows(self.model, self.table.lookup(t), lambda m: m.query_heads(r, ids, tau))

    def rank_counts(self, q, entity, target, filter_ptr, filter_idx) -> tuple[torch.Tensor, torch.Tensor]:
        return self.table.rank_counts(q, target, filter_ptr, filter_idx)
