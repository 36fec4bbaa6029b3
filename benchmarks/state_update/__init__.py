"""The controlled state-update benchmark (TEM.md): ``python -m benchmarks.state_update``.

``data``: the seeded generator (personas, sessions, questions); ``reader``: the label-aware rule
reader used when no LLM is given; ``run``: memory configurations, metrics, tables.
"""

from benchmarks.state_update.run import CONFIGS, Item, gold_labelled, gold_present, main

__all__ = ["CONFIGS", "Item", "gold_labelled", "gold_present", "main"]
