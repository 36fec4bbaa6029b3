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


class SlotDays:
    """The distinct days of each slot ``(h, r)`` of ``facts``, as a sorted CSR index."""

    def __init__(self, facts: torch.Tensor, num_relations: int):
        self.num_relations = num_relations
        self.first_day = int(facts[:, 3].min())
        self.span = int(facts[:, 3].max()) - self.first_day + 1
        keys = facts[:, 0] * num_relations + facts[:, 1]
        # one sorted int64 per distinct (slot, day): slot-major, then day
        self.slot_days = torch.unique(keys * self.span + (facts[:, 3] - self.first_day))
        self.days = self.slot_days % self.span + self.first_day
        self.unique_keys, self.counts = torch.unique_consecutive(
            self.slot_days // self.span, return_counts=True
        )
        self.offsets = torch.cumsum(self.counts, 0) - self.counts

    def lookup(self, h: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(offset, count)`` of each query's slot days; count 0 for a slot never seen."""
        key = h * self.num_relations + r
        pos = torch.searchsorted(self.unique_keys, key).clamp(max=self.unique_keys.numel() - 1)
        found = self.unique_keys[pos] == key
        return self.offsets[pos], torch.where(found, self.counts[pos], torch.zeros_like(pos))

    def position(self, h: torch.Tensor, r: torch.Tensor, day: torch.Tensor) -> torch.Tensor:
        """Index of ``day`` among the sorted days of slot ``(h, r)``; -1 where the slot lacks it."""
        offset, _ = self.lookup(h, r)
        inside = (day >= self.first_day) & (day < self.first_day + self.span)
        code = (h * self.num_relations + r) * self.span + (day - self.first_day)
        pos = torch.searchsorted(self.slot_days, code).clamp(max=self.slot_days.numel() - 1)
        found = inside & (self.slot_days[pos] == code)
        return torch.where(found, pos - offset, torch.full_like(pos, -1))


def distinct_indices(pool: torch.Tensor, size: int, generator: torch.Generator) -> torch.Tensor:
    """``[B, size]`` indices, distinct within each row and uniform over the ``size``-subsets of
    ``range(pool[b])`` (Floyd's algorithm, one step per column). Needs ``pool >= size``."""
    batch = pool.shape[0]
    picked = torch.empty(batch, size, dtype=torch.int64)
    for step in range(size):
        top = pool - size + step  # this step draws from [0, top]
        draw = (torch.rand(batch, generator=generator, dtype=torch.float64) * (top + 1)).long()
        draw = torch.minimum(draw, top)
        taken = (picked[:, :step] == draw.unsqueeze(1)).any(1)
        picked[:, step] = torch.where(taken, top, draw)
    return picked


def negative_times(
    slots: SlotDays,
    facts: torch.Tensor,
    num_negatives: int,
    generator: torch.Generator,
    jitter_years: float = 0.02,
    far_days: float = 365.0,
    day_range: tuple[int, int] | None = None,
) -> torch.Tensor:
    """``[B, J]`` negative times (float days) for the time-contrastive loss; never the fact's day.

    Columns ``0 .. J-2`` ("near"): distinct days of the fact's slot ``(h, r)`` other than its own
    day ``τ``, each moved by a uniform jitter of at most ``jitter_years`` that never brings it
    closer than one day to ``τ``, across it, nor past an end of ``day_range``. A slot with fewer than
    ``J-1`` other days (or whose drawn day is the far negative's or another column's) fills the rest
    from the global pool: whole days of ``day_range`` (default: the facts' own range), drawn again
    until they differ from ``τ``, from the far negative and from the row's other draws. The last
    column is the forced far negative ``τ ± far_days``, on a side inside ``day_range`` where one is.
    Every value lies in ``day_range``.
    """
    h, r, _, day = facts.unbind(1)
    batch, near = facts.shape[0], num_negatives - 1
    low, high = day_range if day_range is not None else (int(day.min()), int(day.max()))
    tau = day.double()

    if high - low < num_negatives:
        raise ValueError(
            f"the training days span only {high - low + 1} days: too few for {num_negatives} distinct "
            "negative times besides the fact's own; lower num_negative_times"
        )
    sign = torch.randint(0, 2, (batch,), generator=generator).double() * 2 - 1
    sign = torch.where(tau + sign * far_days > high, -1.0, sign)
    sign = torch.where(tau + sign * far_days < low, 1.0, sign)
    far = tau + sign * far_days
    # where neither side fits inside the range, the range's end farther from τ
    farther_end = torch.where(tau - low >= high - tau, float(low), float(high)).double()
    far = torch.where((far < low) | (far > high), farther_end, far)

    offset, count = slots.lookup(h, r)
    own = slots.position(h, r, day)  # -1 when τ is not one of the slot's days
    others = count - (own >= 0).long()
    # rows with at least ``near`` other days draw a random subset; the others take all they have
    subset = distinct_indices(torch.maximum(others, torch.tensor(near)), near, generator)
    index = torch.where(others.unsqueeze(1) >= near, subset, torch.arange(near).expand(batch, -1))
    index = index + ((own.unsqueeze(1) >= 0) & (index >= own.unsqueeze(1))).long()  # skip τ
    last = max(slots.days.numel() - 1, 0)
    history = slots.days[(offset.unsqueeze(1) + index).clamp(max=last)].double()
    # the jitter keeps a day at least a day from τ and inside the range (clamping at an end could
    # land two days, or a day and the far negative, on the same value)
    to_end = torch.minimum(history - low, high - history)  # < 0: a slot day outside the range
    reach = torch.minimum((history - tau.unsqueeze(1)).abs() - 1, to_end)
    reach = reach.clamp(min=0, max=jitter_years * DAYS_PER_YEAR)
    jitter = (torch.rand(batch, near, generator=generator, dtype=torch.float64) * 2 - 1) * reach
    history = history + jitter
    # a slot day outside the range, equal to the far negative or to an earlier column's goes to the
    # global pool instead
    in_slot = (torch.arange(near).unsqueeze(0) < others.unsqueeze(1)) & (to_end >= 0)
    in_slot &= history != far.unsqueeze(1)
    earlier = torch.ones(near, near, dtype=torch.bool).tril(-1)  # [i, j]: column j before column i
    equal = history.unsqueeze(2) == history.unsqueeze(1)
    in_slot &= ~(equal & earlier & in_slot.unsqueeze(1)).any(2)

    chosen = torch.where(in_slot, history, torch.full_like(history, float("nan")))
    return torch.cat([_fill_from_global(chosen, tau, far, low, high, generator), far.unsqueeze(1)], dim=1)


def _fill_from_global(
    chosen: torch.Tensor,
    tau: torch.Tensor,
    far: torch.Tensor,
    low: int,
    high: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """``chosen [B, K]`` with its NaN entries replaced by whole days of ``[low, high]`` that differ
    from ``tau [B]``, ``far [B]`` and the row's other entries (clashing draws are drawn again)."""
    chosen = chosen.clone()
    todo = torch.isnan(chosen)
    while bool(todo.any()):
        chosen[todo] = (
            low + torch.randint(0, high - low + 1, (int(todo.sum()),), generator=generator).double()
        )
        repeated = (chosen.unsqueeze(2) == chosen.unsqueeze(1)).sum(2) > 1
        clash = todo & (repeated | (chosen == tau.unsqueeze(1)) | (chosen == far.unsqueeze(1)))
        chosen[clash] = float("nan")
        todo = clash
    return chosen


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
