"""Metrics on subsets of a split (the data-poor relations) from one ranking pass equal the metrics
of ranking that subset's facts alone; the query order follows the ranking's batches."""

from __future__ import annotations

import pytest
import torch

from rotmem.data import TemporalKG
from rotmem.evaluation import FILTERS, answer_filters, data_poor_facts, evaluate_all, evaluate_subsets
from rotmem.evaluation.ranking import metrics_from_ranks, rank_queries
from rotmem.evaluation.subsets import query_order
from tests.test_evaluation import IntegerModel


def test_query_order_repeats_each_batch_for_its_tail_then_head_queries():
    mask = torch.tensor([True, False, False, True, True])
    expected = [True, False, True, False, False, True, False, True, True, True]  # batches [0, 1], [2, 3], [4]
    assert query_order(mask, 2).tolist() == expected


def test_data_poor_facts_counts_training_facts_per_relation():
    train = torch.tensor([[0, 0, 1, 1]] * 3 + [[1, 1, 2, 1]])  # relation 0: 3 facts, relation 1: 1
    test = torch.tensor([[0, 0, 2, 2], [0, 1, 2, 2], [2, 2, 0, 2]])  # relation 2: no training fact
    kg = TemporalKG(
        "toy", ["a", "b", "c"], ["r0", "r1", "r2"], train, torch.empty(0, 4, dtype=torch.int64), test
    )
    assert data_poor_facts(kg, "test", threshold=2).tolist() == [False, True, True]
    assert data_poor_facts(kg, "test", threshold=4).tolist() == [True, True, True]


@pytest.mark.parametrize("batch_size", [100, 1000])
@pytest.mark.slow
def test_a_subset_scores_as_its_facts_ranked_alone(synthetic, batch_size):
    kg = synthetic.kg
    model = IntegerModel(kg)
    facts = kg.split("test")
    mask = facts[:, 1] == 0  # one relation's facts
    assert 0 < int(mask.sum()) < facts.shape[0]
    got = evaluate_subsets(
        model, kg, {"r0": mask, "none": torch.zeros_like(mask)}, "test", batch_size=batch_size
    )
    assert set(got) == {"all", "r0"}  # an empty subset gets no entry
    whole = evaluate_all(model, kg, "test", batch_size=batch_size)
    for key, values in whole.items():
        assert got["all"][key] == values | {"queries": 2 * facts.shape[0]}
    alone = rank_queries(model, facts[mask], answer_filters(kg, FILTERS), FILTERS, batch_size)
    for (kind, tie), ranks in alone.items():
        mine, expected = dict(got["r0"][f"{kind}/{tie}"]), metrics_from_ranks(ranks)
        assert mine["queries"] == 2 * int(mask.sum()) == ranks.shape[0]
        # the same ranks summed in another order: float64 rounding of < 10^4 terms each <= 1
        assert abs(mine.pop("mrr") - expected.pop("mrr")) < 1e-12
        assert {k: v for k, v in mine.items() if k != "queries"} == expected  # hits: exact counts
    assert got["r0"]["time-aware/realistic"] != got["all"]["time-aware/realistic"]  # a real subset
    rows = mask.nonzero().squeeze(1)  # ranking only those rows: "all" is them, a subset inside them
    sampled = evaluate_subsets(model, kg, {"r0": mask}, "test", batch_size=batch_size, rows=rows)
    for key in got["r0"]:
        assert sampled["all"][key]["queries"] == sampled["r0"][key]["queries"] == got["r0"][key]["queries"]
        assert abs(sampled["all"][key]["mrr"] - got["r0"][key]["mrr"]) < 1e-12
    with pytest.raises(ValueError, match="mask of shape"):
        evaluate_subsets(model, kg, {"bad": mask[:-1]}, "test")
