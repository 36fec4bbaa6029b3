"""The history term's leave-one-out: a training fact's counts are those of a history that never
saw it, for every kind of fact, self-loops ``(e, r, e)`` included (indexed twice under ``e``: as
itself and as its mirror ``R + r``); and every (query, answer) pair comes once."""

from __future__ import annotations

import pytest
import torch

from rotmem.models.history import FactHistory

N, R = 12, 3
WINDOWS = dict(slot_windows=[0, 2, 90], pair_windows=[0, 3, 70], rule_windows=[0, 1, 5])


def graph(seed: int = 0, facts: int = 300) -> torch.Tensor:
    """Random facts over 40 days, one in ten a self-loop, no exact duplicates."""
    g = torch.Generator().manual_seed(seed)
    h, t = torch.randint(0, N, (facts,), generator=g), torch.randint(0, N, (facts,), generator=g)
    t = torch.where(torch.rand(facts, generator=g) < 0.1, h, t)
    out = torch.stack(
        [h, torch.randint(0, R, (facts,), generator=g), t, torch.randint(100, 140, (facts,), generator=g)], 1
    )
    return torch.unique(out, dim=0)


def as_dict(counts) -> dict:
    """``{(row, answer): (features, {relation: rule features})}`` of a ``HistoryCounts``."""
    out = {}
    for i, (row, answer) in enumerate(zip(counts.rows.tolist(), counts.answers.tolist(), strict=True)):
        out[(row, answer)] = (counts.features[i].tolist(), {})
    for pair, relation, values in zip(
        counts.rule_pairs.tolist(), counts.rule_relations.tolist(), counts.rule_features.tolist(), strict=True
    ):
        key = (counts.rows[pair].item(), counts.answers[pair].item())
        assert relation not in out[key][1], "a (pair, relation) twice"
        out[key][1][relation] = values
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_each_fact_counts_as_if_it_had_never_been_seen(causal):
    facts = graph()
    loops = (facts[:, 0] == facts[:, 2]).nonzero().squeeze(1)
    assert loops.numel() >= 5
    history = FactHistory(N, R, facts=facts, causal=causal, **WINDOWS)
    for i in [*loops.tolist(), 0, 1, 2, 50, 100]:
        fact = facts[i : i + 1]
        without = FactHistory(N, R, facts=torch.cat([facts[:i], facts[i + 1 :]]), causal=causal, **WINDOWS)
        h, r, t, day = fact.unbind(1)
        asked = without.counts(torch.cat([h, t]), torch.cat([r, r + R]), torch.cat([day, day]).double())
        assert as_dict(history.training_counts(fact)) == as_dict(asked), f"fact {fact.tolist()}"


def test_rule_counts_alone_give_each_pair_once():
    facts = graph(seed=1)
    history = FactHistory(N, R, slot_windows=None, rule_windows=[0, 3, 9], facts=facts)
    history.rule_weight.data.normal_(generator=torch.Generator().manual_seed(0))
    rows, answers, bias = history.bias(*facts[:40, [0, 1]].unbind(1), facts[:40, 3].double())
    pairs = rows * N + answers
    assert pairs.unique().numel() == pairs.numel() > 0
    assert bool((bias > 0).all())
