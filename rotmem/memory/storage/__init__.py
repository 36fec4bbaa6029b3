"""Where a memory's rows live: the schema (``schema``: tables registered by the layers that own
them), the portable base (``database.MemoryDatabase``), SQLite (``sqlite``, the embedded default),
Postgres (``postgres``), ``open.open_database`` (which of the two a location names) and the
session writer (``writer.SessionWriter``) that every layer's rows go through."""
