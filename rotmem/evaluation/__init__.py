"""Filtered link-prediction evaluation."""

from rotmem.evaluation.filters import FILTERS, AnswerFilter
from rotmem.evaluation.ranking import (
    answer_filters,
    batch_ranks,
    evaluate,
    evaluate_all,
    filtered_ranks,
    metrics_from_ranks,
)
from rotmem.evaluation.subsets import data_poor_facts, evaluate_subsets
from rotmem.evaluation.time_discrimination import time_discrimination

__all__ = [
    "FILTERS",
    "AnswerFilter",
    "answer_filters",
    "batch_ranks",
    "data_poor_facts",
    "evaluate",
    "evaluate_all",
    "evaluate_subsets",
    "filtered_ranks",
    "metrics_from_ranks",
    "time_discrimination",
]
