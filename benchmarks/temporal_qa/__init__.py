"""Temporal question answering over ICEWS05-15 (MultiTQ-style): questions, memories, metrics."""
