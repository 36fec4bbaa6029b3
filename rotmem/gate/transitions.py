"""Transition mining for Phase-1 gate pretraining, from the training split only.

A *slot* is ``(head, relation)``; its observations are the slot's facts ordered by day. Each pair of
consecutive observations is a transition, labelled ``changed`` when the tail differs from the
previous observation's tail. Filters (ROMEM.md, "Phase 1"):

- slots with fewer than ``min_observations`` (3) facts are dropped;
- pairs on the same day are skipped (their order carries no time);
- pairs more than ``max_delta_days`` (18250) apart are skipped;
- at most ``max_pairs_per_slot`` (256) pairs per slot are kept: the earliest ones, so the result
  is deterministic (the reference code keeps a random subset);
- the paper's "maximum functional ratio 0.5": a slot whose distinct tails exceed half of its
  observations (and number more than 2) is one-to-many (``Make statement`` to many partners at
  once), so a different tail there is not a change of state; such slots are dropped, as in the
  reference code. ``max_functional_ratio=None`` turns this filter off.

Observations on one day are ordered by tail id, so the pair that crosses into the next day starts
from the day's last tail in that order (as the reference code does).

The paper's gate regulariser (mean ``alpha_r`` over non-competing slots) is not applied: the
reference code's Phase-1 loss has no such term, and the class-balanced BCE already pushes the speed
of relations whose slots never change towards 0.

Only the training tensor is ever passed in, so valid/test facts cannot leak into the gate (the
reference code mines all three splits by default).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Transitions:
    """Mined transition pairs, one row per pair.

    - ``relation [P]`` int64: the relation id of the pair's slot.
    - ``delta_days [P]`` float32: days between the two observations (> 0).
    - ``changed [P]`` bool: the tail differs from the previous observation's tail.
    - ``slot_observations [P]`` int64: number of facts in the pair's slot (all days).
    - ``num_relations``: ``R``, the size of the relation vocabulary.
    - ``stats``: slot counts before and after each filter.
    """

    relation: torch.Tensor
    delta_days: torch.Tensor
    changed: torch.Tensor
    slot_observations: torch.Tensor
    num_relations: int
    stats: dict

    def __len__(self) -> int:
        return int(self.relation.numel())

    def per_relation(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(pairs [R] int64, change_rate [R] float32)``; the rate is NaN for relations without pairs."""
        pairs = torch.bincount(self.relation, minlength=self.num_relations)
        changes = torch.bincount(self.relation, weights=self.changed.double(), minlength=self.num_relations)
        rate = torch.where(pairs > 0, changes / pairs.clamp(min=1), torch.full_like(changes, float("nan")))
        return pairs, rate.float()

    def select(self, keep: torch.Tensor, **stats: object) -> Transitions:
        """The rows picked by ``keep`` (a bool mask or indices), with ``stats`` added to the stats."""
        return Transitions(
            relation=self.relation[keep],
            delta_days=self.delta_days[keep],
            changed=self.changed[keep],
            slot_observations=self.slot_observations[keep],
            num_relations=self.num_relations,
            stats={**self.stats, **stats},
        )

    def restrict(self, relations: torch.Tensor) -> Transitions:
        """Only the pairs of the given relation ids (e.g. a zero-shot training subset)."""
        keep = torch.isin(self.relation, torch.as_tensor(relations, dtype=torch.int64))
        return self.select(keep, restricted_to_relations=int(torch.unique(self.relation[keep]).numel()))

    def summary(self) -> dict:
        """Slots, pairs and changed fraction (plus the filter counts), JSON-serialisable."""
        n = len(self)
        return {
            **self.stats,
            "pairs": n,
            "changed_pairs": int(self.changed.sum()),
            "changed_fraction": float(self.changed.float().mean()) if n else 0.0,
            "median_delta_days": float(self.delta_days.median()) if n else 0.0,
            "relations_with_pairs": int(torch.unique(self.relation).numel()),
        }


def mine_transitions(
    train: torch.Tensor,
    num_relations: int | None = None,
    min_observations: int = 3,
    max_pairs_per_slot: int = 256,
    max_delta_days: float = 18250.0,
    max_functional_ratio: float | None = 0.5,
) -> Transitions:
    """Mine transitions from the training facts ``train [M, 4]`` int64 ``(head, relation, tail, day)``.

    ``num_relations`` defaults to ``max(relation) + 1``. Fully vectorised (no loop over slots).
    """
    if train.ndim != 2 or train.shape[1] != 4:
        raise ValueError(f"train must be [M, 4] (head, relation, tail, day), got {tuple(train.shape)}")
    if min_observations < 2 or max_pairs_per_slot < 1:
        raise ValueError("min_observations must be >= 2 and max_pairs_per_slot >= 1")
    facts = train.detach().cpu().numpy().astype(np.int64)
    head, rel, tail, day = facts.T
    if num_relations is None:
        num_relations = int(rel.max()) + 1 if len(rel) else 0

    order = np.lexsort((tail, day, rel, head))  # by slot, then day, then tail
    head, rel, tail, day = head[order], rel[order], tail[order], day[order]
    new_slot = np.ones(len(head), dtype=bool)
    new_slot[1:] = (head[1:] != head[:-1]) | (rel[1:] != rel[:-1])
    slot = np.cumsum(new_slot) - 1
    num_slots = int(slot[-1]) + 1 if len(slot) else 0
    n_obs = np.bincount(slot, minlength=num_slots)
    distinct = np.unique(slot * (int(tail.max(initial=0)) + 1) + tail) // (int(tail.max(initial=0)) + 1)
    n_unique = np.bincount(distinct, minlength=num_slots)

    enough = n_obs >= min_observations
    one_to_many = np.zeros(num_slots, dtype=bool)
    if max_functional_ratio is not None:
        one_to_many = (n_unique > 2) & (n_unique > max_functional_ratio * n_obs)
    keep_slot = enough & ~one_to_many

    same_slot = slot[1:] == slot[:-1]
    delta = day[1:] - day[:-1]
    valid = same_slot & keep_slot[slot[:-1]] & (delta > 0) & (delta <= max_delta_days)
    first = np.flatnonzero(valid)  # index of each pair's earlier observation
    pair_slot = slot[first]
    _, slot_start, slot_counts = np.unique(pair_slot, return_index=True, return_counts=True)
    rank = np.arange(len(first)) - np.repeat(slot_start, slot_counts)
    first = first[rank < max_pairs_per_slot]
    pair_slot = slot[first]

    stats = {
        "facts": int(len(facts)),
        "slots_total": num_slots,
        "slots_min_observations": int(enough.sum()),
        "slots_one_to_many": int((enough & one_to_many).sum()),
        "slots": int(np.unique(pair_slot).size),
        "filters": {
            "min_observations": min_observations,
            "max_pairs_per_slot": max_pairs_per_slot,
            "max_delta_days": max_delta_days,
            "max_functional_ratio": max_functional_ratio,
        },
    }
    return Transitions(
        relation=torch.from_numpy(rel[first].copy()),
        delta_days=torch.from_numpy(delta[first].astype(np.float32)),
        changed=torch.from_numpy(tail[first + 1] != tail[first]),
        slot_observations=torch.from_numpy(n_obs[pair_slot].astype(np.int64)),
        num_relations=num_relations,
        stats=stats,
    )
