"""``SessionWriter``: the rows of one write transaction, by table and column name.

Every layer adds its rows to the same writer (``TEMStore`` its sessions, facts and passages; a
layer on top, through ``TEMStore.add_sessions(before_commit=...)``, its own, e.g. the times of
``TemporalMemory``); ``flush`` inserts them table by table in schema order (``schema.tables``: a
row after the rows it refers to), one ``executemany`` per table, inside the caller's transaction.
A row is a mapping column name -> value holding exactly the table's written columns, so no layer
depends on the order of another's columns, and the same rows go to SQLite and to Postgres.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rotmem.memory.storage.database import MemoryDatabase
from rotmem.memory.storage.schema import Table, table, tables


class SessionWriter:
    """Rows waiting for one transaction of ``db`` (module docs). ``db`` is there for the reads a
    layer needs while it builds rows (e.g. the next free id, read under the write lock)."""

    def __init__(self, db: MemoryDatabase):
        self.db = db
        self._rows: dict[str, list[tuple[Any, ...]]] = {}

    def add(self, table_name: str, row: Mapping[str, Any] | None = None, /, **values: Any) -> None:
        """Queue one row of ``table_name``, given as a mapping or as keyword arguments (column
        name -> value); a ``KeyError`` names a missing or unknown column."""
        spec = table(table_name)
        values = {**(row or {}), **values}
        self._rows.setdefault(spec.name, []).append(_ordered(spec, values))

    def add_many(self, table_name: str, rows: Iterable[Mapping[str, Any]]) -> None:
        """``add`` for each of ``rows``."""
        spec = table(table_name)
        self._rows.setdefault(spec.name, []).extend(_ordered(spec, row) for row in rows)

    def pending(self, table_name: str) -> int:
        """How many rows of ``table_name`` are queued."""
        return len(self._rows.get(table_name, ()))

    def flush(self) -> None:
        """Insert every queued row (module docs); call inside ``db.transaction()``. A taken key
        raises the table's ``on_duplicate`` exception when it has one."""
        for spec in tables():
            rows = self._rows.pop(spec.name, None)
            if not rows:
                continue
            try:
                self.db.executemany(spec.insert(), rows)
            except self.db.integrity_error as error:
                if spec.on_duplicate is None:
                    raise
                raise spec.on_duplicate(error) from error


def _ordered(spec: Table, values: Mapping[str, Any]) -> tuple[Any, ...]:
    """``values`` as a tuple in ``spec.written`` order, or a ``KeyError`` naming what is wrong."""
    names = spec.written
    if len(values) != len(names) or any(name not in values for name in names):
        missing = [name for name in names if name not in values]
        unknown = sorted(set(values) - set(names))
        raise KeyError(
            f"a {spec.name} row needs the columns {list(names)}: missing {missing}, unknown {unknown}"
        )
    return tuple(values[name] for name in names)
