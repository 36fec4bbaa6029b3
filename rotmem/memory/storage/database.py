"""What every memory database backend shares: the rows, the errors and the portable SQL.

A backend (``rotmem.memory.storage.sqlite.FactDatabase`` on SQLite, ``rotmem.memory.storage.postgres.
PostgresDatabase``) subclasses ``MemoryDatabase`` and provides ``execute``/``executemany`` (SQL
written with ``?`` placeholders), ``transaction()`` (one writer at a time: ids are handed out under
that lock), ``data_version()`` (changes whenever another connection committed new rows),
``readable()``, ``close()`` and the attributes ``path``, ``read_only``, ``arrival`` (the column that
orders sessions by arrival) and ``integrity_error``. The tables are described in
``rotmem.memory.storage.sqlite``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

import numpy as np

from rotmem.memory.records import DuplicateSessionError

SCHEMA_VERSION = "2"
# Indexes a schema-2 database may lack (added after version 2 was released; an older rotmem reads a
# file that has them): ``latest_observation`` is ``MAX(t_obs)``, a lookup with them and a scan of
# every timed fact without (38 ms per search at 100k facts). A writable opening creates them.
TIME_INDEXES = (
    "CREATE INDEX IF NOT EXISTS temporal_facts_by_t_obs ON temporal_facts(t_obs)",
    "CREATE INDEX IF NOT EXISTS session_dates_by_t_obs ON session_dates(t_obs)",
)
TIME_INDEX_NAMES = ("temporal_facts_by_t_obs", "session_dates_by_t_obs")
SOURCE_SEPARATOR = "\x1f"
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


class SessionRow(NamedTuple):
    """A row of ``sessions``."""

    session_id: str
    session_index: int
    text: str | None
    created_at: float


class FactRow(NamedTuple):
    """A new row of ``facts`` (``vector``: the float32 unit vector as little-endian bytes)."""

    id: int
    subject: str
    relation: str
    object: str
    group_key: str
    relation_type: str | None
    session_id: str
    session_index: int
    span_start: int | None
    span_end: int | None
    created_at: float
    vector: bytes
    source: str | None


class StoredFact(NamedTuple):
    """A row of ``facts`` as read back (``FACT_COLUMNS``: without group key and vector)."""

    id: int
    subject: str
    relation: str
    object: str
    relation_type: str | None
    session_id: str
    session_index: int
    span_start: int | None
    span_end: int | None
    created_at: float
    historical: int
    source: str | None


class PassageRow(NamedTuple):
    """A new row of ``passages``."""

    id: int
    kind: str
    session_id: str
    session_index: int
    position: int
    text: str
    created_at: float
    vector: bytes
    source: str | None


class StoredPassage(NamedTuple):
    """A row of ``passages`` as read back (``PASSAGE_COLUMNS``)."""

    id: int
    kind: str
    text: str
    session_id: str
    session_index: int
    position: int
    source: str | None


class TimedFactRow(NamedTuple):
    """A row of ``temporal_facts``: a record's times in days since 1970-01-01, its session id."""

    record_id: int
    head: str
    relation: str
    tail: str
    t_happen: float
    t_obs: float
    source: str


FACT_COLUMNS = ", ".join(StoredFact._fields)
PASSAGE_COLUMNS = ", ".join(StoredPassage._fields)


class MemoryDatabaseError(ValueError):
    """The memory database cannot be opened or read (missing, not SQLite, foreign, truncated,
    corrupted, a newer schema, read-only); the message names the file."""


def join_sources(sources: Sequence[str]) -> str | None:
    """The stored form of a row's source ids (None for none)."""
    return SOURCE_SEPARATOR.join(sources) if sources else None


