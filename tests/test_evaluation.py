"""Filtered ranking against a hand-computed example, both filters, the three tie rules; a model
whose scores tie or are NaN cannot look good."""

from __future__ import annotations

import pytest
import torch

from rotmem import RoMem
from rotmem.data import TemporalKG
from rotmem.evaluation import (
    FILTERS,
    AnswerFilter,
    evaluate,
    evaluate_all,
    filtered_ranks,
    time_discrimination,
)
from rotmem.evaluation.ranking import NonFiniteScoreError


class FixedScores(torch.nn.Module):
    """A model whose tail scores are a fixed table per query head, and head scores per tail: its
    queries are the table's rows and its entity table the identity, so ``q @ entity^T`` is the table."""

    def __init__(self, tail_table: torch.Tensor, head_table: torch.Tensor):
        super().__init__()
        self.entity = torch.nn.Parameter(torch.eye(tail_table.shape[1]))
        self.tail_table, self.head_table = tail_table, head_table

    def query_tails(self, h, r, tau):
        return self.tail_table[h].clone()

    def query_heads(self, r, t, tau):
        return self.head_table[t].clone()

    def score_tails(self, h, r, tau):
        return self.query_tails(h, r, tau) @ self.entity.t()

    def score_heads(self, r, t, tau):
        return self.query_heads(r, t, tau) @ self.entity.t()


class IntegerModel(FixedScores):
    """Small-integer queries per (entity, relation) and entities: every score is an exact integer,
    whatever the summation order, and ties are common."""

    def __init__(self, kg, dim: int = 4, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        super().__init__(torch.zeros(1, kg.num_entities), torch.zeros(1, kg.num_entities))
        shape = (kg.num_entities, kg.num_relations, dim)
        self.entity = torch.nn.Parameter(torch.randint(-2, 3, (kg.num_entities, dim), generator=g).float())
        self.tail_table = torch.randint(-2, 3, shape, generator=g).float()
        self.head_table = torch.randint(-2, 3, shape, generator=g).float()

    def query_tails(self, h, r, tau):
        return self.tail_table[h, r]

    def query_heads(self, r, t, tau):
        return self.head_table[t, r]


def tiny_graph() -> TemporalKG:
    # entities 0..4, one relation; (0, r, 1) at day 10 and (0, r, 2) at day 10 and (0, r, 3) at day 20.
    train = torch.tensor([[0, 0, 1, 10], [0, 0, 3, 20]])
    test = torch.tensor([[0, 0, 2, 10]])
    return TemporalKG(
        "tiny", [f"e{i}" for i in range(5)], ["r"], train, torch.empty(0, 4, dtype=torch.int64), test
    )


def test_filtered_ranks_by_hand():
    kg = tiny_graph()
    # Query (0, r, ?, 10), target 2. Scores: e0 .9, e1 .8 (true at day 10), e2 .5 (target),
    # e3 .7 (true at day 20 only), e4 .5 (tie with target).
    tails = torch.zeros(5, 5)
    tails[0] = torch.tensor([0.9, 0.8, 0.5, 0.7, 0.5])
    # Head query (?, r, 2, 10), target 0: e0 .2, e1 .4, e2 .3, e3 .2 (tie), e4 .1.
    heads = torch.zeros(5, 5)
    heads[2] = torch.tensor([0.2, 0.4, 0.3, 0.2, 0.1])
    model = FixedScores(tails, heads)
    results = evaluate_all(model, kg, "test")
    # time-aware tail: e1 removed (true at day 10); higher: e0, e3 -> optimistic 3; with tie e4 -> 4.
    # static tail: e1 and e3 removed; higher: e0 -> optimistic 2, pessimistic 3.
    # head (both filters: no other true head of (r, 2)): higher e1, e2 -> optimistic 3; tie e3 -> 4.
    # realistic: the mean of the two.
    expected = {
        "time-aware/optimistic": (3, 3),
        "time-aware/realistic": (3.5, 3.5),
        "time-aware/pessimistic": (4, 4),
        "static/optimistic": (2, 3),
        "static/realistic": (2.5, 3.5),
        "static/pessimistic": (3, 4),
    }
    for key, (tail_rank, head_rank) in expected.items():
        assert abs(results[key]["mrr"] - (1 / tail_rank + 1 / head_rank) / 2) < 1e-12, key
        assert results[key]["hits@3"] == ((tail_rank <= 3) + (head_rank <= 3)) / 2, key
        assert results[key]["hits@1"] == 0.0
    single = evaluate(model, kg, "test", filter="static", tie="pessimistic")
    assert single == results["static/pessimistic"]
    assert evaluate(model, kg, "test", filter="static") == results["static/realistic"]  # the default


# batches of 7 rank the synthetic valid split in ~1,000 batches: about a minute and a half, so slow
@pytest.mark.parametrize("batch_size", [pytest.param(7, marks=pytest.mark.slow), 1000])
def test_fused_ranks_equal_the_eager_ranks(synthetic, batch_size):
    kg = synthetic.kg
    model = IntegerModel(kg)
    fused = evaluate_all(model, kg, "valid", batch_size=batch_size)
    eager = evaluate_all(model, kg, "valid", batch_size=batch_size, fused=False)
    assert fused == eager
    assert fused["static/optimistic"]["mrr"] > fused["static/pessimistic"]["mrr"]  # ties are there


def test_filter_index_returns_every_known_answer():
    facts = torch.tensor([[0, 0, 1, 5], [0, 0, 2, 5], [0, 0, 3, 6], [4, 1, 0, 5], [0, 0, 1, 7]])
    time_aware = AnswerFilter(facts, "tail", "time-aware")
    rows, answers = time_aware.known_answers(
        torch.tensor([0, 0, 4, 3]), torch.tensor([0, 0, 1, 0]), torch.tensor([5, 6, 5, 5])
    )
    assert sorted(zip(rows.tolist(), answers.tolist(), strict=True)) == [(0, 1), (0, 2), (1, 3), (2, 0)]
    static = AnswerFilter(facts, "tail", "static")
    rows, answers = static.known_answers(torch.tensor([0]), torch.tensor([0]), torch.tensor([99]))
    assert sorted(answers.tolist()) == [1, 2, 3]
    heads = AnswerFilter(facts, "head", "time-aware")
    rows, answers = heads.known_answers(torch.tensor([1]), torch.tensor([0]), torch.tensor([5]))
    assert answers.tolist() == [0]
    ptr, ids = static.known_answers_csr(
        torch.tensor([0, 4, 0]), torch.tensor([0, 0, 0]), torch.tensor([1, 1, 1])
    )
    assert ptr.tolist() == [0, 3, 3, 6] and ids.tolist() == [1, 2, 3, 1, 2, 3]


def test_target_outside_the_filter_is_not_counted_against_itself():
    scores = torch.tensor([[0.5, 0.5, 0.1]])
    ranks = filtered_ranks(
        scores, torch.tensor([0]), (torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long))
    )
    assert ranks["optimistic"].tolist() == [1] and ranks["pessimistic"].tolist() == [2]
    assert ranks["realistic"].tolist() == [1.5]


