"""Negative sampling for Phase 2: negative times from a slot's history, conflict-aware entities.

A *slot* is ``(entity, relation)``; its history is every training fact of that slot. Everything
is a sorted CSR index so a batch is sampled with tensor ops, no Python loop per fact.
"""

from __future__ import annotations

import torch

DAYS_PER_YEAR = 365.25


class SlotIndex:
    """Facts grouped by slot ``(facts[:, key_col], relation)``: their days and answer entities.

    ``direction="tail"`` groups by ``(h, r)`` (answers are tails); ``"head"`` by ``(t, r)``.
    """

    def __init__(self, facts: torch.Tensor, num_relations: int, direction: str = "tail"):
        key_col, answer_col = (0, 2) if direction == "tail" else (2, 0)
        self.num_relations = num_relations
        keys = facts[:, key_col] * num_relations + facts[:, 1]
        order = torch.argsort(keys, stable=True)
        self.sorted_keys = keys[order]
        self.days = facts[order, 3]
        self.answers = facts[order, answer_col]
        self.unique_keys, self.counts = torch.unique_consecutive(self.sorted_keys, return_counts=True)
        self.offsets = torch.cumsum(self.counts, 0) - self.counts

    def lookup(self, entity: torch.Tensor, relation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(offset, count)`` of each query's slot; count 0 for a slot never seen."""
        key = entity * self.num_relations + relation
        pos = torch.searchsorted(self.unique_keys, key).clamp(max=self.unique_keys.numel() - 1)
        found = self.unique_keys[pos] == key
        return self.offsets[pos], torch.where(found, self.counts[pos], torch.zeros_like(pos))

    def sample(
        self, entity: torch.Tensor, relation: torch.Tensor, size: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``size`` random history entries per query: ``(days, answers, valid)``, each ``[B, size]``.

        ``valid`` is False where the slot is empty (days/answers are then 0).
        """
        offset, count = self.lookup(entity, relation)
        u = torch.rand(entity.shape[0], size, generator=generator)
        pick = offset.unsqueeze(1) + (u * count.unsqueeze(1)).long().clamp(
            max=(count - 1).clamp(min=0).unsqueeze(1)
        )
        valid = (count > 0).unsqueeze(1).expand(-1, size)
        pick = torch.where(valid, pick, torch.zeros_like(pick))
        return self.days[pick], self.answers[pick], valid


def negative_times(
    slots: SlotIndex,
    facts: torch.Tensor,
    num_negatives: int,
    generator: torch.Generator,
    jitter_years: float = 0.02,
    far_days: float = 365.0,
    day_range: tuple[int, int] | None = None,
) -> torch.Tensor:
    """``[B, J]`` negative times (float days): ``J-1`` from the slot's history with ±jitter, one far.

    A slot with no history draws uniformly from ``day_range`` (default: the facts' own range).
    The last column is the forced far negative ``τ ± far_days``.
    """
    h, r, _, day = facts.unbind(1)
    batch = facts.shape[0]
    history, _, valid = slots.sample(h, r, num_negatives - 1, generator)
    low, high = day_range if day_range is not None else (int(day.min()), int(day.max()))
    uniform = low + torch.rand(batch, num_negatives - 1, generator=generator) * (high - low + 1)
    jitter = (
        (torch.rand(batch, num_negatives - 1, generator=generator) * 2 - 1) * jitter_years * DAYS_PER_YEAR
    )
    near = torch.where(valid, history.double() + jitter, uniform.double())
    sign = torch.randint(0, 2, (batch, 1), generator=generator).double() * 2 - 1
    far = day.double().unsqueeze(1) + sign * far_days
    return torch.cat([near, far], dim=1)


def conflict_aware_negatives(
    slots: SlotIndex,
    entity: torch.Tensor,
    relation: torch.Tensor,
    positive: torch.Tensor,
    num_negatives: int,
    num_entities: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """``[B, K]`` negative entities: competing answers of the same slot first, then uniform.

    Half of the ``K`` draws come from the slot's history (other answers it took at other times);
    a draw equal to the positive, or from an empty slot, is replaced by a uniform entity.
    """
    batch = entity.shape[0]
    uniform = torch.randint(0, num_entities, (batch, num_negatives), generator=generator)
    conflict = num_negatives // 2
    _, answers, valid = slots.sample(entity, relation, conflict, generator)
    usable = valid & (answers != positive.unsqueeze(1))
    uniform[:, :conflict] = torch.where(usable, answers, uniform[:, :conflict])
    return uniform
