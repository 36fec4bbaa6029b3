"""LoCoMo evidence retrieval (no LLM): ``python -m benchmarks.locomo``; see ``run`` for what it measures."""