def split_sources(value: str | None) -> tuple[str, ...]:
    """Source ids from their stored form."""
    return tuple(value.split(SOURCE_SEPARATOR)) if value else ()


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
    def existing_sessions(self, session_ids: Sequence[str]) -> list[str]:
        """Those of ``session_ids`` already stored."""
        found: list[str] = []
        for start in range(0, len(session_ids), 500):
            chunk = list(session_ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            rows = self.execute(
                f"SELECT session_id FROM sessions WHERE session_id IN ({marks})", chunk
            ).fetchall()
            found.extend(row[0] for row in rows)
        return found

    def next_session_index(self) -> int:
        return int(self.execute("SELECT COALESCE(MAX(session_index), -1) + 1 FROM sessions").fetchone()[0])

    def next_id(self, table: str) -> int:
        return int(self.execute(f"SELECT COALESCE(MAX(id), -1) + 1 FROM {table}").fetchone()[0])

    def count(self, table: str, where: str = "", params: Sequence[Any] = ()) -> int:
        return int(self.execute(f"SELECT COUNT(*) FROM {table} {where}", params).fetchone()[0])

    def fetch_facts(self, ids: Sequence[int]) -> dict[int, StoredFact]:
        """Fact rows by id (ids not stored are left out)."""
        return {row[0]: StoredFact._make(row) for row in self._fetch("facts", FACT_COLUMNS, ids)}

    def fetch_passages(self, ids: Sequence[int]) -> dict[int, StoredPassage]:
        """Passage rows by id (ids not stored are left out)."""
        return {row[0]: StoredPassage._make(row) for row in self._fetch("passages", PASSAGE_COLUMNS, ids)}

    def _fetch(self, table: str, columns: str, ids: Sequence[int]) -> list[tuple]:
        rows: list[tuple] = []
        for start in range(0, len(ids), 500):
            chunk = [int(i) for i in ids[start : start + 500]]
            marks = ",".join("?" * len(chunk))
            rows += self.execute(f"SELECT {columns} FROM {table} WHERE id IN ({marks})", chunk)
        return rows

    def list_facts(self, group_key: str | None = None, group_prefix: str | None = None) -> list[StoredFact]:
        """Fact rows in source order (session index, then id): all, one version group's, or those
        whose group key starts with ``group_prefix`` (one subject's)."""
        where, params = "", ()
        if group_key is not None:
            where, params = "WHERE group_key = ?", (group_key,)
        elif group_prefix is not None:
            upper = group_prefix[:-1] + chr(ord(group_prefix[-1]) + 1)  # keeps the index usable
            where, params = "WHERE group_key >= ? AND group_key < ?", (group_prefix, upper)
        sql = f"SELECT {FACT_COLUMNS} FROM facts {where} ORDER BY session_index, id"
        return [StoredFact._make(row) for row in self.execute(sql, params)]

    def list_passages(self, kind: str | None = None) -> list[StoredPassage]:
        """Passage rows in source order (session index, position), of one ``kind`` or all."""
        where, params = ("WHERE kind = ?", (kind,)) if kind else ("", ())
        sql = f"SELECT {PASSAGE_COLUMNS} FROM passages {where} ORDER BY session_index, position, id"
        return [StoredPassage._make(row) for row in self.execute(sql, params)]

    def list_sessions(self) -> list[tuple[str, int, float]]:
        """``(session_id, session_index, created_at)`` rows in session order."""
        order = f"session_index, {self.arrival}"
        sql = f"SELECT session_id, session_index, created_at FROM sessions ORDER BY {order}"
        return self.execute(sql).fetchall()

    def max_id(self, table: str) -> int:
        """The largest row id of ``table`` (-1 when empty)."""
        return self.next_id(table) - 1

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

    # --- writes (call inside ``transaction()``) ---------------------------------------------
    def insert_sessions(self, rows: Iterable[SessionRow]) -> None:
        """``DuplicateSessionError`` when another writer stored one of the ids meanwhile."""
        try:
            self._insert("sessions", SessionRow._fields, rows)
        except self.integrity_error as error:
            raise DuplicateSessionError(f"session id already stored ({error}); nothing written") from error

    def insert_facts(self, rows: Iterable[FactRow]) -> None:
        self._insert("facts", FactRow._fields, rows)

    def insert_passages(self, rows: Iterable[PassageRow]) -> None:
        self._insert("passages", PassageRow._fields, rows)

    def _insert(self, table: str, columns: Sequence[str], rows: Iterable[tuple]) -> None:
        rows = list(rows)
        if rows:
            marks = ", ".join("?" * len(columns))
            self.executemany(f"INSERT INTO {table}({', '.join(columns)}) VALUES ({marks})", rows)

    def recompute_status(self, group_keys: Iterable[str]) -> None:
        """TEM status for whole version groups: historical iff below the group's latest session.

        The latest session index of a group never decreases (nothing is deleted), so a historical
        record stays historical; only current records (new ones included) can change, and only
        those are visited (through the partial index ``facts_current``).
        """
        keys = sorted(set(group_keys))
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            self.execute(
                "UPDATE facts SET historical = 1 WHERE historical = 0 AND group_key IN "
                f"({','.join('?' * len(chunk))}) AND session_index < (SELECT MAX(f2.session_index) "
                "FROM facts AS f2 WHERE f2.group_key = facts.group_key)",
                chunk,
            )

    # --- times (``TemporalMemory``) ---------------------------------------------------------
    def insert_temporal_facts(self, rows: Iterable[TimedFactRow]) -> None:
        """Call in a transaction."""
        self._insert("temporal_facts", TimedFactRow._fields, rows)

    def insert_session_dates(self, rows: Iterable[tuple[str, float]]) -> None:
        """Rows ``(session_id, t_obs)`` (call in a transaction)."""
        self._insert("session_dates", ("session_id", "t_obs"), rows)

    def temporal_facts(self) -> list[TimedFactRow]:
        """Every ``temporal_facts`` row in write order."""
        sql = f"SELECT {', '.join(TimedFactRow._fields)} FROM temporal_facts ORDER BY record_id"
        return [TimedFactRow._make(row) for row in self.execute(sql)]

    def latest_observation(self) -> float | None:
        """The largest ``t_obs`` of a timed fact or dated session, or None."""
        return self.execute(
            "SELECT MAX(t) FROM (SELECT MAX(t_obs) AS t FROM temporal_facts "
            "UNION ALL SELECT MAX(t_obs) FROM session_dates) AS times"
        ).fetchone()[0]

    def fact_times(self, record_ids: Sequence[int]) -> dict[int, tuple[float, float]]:
        """``record_id -> (t_happen, t_obs)`` for those of ``record_ids`` that have times."""
        out: dict[int, tuple[float, float]] = {}
        for start in range(0, len(record_ids), 500):
            chunk = [int(i) for i in record_ids[start : start + 500]]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT record_id, t_happen, t_obs FROM temporal_facts WHERE record_id IN ({marks})"
            out.update((row[0], (row[1], row[2])) for row in self.execute(sql, chunk))
        return out

    def session_dates(self) -> dict[str, float]:
        """``session_id -> t_obs`` of every dated session."""
        return dict(self.execute("SELECT session_id, t_obs FROM session_dates").fetchall())
