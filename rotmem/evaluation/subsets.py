"""Filtered link-prediction metrics on subsets of a split's facts, from one ranking pass.

A subset is a boolean mask over the split's facts; each fact's tail and head queries both belong
to it. ``data_poor_facts`` marks the facts whose relation has fewer than ``threshold`` training
facts, where a model must generalise from little data.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from rotmem.evaluation.filters import FILTERS
from rotmem.evaluation.ranking import answer_filters, metrics_from_ranks, rank_queries
from rotmem.models.history import known_facts

DATA_POOR_THRESHOLD = 100


def data_poor_facts(kg, split: str = "test", threshold: int = DATA_POOR_THRESHOLD) -> torch.Tensor:
    """``[M]`` bool over ``kg``'s ``split``: the facts whose relation has fewer than ``threshold``
    facts in ``kg.train``."""
    counts = torch.bincount(kg.train[:, 1], minlength=kg.num_relations)
    return counts[kg.split(split)[:, 1]] < threshold


def query_order(fact_mask: torch.Tensor, batch_size: int) -> torch.Tensor:
    """``[2M]``: ``fact_mask [M]`` in the order ``rank_queries`` returns ranks (per batch of
    ``batch_size`` facts, its tail queries then its head queries)."""
    parts = [fact_mask[start : start + batch_size] for start in range(0, fact_mask.shape[0], batch_size)]
    return torch.cat([torch.cat([part, part]) for part in parts])


def evaluate_subsets(
    model,
    kg,
    subsets: dict[str, torch.Tensor],
    split: str = "test",
    filters: Iterable[str] = FILTERS,
    batch_size: int = 1000,
    rows: torch.Tensor | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """``{subset: {"time-aware/realistic": {"mrr": .., "hits@1": .., "queries": n}, ..}}`` for the
    whole split (subset ``"all"``) and each mask of ``subsets`` (``[M]`` bool over the split's
    facts), every filter and tie rule, from one ranking pass. ``queries`` counts both directions; a
    subset with no fact gets no entry. ``rows`` (int64 positions in the split, e.g. a random sample)
    ranks those facts only: ``"all"`` is then them, and each subset their facts inside the mask.
    The filters always know every fact of every split."""
    filters = tuple(filters)
    facts = kg.split(split)
    for name, mask in subsets.items():
        if mask.shape != (facts.shape[0],):
            raise ValueError(
                f"subset {name!r}: mask of shape {tuple(mask.shape)}, split has {facts.shape[0]}"
            )
    if rows is not None:
        facts, subsets = facts[rows], {name: mask[rows] for name, mask in subsets.items()}
    was_training = model.training
    model.eval()
    try:
        with known_facts(model, kg):
            ranks = rank_queries(
                model, facts, answer_filters(kg, filters), filters, batch_size, f"{split} split"
            )
    finally:
        model.train(was_training)
    masks = {"all": None} | {name: query_order(mask, batch_size) for name, mask in subsets.items()}
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, mask in masks.items():
        if mask is not None and not bool(mask.any()):
            continue
        out[name] = {}
        for (kind, tie), r in ranks.items():
            chosen = r if mask is None else r[mask]
            out[name][f"{kind}/{tie}"] = metrics_from_ranks(chosen) | {"queries": int(chosen.shape[0])}
    return out
