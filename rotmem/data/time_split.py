"""A temporal-extrapolation split: train on the earlier days, validate and test on later ones."""

from __future__ import annotations

import torch

from rotmem.data.temporal_kg import TemporalKG, day_of


def split_by_time(kg: TemporalKG, valid_from: str, test_from: str) -> tuple[TemporalKG, dict[str, int]]:
    """Every fact of ``kg`` (all splits) re-split by day: ``train`` before ``valid_from``,
    ``valid`` from ``valid_from`` to the day before ``test_from``, ``test`` from ``test_from`` on
    (dates ``YYYY-MM-DD``). A valid or test fact whose head, relation or tail never occurs in the new
    train split is dropped: no model can score what it never saw. Returns the new graph (same
    vocabulary and ids, named ``<name>@<valid_from>,<test_from>``) and the counts of kept and
    dropped facts per split."""
    first, second = day_of(valid_from), day_of(test_from)
    if second <= first:
        raise ValueError(f"test_from {test_from} must come after valid_from {valid_from}")
    facts = kg.all_facts
    facts = facts[torch.argsort(facts[:, 3], stable=True)]
    train = facts[facts[:, 3] < first]
    if train.shape[0] == 0:
        raise ValueError(f"no fact of {kg.name} is dated before {valid_from}")
    seen_entities = torch.zeros(kg.num_entities, dtype=torch.bool)
    seen_entities[train[:, 0]] = True
    seen_entities[train[:, 2]] = True
    seen_relations = torch.zeros(kg.num_relations, dtype=torch.bool)
    seen_relations[train[:, 1]] = True
    counts = {"train": train.shape[0]}
    parts = {}
    for name, inside in (
        ("valid", (facts[:, 3] >= first) & (facts[:, 3] < second)),
        ("test", facts[:, 3] >= second),
    ):
        part = facts[inside]
        known = seen_entities[part[:, 0]] & seen_entities[part[:, 2]] & seen_relations[part[:, 1]]
        parts[name] = part[known]
        counts[name], counts[f"{name}_dropped"] = int(known.sum()), int((~known).sum())
    split = TemporalKG(
        f"{kg.name}@{valid_from},{test_from}", kg.entities, kg.relations, train, parts["valid"], parts["test"]
    )
    return split, counts
