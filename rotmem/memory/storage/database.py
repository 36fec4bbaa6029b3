"""What every memory database backend shares: the portable SQL, the errors, the namespaces.

A backend (``rotmem.memory.storage.sqlite.SQLiteDatabase``, ``rotmem.memory.storage.postgres.
PostgresDatabase``) subclasses ``MemoryDatabase`` and provides ``execute``/``executemany`` (SQL
written with ``?`` placeholders), ``transaction()`` (one writer at a time: ids are handed out under
that lock), ``data_version()`` (changes whenever another connection committed new rows),
``readable()``, ``close()`` and the attributes ``path``, ``read_only``, ``arrival`` (the column that
orders sessions by arrival) and ``integrity_error``. The tables are the layers' own
(``rotmem.memory.storage.schema``); rows are written through ``rotmem.memory.storage.writer``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

NAMESPACE_PATTERN = re.compile(r"[a-z0-9][a-z0-9_]{0,47}")


def check_namespace(namespace: object) -> str:
    """A namespace (tenant) name: 1-48 of ``a-z 0-9 _``, starting with a letter or digit; or a
    ValueError naming it (it becomes a file or schema name, so nothing else is allowed)."""
    if not isinstance(namespace, str) or not NAMESPACE_PATTERN.fullmatch(namespace):
        raise ValueError(
            "namespace must be 1-48 characters of a-z, 0-9 and _ (starting with a letter or digit), "
            f"got {namespace!r}"
        )
    return namespace


class MemoryDatabaseError(ValueError):
    """The memory database cannot be opened or read (missing, not SQLite, foreign, truncated,
    corrupted, a newer schema, read-only); the message names the file."""


class MemoryDatabase:
    """The portable part of a memory database (see the module docs)."""

    path: str
    read_only: bool
    arrival: str
    integrity_error: type[Exception] | tuple[type[Exception], ...]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement (``?`` placeholders); returns a cursor (fetchone, fetchall, iteration)."""
        raise NotImplementedError

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        raise NotImplementedError

    def transaction(self) -> AbstractContextManager[MemoryDatabase]:
        raise NotImplementedError

    def readable(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def data_version(self) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # --- meta -------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        self.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # --- reads ------------------------------------------------------------------------------
    def next_id(self, table: str) -> int:
        return int(self.execute(f"SELECT COALESCE(MAX(id), -1) + 1 FROM {table}").fetchone()[0])

    def count(self, table: str, where: str = "", params: Sequence[Any] = ()) -> int:
        return int(self.execute(f"SELECT COUNT(*) FROM {table} {where}", params).fetchone()[0])

    def fetch_by_id(self, table: str, columns: str, ids: Sequence[int]) -> list[tuple]:
        """``columns`` of the rows of ``table`` whose ``id`` is in ``ids`` (500 per statement)."""
        rows: list[tuple] = []
        for start in range(0, len(ids), 500):
            chunk = [int(i) for i in ids[start : start + 500]]
            marks = ",".join("?" * len(chunk))
            rows += self.execute(f"SELECT {columns} FROM {table} WHERE id IN ({marks})", chunk)
        return rows

    def vectors(
        self, table: str, extra: str, dim: int, after_id: int = -1, upto_id: int | None = None
    ) -> tuple[np.ndarray, list[Any], np.ndarray]:
        """``(ids [N], extra column values, vectors [N, dim])`` of the rows of ``table`` with
        ``after_id < id <= upto_id`` (all rows by default)."""
        upto = "" if upto_id is None else f" AND id <= {int(upto_id)}"
        rows = self.execute(
            f"SELECT id, {extra}, vector FROM {table} WHERE id > ?{upto} ORDER BY id", (int(after_id),)
        ).fetchall()
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        if any(len(row[2]) != 4 * dim for row in rows):
            raise MemoryDatabaseError(
                f"{self.path}: a {table} vector is not {dim} float32 values (corrupted)"
            )
        blob = b"".join(row[2] for row in rows)
        vectors = (
            np.frombuffer(blob, dtype="<f4").reshape(len(rows), dim) if rows else np.zeros((0, dim), "f4")
        )
        return ids, [row[1] for row in rows], vectors.astype(np.float32, copy=False)
