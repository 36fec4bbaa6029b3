"""Re-splits by time: temporal extrapolation (train on the earlier days, validate and test on later
ones) and held-out weeks (days inside the training range that training never sees)."""

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


def hold_out_weeks(kg: TemporalKG, every: int = 7) -> tuple[TemporalKG, dict[str, int]]:
    """Days never seen in training: whole weeks inside the training range are held out.

    Weeks are counted from the first training day (week ``w`` = days ``7w .. 7w + 6`` after it);
    every ``every``-th week (``w % every == every // 2``, so the first and last weeks stay in train)
    is held out. ``train`` keeps the training facts of the other days; ``valid`` is the validation
    facts of held-out days; ``test`` is every training and test fact of held-out days (about 1/every
    of the graph). Validation and test facts of the other days are dropped (they are neither
    trained on nor asked; only the static filter misses them). A held-out fact whose head, relation
    or tail never occurs in the new train split is dropped. Returns the new graph (same vocabulary
    and ids, named ``<name>@hold-out-weeks-<every>``) and the counts of kept and dropped facts.
    """
    if every < 2:
        raise ValueError(f"every must be at least 2 (one week in every {every} held out leaves no training)")
    first = kg.first_day

    def held_out(facts: torch.Tensor) -> torch.Tensor:
        week = torch.div(facts[:, 3] - first, 7, rounding_mode="floor")
        return week % every == every // 2

    train = kg.train[~held_out(kg.train)]
    last_week = (int(kg.train[:, 3].max()) - first) // 7
    if last_week < every:
        raise ValueError(f"{kg.name} spans {last_week + 1} weeks: too few to hold out one week in {every}")
    seen_entities = torch.zeros(kg.num_entities, dtype=torch.bool)
    seen_entities[train[:, 0]] = True
    seen_entities[train[:, 2]] = True
    seen_relations = torch.zeros(kg.num_relations, dtype=torch.bool)
    seen_relations[train[:, 1]] = True
    counts = {"train": train.shape[0], "train_held_out": kg.train.shape[0] - train.shape[0]}
    parts = {}
    for name, facts in (("valid", kg.valid), ("test", torch.cat([kg.train, kg.test]))):
        inside = held_out(facts)
        part = facts[inside]
        known = seen_entities[part[:, 0]] & seen_entities[part[:, 2]] & seen_relations[part[:, 1]]
        parts[name] = part[known]
        counts[name], counts[f"{name}_dropped"] = int(known.sum()), int((~known).sum())
    counts["other_days_dropped"] = int((~held_out(kg.valid)).sum() + (~held_out(kg.test)).sum())
    split = TemporalKG(
        f"{kg.name}@hold-out-weeks-{every}", kg.entities, kg.relations, train, parts["valid"], parts["test"]
    )
    return split, counts
