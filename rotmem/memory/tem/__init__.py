"""TEM (TEM.md): versioned facts with ``[historical]`` labels. ``store.TEMStore`` and what it is
made of: its tables, relation-type weights, the text check, the in-memory indexes, and the
presentation order (``tense``)."""
