"""Phase-2 training losses (ROMEM.md, "Two-phase training") and ``Objective``, the weighted sum
that the data-parallel and the entity-parallel training steps both take."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from rotmem import ops
from rotmem.models.base import TemporalKGE, both_directions
from rotmem.models.history import HistoryCounts
from rotmem.ops.biased_cross_entropy import cross_entropy_all_biased

DAYS_PER_YEAR = 365.25


def one_vs_all_loss(
    model: TemporalKGE, facts: torch.Tensor, history_counts: HistoryCounts | None = None
) -> torch.Tensor:
    """``½(CE_tail + CE_head)``: 1-vs-all cross-entropy over all entities, both directions.

    ``facts [B, 4]`` int64 ``(h, r, t, day)``. Both directions' queries come from one fused query
    call and go through one fused CE call (with the model's history term as a sparse logit bias,
    ``rotmem.ops.biased_cross_entropy``, for a family that has one). The CE gives every entity a
    gradient, so the queries' rows give theirs sparse (``rotmem.ops.table_grad``), and so may terms
    of the loss made after this one (``embedding_regularizer(..., sparse_grad=True)``): no second
    ``[N, 2n]`` tensor.

    ``history_counts``: ``model.training_history_counts(facts)``, made beforehand where the batch
    was made (the data loader); without them the history counts here, which on a GPU waits for it.
    """
    h, r, t, day = facts.unbind(1)
    known, relations, days, head = both_directions(facts)
    # Autograd adds a sparse gradient into a dense one in place only when the sparse one arrived
    # first, and it runs the nodes made last first. The CE's dense gradient for the table passes
    # through this alias (whose backward hands it on as it is, unlike a view's), made before the
    # queries, so it arrives after their sparse rows.
    candidates = torch.ops.aten.alias(model.entity)
    queries = model.query_tails_and_heads(h, r, t, day, sparse_grad=True)
    targets = torch.cat([t, h])
    # a model with a history term: each training fact leaves itself out of its own counts
    if history_counts is not None:
        bias = model.history.bias_from(history_counts, relations + head.long() * model.num_relations)
    else:
        bias = model.history_bias(known, relations, days, head, exclude=targets)
    if bias is None:
        return ops.cross_entropy_all(queries, candidates, targets)
    return cross_entropy_all_biased(queries, candidates, targets, *bias)


def embedding_regularizer(
    model: TemporalKGE, facts: torch.Tensor, kind: str = "l4", sparse_grad: bool = False
) -> torch.Tensor:
    """The model family's N3/L4 regulariser over the batch's rows, divided by the batch size
    (``RoMem``: ``(Σ|e_h|⁴ + Σ|w_r|⁴ + Σ|ŵ_r|⁴ + Σ|e_t|⁴) / B`` for ``kind="l4"``).

    ``sparse_grad``: the entity rows' gradient is sparse, for a loss whose other terms give the
    entity table a dense gradient (``rotmem.ops.table_grad``).
    """
    return model.regularizer(facts, kind, sparse_grad)


def time_contrastive_loss(
    model: TemporalKGE,
    facts: torch.Tensor,
    negative_days: torch.Tensor,
    sigma_years: float,
    sparse_grad: bool = False,
) -> torch.Tensor:
    """Listwise time-contrastive loss, averaged over the batch.

    ``negative_days [B, J]`` are the negative times τ'_j (days). Target
    ``p* = softmax([0, -Δ_1²/2σ², ...])`` with ``Δ_j = |τ'_j - τ|`` in years; model
    ``p = softmax([f(τ), f(τ'_1), ...])``; loss ``-Σ p* log p``. ``sparse_grad``: the entity
    rows' gradient is sparse, for a loss whose other terms give the table a dense gradient.
    """
    h, r, t, day = facts.unbind(1)
    tau = day.to(negative_days.dtype).unsqueeze(1)
    times = torch.cat([tau, negative_days], dim=1)
    scores = model.score(h, r, t, times, sparse_grad=sparse_grad)
    delta_years = (negative_days - tau).abs() / DAYS_PER_YEAR
    target_logits = torch.cat([torch.zeros_like(tau), -(delta_years**2) / (2 * sigma_years**2)], 1)
    target = torch.softmax(target_logits.float(), dim=1)
    return -(target * F.log_softmax(scores.float(), dim=1)).sum(1).mean()


def self_adversarial_loss(
    model: TemporalKGE,
    facts: torch.Tensor,
    negative_tails: torch.Tensor,
    negative_heads: torch.Tensor,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Self-adversarial negative-sampling loss (RotatE), both directions, for the DistMult variant.

    ``negative_tails``/``negative_heads [B, K]`` entity ids. Each negative is weighted by
    ``softmax(temperature * score)`` (no gradient through the weights):
    ``-log σ(f_pos) - Σ_k w_k log σ(-f_k)``, averaged over the batch and the two directions.
    """
    h, r, t, day = facts.unbind(1)
    total = 0.0
    for query, positive, negatives in (
        (model.query_tails(h, r, day), t, negative_tails),
        (model.query_heads(r, t, day), h, negative_heads),
    ):
        pos = (query * model.entity[positive]).sum(-1)
        neg = torch.einsum("bd,bkd->bk", query, model.entity[negatives])
        weights = torch.softmax(temperature * neg.detach(), dim=1)
        total = total - F.logsigmoid(pos).mean() - (weights * F.logsigmoid(-neg)).sum(1).mean()
    return total / 2


@dataclass(frozen=True)
class Objective:
    """``L = fit + λ·reg + λ_t·L_time + λ_s·smoothness``: Phase 2's loss around a fit term (the
    1-vs-all or the self-adversarial loss, or its entity-parallel form), one definition for every
    way of computing the fit.

    ``regularizer``: ``"l4"`` or ``"modulus3"`` (``embedding_regularizer``); ``time_weight`` weighs
    ``time_contrastive_loss`` (given a batch's ``negative_days``); ``smoothness_weight`` the model's
    ``time_regularizer`` (per-day tables).
    """

    regularizer: str = "l4"
    regularizer_weight: float = 0.01
    time_weight: float = 0.5
    smoothness_weight: float = 0.0

    def batch_terms(
        self,
        model: TemporalKGE,
        facts: torch.Tensor,
        negative_days: torch.Tensor | None,
        sigma_years: float,
        sparse_grad: bool = False,
    ) -> dict[str, torch.Tensor]:
        """The terms over a batch's rows besides the fit: ``{"reg", "time"?}`` (``"time"`` when
        weighted and ``negative_days [B, J]`` given). ``sparse_grad``: for a fit term that gives the
        entity table a dense gradient, made before these (``one_vs_all_loss``)."""
        out = {"reg": embedding_regularizer(model, facts, self.regularizer, sparse_grad)}
        if self.time_weight > 0 and negative_days is not None:
            out["time"] = time_contrastive_loss(model, facts, negative_days, sigma_years, sparse_grad)
        return out

    def model_terms(self, model: TemporalKGE) -> dict[str, torch.Tensor]:
        """The terms over the whole model: ``{"smoothness"}`` when weighted and the family has one."""
        smoothness = model.time_regularizer() if self.smoothness_weight > 0 else None
        return {} if smoothness is None else {"smoothness": smoothness}

    def total(self, parts: dict[str, torch.Tensor]) -> torch.Tensor:
        """``fit + λ·reg + λ_t·time + λ_s·smoothness`` over the terms present in ``parts``."""
        weights = {
            "reg": self.regularizer_weight,
            "time": self.time_weight,
            "smoothness": self.smoothness_weight,
        }
        loss = parts["fit"]
        for name, weight in weights.items():
            if name in parts:
                loss = loss + weight * parts[name]
        return loss
