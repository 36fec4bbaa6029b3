"""The controlled state-update benchmark (TEM.md): ``python -m benchmarks.state_update``; the data is
``benchmarks.datasets.state_update``, the no-LLM reader ``reader``, the run ``run``."""

from benchmarks.state_update.run import CONFIGS, Item, gold_labelled, gold_present, main

__all__ = ["CONFIGS", "Item", "gold_labelled", "gold_present", "main"]
