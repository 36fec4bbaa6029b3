"""Time on top of TEM (ROMEM.md, "Query time"): ``memory.TemporalMemory`` (dated sessions, the
``S_final`` re-rank), its tables, the time expressions read from text and questions, and the online
Phase 2 (``fit``)."""
