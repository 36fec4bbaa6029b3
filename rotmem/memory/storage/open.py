"""Which database backs a memory: a SQLite file (the embedded default) or a Postgres server.

``open_database(location)``: ``postgresql://...`` / ``postgres://...`` (a libpq DSN) opens
``rotmem.memory.storage.postgres.PostgresDatabase`` in the given namespace (one schema per namespace);
anything else is a SQLite file or ``":memory:"`` (``rotmem.memory.storage.sqlite.SQLiteDatabase``),
which holds one namespace: the file itself.
"""

from __future__ import annotations

from rotmem.memory.storage.database import MemoryDatabase

POSTGRES_PREFIXES = ("postgresql://", "postgres://")


def is_postgres(location: str) -> bool:
    """Whether ``location`` names a Postgres server rather than a SQLite file."""
    return str(location).startswith(POSTGRES_PREFIXES)


def open_database(
    location: str, *, synchronous: str = "FULL", read_only: bool = False, namespace: str | None = None
) -> MemoryDatabase:
    """The database at ``location`` (module docs). ``synchronous`` applies to SQLite only
    (Postgres commits are durable by the server's own settings); ``namespace`` to Postgres only."""
    if is_postgres(location):
        from rotmem.memory.storage.postgres import PostgresDatabase

        return PostgresDatabase(str(location), namespace or "default", read_only=read_only)
    if namespace is not None:
        raise ValueError(
            f"namespace={namespace!r} is for a Postgres memory; a SQLite memory is one namespace: use "
            "one file per namespace"
        )
    from rotmem.memory.storage.sqlite import SQLiteDatabase

    return SQLiteDatabase(str(location), synchronous=synchronous, read_only=read_only)
