"""How well a model tells the asked day's answer from the same slot's answers of other days.

For a query ``(h, r, ?, τ)`` with answer ``t``, the *other-day answers* are the entities that
answer ``(h, r, ?)`` at some other day (in any split) but not at ``τ``: exactly the candidates the
static filter removes and the time-aware filter keeps. A model with no sense of time ranks them
like the answer itself; a model that knows when each held ranks them below it. The measure is
the fraction of (answer, other-day answer) pairs ordered correctly, ties counting one half (an
AUC), averaged over the queries that have other-day answers, in both directions.
"""

from __future__ import annotations

import torch

from rotmem.evaluation.ranking import answer_filters, check_finite
from rotmem.models.history import known_facts


@torch.no_grad()
def time_discrimination(model, kg, split: str = "test", batch_size: int = 1000) -> dict[str, float]:
    """``{"auc": ..., "queries": ...}``: the pairwise accuracy of the asked day's answer over the
    slot's other-day answers (module docstring), and the number of queries that have any."""
    filters = answer_filters(kg, ("time-aware", "static"))
    facts = kg.split(split)
    device = model.entity.device
    was_training = model.training
    model.eval()
    try:
        with known_facts(model, kg):
            total, queries = _auc_sums(model, facts, filters, split, batch_size, device)
    finally:
        model.train(was_training)
    return {"auc": total / max(queries, 1), "queries": queries}


def _auc_sums(model, facts, filters, split: str, batch_size: int, device) -> tuple[float, int]:
    """The sum of per-query pairwise accuracies and the number of queries that have any."""
    total, queries = 0.0, 0
    for start in range(0, facts.shape[0], batch_size):
        batch = facts[start : start + batch_size].to(device)
        h, r, t, day = batch.unbind(1)
        for direction, entity, target in (("tail", h, t), ("head", t, h)):
            scores = model.score_tails(h, r, day) if direction == "tail" else model.score_heads(r, t, day)
            scores = scores.float()
            check_finite(scores, f"{split} split, batch {start // batch_size} ({direction} queries)")
            other_day = torch.zeros_like(scores, dtype=torch.bool)
            rows, answers = filters[("static", direction)].to(device).known_answers(entity, r, day)
            other_day[rows, answers] = True
            rows, answers = filters[("time-aware", direction)].to(device).known_answers(entity, r, day)
            other_day[rows, answers] = False
            count = other_day.sum(1)
            target_score = scores.gather(1, target.unsqueeze(1))
            above = ((scores > target_score) & other_day).sum(1).double()
            ties = ((scores == target_score) & other_day).sum(1).double()
            has = count > 0
            total += float((1 - (above[has] + ties[has] / 2) / count[has]).sum())
            queries += int(has.sum())
    return total, queries