def zero_model(kg) -> RoMem:
    """A RoMem whose tables are all zero: every candidate scores 0 for every query."""
    model = RoMem(kg.num_entities, kg.num_relations, dim=8, k=1)
    with torch.no_grad():
        for p in (model.entity, model.w, model.w_hat):
            p.zero_()
    return model


def test_a_model_whose_scores_all_tie_scores_about_one_over_n(synthetic):
    kg = synthetic.kg
    for kind in FILTERS:
        mrr = evaluate(zero_model(kg), kg, "test", filter=kind)["mrr"]
        # realistic rank (1 + N')/2 among N' <= N unfiltered candidates: MRR >= 2/(N + 1); the filter
        # removes at most a few true answers per query, so N' stays near N.
        assert 2 / (kg.num_entities + 1) <= mrr < 3 / kg.num_entities, (kind, mrr)
        assert evaluate(zero_model(kg), kg, "test", filter=kind, tie="optimistic")["mrr"] == 1.0


def test_a_nan_score_raises_naming_the_split_and_batch(synthetic):
    kg = synthetic.kg
    model = zero_model(kg)
    with torch.no_grad():
        model.entity[3] = float("nan")  # reaches tail queries of batch 0 whose candidates include it
    with pytest.raises(NonFiniteScoreError, match=r"valid split, batch 0 \(tail queries\)"):
        evaluate(model, kg, "valid", batch_size=10_000)


def test_time_discrimination_counts_other_day_answers_by_hand():
    kg = tiny_graph()
    tails = torch.zeros(5, 5)
    # query (0, r, ?, 10), answer 2: e3 answers (0, r) at day 20 only, so it is the one other-day
    # answer (e1 is true at day 10 too, so it is not). e3 above the answer: 0 of 1 pairs right.
    tails[0] = torch.tensor([0.9, 0.8, 0.5, 0.7, 0.5])
    heads = torch.zeros(5, 5)  # head query (?, r, 2, 10): no other-day answer, not counted
    result = time_discrimination(FixedScores(tails, heads), kg, "test")
    assert result == {"auc": 0.0, "queries": 1}
    tails[0, 3] = 0.5  # a tie counts one half
    assert time_discrimination(FixedScores(tails, heads), kg, "test")["auc"] == 0.5
    tails[0, 3] = 0.1
    assert time_discrimination(FixedScores(tails, heads), kg, "test")["auc"] == 1.0
