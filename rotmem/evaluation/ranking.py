"""Filtered link-prediction ranking: MRR and Hits@k over both directions, fully batched.

Ranks come from ``rotmem.ops.filtered_rank_counts``: the fused kernels score a batch's queries
(``model.query_tails`` / ``query_heads``) against ``model.entity`` tile by tile and count, for every
filter at once, the candidates above and equal to each target, so no ``[B, N]`` score matrix is
made (``fused=False`` keeps the eager path: one score matrix per direction, one pass per filter; a
model whose scores add a history term to ``q @ entity^T`` is ranked that way).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from rotmem import ops
from rotmem.evaluation.filters import FILTERS, AnswerFilter
from rotmem.host_syncs import cpu_only
from rotmem.models.history import known_facts

TIE_RULES = ("optimistic", "realistic", "pessimistic")
DEFAULT_TIE = "realistic"
HITS_AT = (1, 3, 10)


class NonFiniteScoreError(FloatingPointError):
    """A model produced a NaN or infinite score: no rank can be given to it."""


def filtered_ranks(
    scores: torch.Tensor,
    target: torch.Tensor,
    known: tuple[torch.Tensor, torch.Tensor],
) -> dict[str, torch.Tensor]:
    """Ranks ``[B]`` (float64) of ``target`` among ``scores [B, N]`` after removing the ``known``
    answers, under each tie rule (PyKEEN's names):

    - ``optimistic``: 1 + #(other candidates scoring strictly higher);
    - ``pessimistic``: 1 + #(others scoring >=), tkbc's rule;
    - ``realistic``: their mean, the expected rank when ties are broken at random. A model whose
      scores all tie gets rank (1 + N')/2 among N' candidates, never rank 1.

    ``scores`` is modified in place. Scores must be finite (``check_finite``).
    """
    rows = torch.arange(scores.shape[0], device=scores.device)
    target_score = scores[rows, target].unsqueeze(1)
    scores[known[0], known[1]] = float("-inf")
    scores[rows, target] = float("-inf")
    higher = (scores > target_score).sum(1).double()
    ties = (scores == target_score).sum(1).double()
    return {"optimistic": 1 + higher, "realistic": 1 + higher + ties / 2, "pessimistic": 1 + higher + ties}


def check_finite(scores: torch.Tensor, where: str) -> None:
    """Raise ``NonFiniteScoreError`` naming ``where`` (split and batch) if any score is NaN or
    infinite: a NaN compares false with everything, so it would otherwise count as rank 1."""
    if not bool(torch.isfinite(scores).all()):
        bad = int((~torch.isfinite(scores)).any(1).sum())
        raise NonFiniteScoreError(f"{where}: {bad} of {scores.shape[0]} queries have NaN or infinite scores")


def metrics_from_ranks(ranks: torch.Tensor) -> dict[str, float]:
    """``mrr`` and ``hits@k`` (fractions in [0, 1]) from ranks ``[Q]``."""
    ranks = ranks.double()
    out = {"mrr": float((1.0 / ranks).mean())}
    for k in HITS_AT:
        out[f"hits@{k}"] = float((ranks <= k).double().mean())
    return out


def answer_filters(kg, kinds: Iterable[str]) -> dict[tuple[str, str], AnswerFilter]:
    """Filters over all splits of ``kg``, cached on it: ``{(kind, direction): AnswerFilter}``."""
    cache = kg.__dict__.setdefault("_answer_filters", {})
    for kind in kinds:
        for direction in ("tail", "head"):
            if (kind, direction) not in cache:
                cache[(kind, direction)] = AnswerFilter(kg.all_facts, direction, kind)
    return cache


def ranks_from_counts(higher: torch.Tensor, ties: torch.Tensor) -> dict[str, torch.Tensor]:
    """The three tie rules' ranks (float64, ``filtered_ranks``'s definitions) from the counts of
    candidates scoring above and equal to the target."""
    higher, ties = higher.double(), ties.double()
    return {"optimistic": 1 + higher, "realistic": 1 + higher + ties / 2, "pessimistic": 1 + higher + ties}


def filter_csr(
    filters: dict[tuple[str, str], AnswerFilter], kinds: tuple[str, ...], facts: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(filter_ptr [F, 2B+1], filter_idx)``: for each filter kind, the known answers of the tail
    queries ``(h, r, ?, day)`` then of the head queries ``(?, r, t, day)`` of ``facts [B, 4]``."""
    h, r, t, day = facts.unbind(1)
    ptrs, ids = [], []
    offset = torch.zeros((), dtype=torch.int64, device=facts.device)
    for kind in kinds:
        tail_ptr, tail_ids = filters[(kind, "tail")].to(facts.device).known_answers_csr(h, r, day)
        head_ptr, head_ids = filters[(kind, "head")].to(facts.device).known_answers_csr(t, r, day)
        ptr = torch.cat([tail_ptr, head_ptr[1:] + tail_ptr[-1]]) + offset
        ptrs.append(ptr)
        ids += [tail_ids, head_ids]
        offset = ptr[-1]
    return torch.stack(ptrs), torch.cat(ids)


@torch.no_grad()
def batch_ranks(
    model,
    facts: torch.Tensor,
    filters: dict[tuple[str, str], AnswerFilter],
    kinds: tuple[str, ...],
    where: str = "batch",
    fused: bool = True,
    rank_counts: Callable[..., tuple[torch.Tensor, torch.Tensor]] = ops.filtered_rank_counts,
    check: bool = True,
    csr: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> dict[tuple[str, str], torch.Tensor]:
    """Ranks of a batch ``facts [B, 4]`` (on the model's device), tail queries then head queries:
    ``{(filter, tie_rule): ranks [2B]}``. ``where`` names the batch in the error a non-finite
    score raises (e.g. ``"test split, batch 3"``). ``fused=False``: the eager path (score matrices),
    which a model with a history term (a sparse bias on ``q @ entity^T``) always takes.
    ``rank_counts``: ``ops.filtered_rank_counts`` or a sharded table's (``rotmem.distributed``).
    ``check=False`` leaves the non-finite check to the caller (``check_counts`` on the ranks, once
    for many batches: on a GPU each check waits for it). ``csr``: the batch's ``filter_csr``, made
    beforehand (on the host, where its sizes cost no wait), else made here."""
    if not fused or getattr(model, "history", None) is not None:
        return _eager_batch_ranks(model, facts, filters, kinds, where)
    h, r, t, day = facts.unbind(1)
    tau = day.double()
    queries = torch.cat([model.query_tails(h, r, tau), model.query_heads(r, t, tau)])
    filter_ptr, filter_idx = csr if csr is not None else filter_csr(filters, kinds, facts)
    higher, ties = rank_counts(queries, model.entity, torch.cat([t, h]), filter_ptr, filter_idx)
    if check:
        check_counts(higher, where)
    out = {}
    for i, kind in enumerate(kinds):
        for tie, ranks in ranks_from_counts(higher[i], ties[i]).items():
            out[(kind, tie)] = ranks
    return out


def check_counts(higher: torch.Tensor, where: str) -> None:
    """Raise ``NonFiniteScoreError`` when a query's counts are negative, the fused kernels' mark of
    a NaN or infinite score; ``higher [F, 2B]``, tail queries then head queries."""
    bad = higher[0] < 0
    if bool(bad.any()):
        half = bad.shape[0] // 2
        tail_bad, head_bad = int(bad[:half].sum()), int(bad[half:].sum())
        direction, count = ("tail", tail_bad) if tail_bad else ("head", head_bad)
        raise NonFiniteScoreError(
            f"{where} ({direction} queries): {count} of {half} queries have NaN or infinite scores"
        )


def _eager_batch_ranks(
    model,
    facts: torch.Tensor,
    filters: dict[tuple[str, str], AnswerFilter],
    kinds: tuple[str, ...],
    where: str,
) -> dict[tuple[str, str], torch.Tensor]:
    """``batch_ranks`` through ``[B, N]`` score matrices (``model.score_tails`` / ``score_heads``)."""
    h, r, t, day = facts.unbind(1)
    tau = day.double()
    out: dict[tuple[str, str], list[torch.Tensor]] = {(k, tie): [] for k in kinds for tie in TIE_RULES}
    for direction, entity, target in (("tail", h, t), ("head", t, h)):
        scores = model.score_tails(h, r, tau) if direction == "tail" else model.score_heads(r, t, tau)
        scores = scores.float()
        check_finite(scores, f"{where} ({direction} queries)")
        for i, kind in enumerate(kinds):
            filt = filters[(kind, direction)].to(scores.device)
            batch_scores = scores if i == len(kinds) - 1 else scores.clone()
            ranks = filtered_ranks(batch_scores, target, filt.known_answers(entity, r, day))
            for tie in TIE_RULES:
                out[(kind, tie)].append(ranks[tie])
    return {key: torch.cat(value) for key, value in out.items()}


def rank_queries(
    model,
    queries: torch.Tensor,
    filters: dict[tuple[str, str], AnswerFilter],
    kinds: tuple[str, ...],
    batch_size: int = 1000,
    where: str = "queries",
    fused: bool = True,
) -> dict[tuple[str, str], torch.Tensor]:
    """Ranks of ``queries [M, 4]`` in both directions: ``{(filter, tie_rule): ranks [2M]}``.
    ``where`` names the queries in errors (e.g. ``"test split"``)."""
    device = model.entity.device
    wheres = [f"{where}, batch {i}" for i in range(-(-queries.shape[0] // batch_size))]
    host = queries.cpu()
    parts = []
    for i, label in enumerate(wheres):
        batch = host[i * batch_size : (i + 1) * batch_size]
        # the known answers' rows on the host (their sizes cost a GPU a wait each), then moved
        csr = None
        if fused and getattr(model, "history", None) is None:
            with cpu_only():
                csr = tuple(t.to(device, non_blocking=True) for t in filter_csr(filters, kinds, batch))
        parts.append(batch_ranks(model, batch.to(device), filters, kinds, label, fused, check=False, csr=csr))
    # one wait for the device over all batches: a count below 0 (rank below 1) marks a NaN score
    optimistic = (kinds[0], "optimistic")
    bad = torch.stack([(part[optimistic] < 1).any() for part in parts])
    if bool(bad.any()):
        i = int(bad.int().argmax())
        check_counts((parts[i][optimistic] - 1).unsqueeze(0), wheres[i])
    return {key: torch.cat([p[key].cpu() for p in parts]) for key in parts[0]}


def evaluate_all(
    model,
    kg,
    split: str = "test",
    filters: Iterable[str] = FILTERS,
    batch_size: int = 1000,
    fused: bool = True,
) -> dict[str, dict[str, float]]:
    """Metrics for every filter and tie rule: ``{"time-aware/realistic": {"mrr": ..}, ..}``.
    ``fused=False``: the eager evaluator (``[B, N]`` score matrices), for comparison."""
    filters = tuple(filters)
    for kind in filters:
        if kind not in FILTERS:
            raise ValueError(f"unknown filter {kind!r}; expected one of {FILTERS}")
    was_training = model.training
    model.eval()
    try:
        with known_facts(model, kg):
            facts, known = kg.split(split), answer_filters(kg, filters)
            ranks = rank_queries(model, facts, known, filters, batch_size, f"{split} split", fused)
    finally:
        model.train(was_training)
    with cpu_only():  # the ranks are on the host by now
        return {f"{kind}/{tie}": metrics_from_ranks(r) for (kind, tie), r in ranks.items()}


def evaluate(
    model,
    kg,
    split: str = "test",
    filter: str = "time-aware",
    tie: str = DEFAULT_TIE,
    batch_size: int = 1000,
) -> dict[str, float]:
    """Filtered MRR and Hits@1/3/10 on ``kg``'s ``split``, averaged over head and tail queries.

    ``filter``: ``"time-aware"`` removes other true answers of ``(h, r, tau)`` from any split;
    ``"static"`` removes true answers of ``(h, r)`` at any time. ``tie``: ``"realistic"`` (the
    default: ties broken at random, in expectation), ``"optimistic"`` or ``"pessimistic"`` (see
    ``filtered_ranks``). Returns fractions in [0, 1]. A NaN score raises ``NonFiniteScoreError``.
    """
    if tie not in TIE_RULES:
        raise ValueError(f"unknown tie rule {tie!r}; expected one of {TIE_RULES}")
    return evaluate_all(model, kg, split, (filter,), batch_size)[f"{filter}/{tie}"]
