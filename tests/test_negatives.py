"""Negative times for the time-contrastive loss: never the fact's own day, distinct, inside the
range, reproducible; and the loss's target really prefers the true time."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rotmem.data.negatives import SlotDays, distinct_indices, negative_times
from rotmem.losses import time_contrastive_loss

RANGE = (100, 2000)


def random_facts(seed: int, num_facts: int = 400, days_per_slot: int = 6) -> torch.Tensor:
    """Facts on a few slots, each with up to ``days_per_slot`` distinct days (often repeated)."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randint(0, 8, (num_facts,), generator=g)
    r = torch.randint(0, 3, (num_facts,), generator=g)
    t = torch.randint(0, 8, (num_facts,), generator=g)
    slot_day = torch.randint(RANGE[0], RANGE[1] + 1, (8, 3, days_per_slot), generator=g)
    day = slot_day[h, r, torch.randint(0, days_per_slot, (num_facts,), generator=g)]
    return torch.stack([h, r, t, day], 1)


def draw(facts: torch.Tensor, seed: int, jitter_years: float = 0.02, num: int = 4) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return negative_times(SlotDays(facts, 3), facts, num, g, jitter_years, day_range=RANGE)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 8), st.integers(2, 7))
@example(seed=189, days_per_slot=4, num=4)  # once drew a slot day clamped onto the far negative
def test_never_tau_distinct_inside_the_range(seed, days_per_slot, num):
    facts = random_facts(seed, days_per_slot=days_per_slot)
    tau = facts[:, 3].double().unsqueeze(1)
    for jitter in (0.0, 0.02):
        negatives = draw(facts, seed, jitter, num)
        assert negatives.shape == (facts.shape[0], num)
        assert ((negatives - tau).abs() >= 1).all()  # at least a day away from the fact's own day
        assert ((negatives >= RANGE[0]) & (negatives <= RANGE[1])).all()
        same = negatives.unsqueeze(2) == negatives.unsqueeze(1)
        assert same.sum((1, 2)).eq(num).all()  # only each entry with itself: distinct in every row


def test_jitter_near_a_range_end_stays_distinct_and_inside():
    """Slot days a few days from the range's start, the far negative on the start itself: a
    jitter of 0.05 years (18 days) must not push two days, or a day and the far negative, onto it."""
    start = RANGE[0]
    days = [start + 1, start + 2, start + 3, start + 365]  # the last is every fact's own day τ
    facts = torch.tensor([[0, 0, 1, d] for d in days for _ in range(50)])
    facts = facts[facts[:, 3] == start + 365]
    facts = torch.cat([facts, torch.tensor([[0, 0, 1, d] for d in days[:3]])])
    at_start = 0
    for seed in range(20):
        negatives = draw(facts, seed, jitter_years=0.05)[:-3]  # the rows whose τ is start + 365
        at_start += int((negatives[:, -1] == start).sum())  # far negative τ − 365: the first day
        assert (negatives >= start).all()
        same = negatives.unsqueeze(2) == negatives.unsqueeze(1)
        assert same.sum((1, 2)).eq(negatives.shape[1]).all(), seed
    assert at_start > 100  # the case in question (far on the first day) was drawn


def test_near_negatives_come_from_the_slot_history_when_it_has_enough_days():
    facts = random_facts(0, days_per_slot=6)
    negatives = draw(facts, 1, jitter_years=0.0)
    slots = SlotDays(facts, 3)
    offset, count = slots.lookup(facts[:, 0], facts[:, 1])
    for i in range(0, facts.shape[0], 17):
        history = set(slots.days[offset[i] : offset[i] + count[i]].tolist()) - {int(facts[i, 3])}
        near = set(negatives[i, :-1].long().tolist())
        if len(history) >= 3:
            assert near <= history, i
        else:  # all of the slot's other days, the rest from the global pool
            assert history <= near, i


def test_a_slot_with_a_single_day_draws_from_the_global_pool():
    facts = torch.tensor([[0, 0, 1, 500]] * 50)  # one slot, one day: nothing else in its history
    negatives = draw(facts, 0)
    assert (negatives[:, :-1] != 500).all()
    assert negatives[:, :-1].unique().numel() > 50  # spread over the range, not a fixed fallback
    torch.testing.assert_close((negatives[:, -1] - 500).abs(), torch.full((50,), 365.0, dtype=torch.float64))


def test_far_negative_stays_inside_the_range():
    facts = torch.tensor([[0, 0, 1, RANGE[0]], [0, 0, 1, RANGE[1]], [0, 0, 1, 1000]])
    far = draw(facts, 0)[:, -1]
    assert far.tolist()[:2] == [RANGE[0] + 365, RANGE[1] - 365]
    assert abs(far[2].item() - 1000) == 365


def test_reproducible_with_a_seed():
    facts = random_facts(3)
    assert torch.equal(draw(facts, 7), draw(facts, 7))
    assert not torch.equal(draw(facts, 7), draw(facts, 8))


def test_distinct_indices_are_uniform_over_subsets():
    pool = torch.full((60_000,), 5)
    picked = distinct_indices(pool, 2, torch.Generator().manual_seed(0))
    assert (picked[:, 0] != picked[:, 1]).all() and picked.min() >= 0 and picked.max() <= 4
    pairs = torch.sort(picked, 1).values
    counts = torch.bincount(pairs[:, 0] * 5 + pairs[:, 1], minlength=25)
    counts = counts[counts > 0].double()
    assert counts.numel() == math.comb(5, 2)
    expected = 60_000 / 10
    # each count is Binomial(60000, 1/10): 6 standard deviations is 0.5% of it
    assert ((counts - expected).abs() < 6 * math.sqrt(expected * 0.9)).all(), counts


def test_too_short_a_range_is_a_clear_error():
    facts = torch.tensor([[0, 0, 1, 10], [0, 0, 1, 11]])
    with pytest.raises(ValueError, match="span only 2 days"):
        negative_times(SlotDays(facts, 1), facts, 4, torch.Generator().manual_seed(0))


class ScoresByTime:
    """Scores each candidate time by closeness to ``preferred`` day: ``-|time - preferred| / 100``."""

    def __init__(self, preferred: torch.Tensor):
        self.preferred = preferred

    def score(self, h, r, t, times, sparse_grad=False):
        return -(times - self.preferred.unsqueeze(1)).abs() / 100


def test_time_contrastive_loss_is_lower_for_a_model_that_prefers_the_true_time():
    facts = random_facts(5)
    negatives = draw(facts, 5)
    tau = facts[:, 3].double()
    true_time = time_contrastive_loss(ScoresByTime(tau), facts, negatives, sigma_years=0.5)
    far_time = time_contrastive_loss(ScoresByTime(negatives[:, -1]), facts, negatives, sigma_years=0.5)
    # a target inverted (mass on the negatives) would rank these the other way round
    assert true_time < far_time - 0.1, (true_time, far_time)
