"""The memory database: schema (version 2), transactions and every SQL statement of the memory.

One file (or ``":memory:"``), stdlib ``sqlite3``, WAL journal (file databases), ``synchronous=FULL``
by default so a committed session survives a crash of the process or the machine. Writes happen
only inside ``transaction()`` (``BEGIN IMMEDIATE`` … ``COMMIT``; any exception rolls back, so a
failed or interrupted write leaves the database as it was). Tables:

- ``meta(key, value)``: schema version, encoder name, vector width.
- ``sessions(session_id, session_index, text, created_at)``.
- ``facts(id, subject, relation, object, group_key, relation_type, session_id, session_index,
  span_start, span_end, created_at, historical, vector, source)``: append-only; only
  ``historical`` is ever updated (recomputed per version group at write time, 0 → 1 only).
- ``passages(id, kind, session_id, session_index, position, text, created_at, vector, source)``:
  the side store of dialogue turns and event summaries.
- ``temporal_facts(record_id, head, relation, tail, t_happen, t_obs, source)`` and
  ``session_dates(session_id, t_obs)``: the times ``TemporalMemory`` keeps (days since 1970-01-01).

``source`` (schema 2) is the provenance of a row inside its session: the ids of the dialogue turns
a fact was extracted from, or a turn's own id, joined by ``SOURCE_SEPARATOR``; NULL when unknown.
A schema-1 file is upgraded in place when opened (the new columns are NULL, ``session_dates`` is
filled from ``temporal_facts``).

Vectors are float32 unit rows stored as little-endian BLOBs; the in-memory index is rebuilt from
them when a store is opened and extended with rows other connections commit (``data_version``).
A file that is not a readable SQLite database (truncated, overwritten) raises
``MemoryDatabaseError``, a ``ValueError`` naming the file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

SCHEMA_VERSION = "2"
SOURCE_SEPARATOR = "\x1f"
SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    session_index INTEGER NOT NULL,
    text TEXT,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS facts (
    id INTEGER PRIMARY KEY,
    subject TEXT NOT NULL,
    relation TEXT NOT NULL,
    object TEXT NOT NULL,
    group_key TEXT NOT NULL,
    relation_type TEXT,
    session_id TEXT NOT NULL REFERENCES sessions(session_id),
    session_index INTEGER NOT NULL,
    span_start INTEGER,
    span_end INTEGER,
    created_at REAL NOT NULL,
    historical INTEGER NOT NULL DEFAULT 0,
    vector BLOB NOT NULL,
    source TEXT
);
CREATE INDEX IF NOT EXISTS facts_by_group ON facts(group_key, session_index);
CREATE INDEX IF NOT EXISTS facts_current ON facts(group_key, session_index) WHERE historical = 0;
CREATE TABLE IF NOT EXISTS passages (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('turn', 'summary')),
    session_id TEXT NOT NULL REFERENCES sessions(session_id),
    session_index INTEGER NOT NULL,
    position INTEGER NOT NULL,
    text TEXT NOT NULL,
    created_at REAL NOT NULL,
    vector BLOB NOT NULL,
    source TEXT
);
CREATE INDEX IF NOT EXISTS passages_by_kind ON passages(kind, id);
CREATE TABLE IF NOT EXISTS temporal_facts (
    record_id INTEGER PRIMARY KEY,
    head TEXT NOT NULL,
    relation TEXT NOT NULL,
    tail TEXT NOT NULL,
    t_happen REAL NOT NULL,
    t_obs REAL NOT NULL,
    source TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS session_dates (session_id TEXT PRIMARY KEY, t_obs REAL NOT NULL);
"""
_UPGRADE_FROM_1 = """
ALTER TABLE facts ADD COLUMN source TEXT;
ALTER TABLE passages ADD COLUMN source TEXT;
INSERT OR IGNORE INTO session_dates SELECT source, MIN(t_obs) FROM temporal_facts GROUP BY source;
"""

FACT_COLUMNS = (
    "id, subject, relation, object, relation_type, session_id, session_index, "
    "span_start, span_end, created_at, historical, source"
)
PASSAGE_COLUMNS = "id, kind, text, session_id, session_index, position, source"


class MemoryDatabaseError(ValueError):
    """The memory database file cannot be read (not SQLite, truncated, corrupted, or a newer schema)."""


def join_sources(sources: Sequence[str]) -> str | None:
    """The stored form of a row's source ids (None for none)."""
    return SOURCE_SEPARATOR.join(sources) if sources else None


def split_sources(value: str | None) -> tuple[str, ...]:
    """Source ids from their stored form."""
    return tuple(value.split(SOURCE_SEPARATOR)) if value else ()


class FactDatabase:
    """The SQLite file behind a ``TEMStore`` (see the module docs)."""

    def __init__(self, path: str = ":memory:", synchronous: str = "FULL"):
        synchronous = synchronous.upper()
        if synchronous not in SYNCHRONOUS_MODES:
            raise ValueError(f"synchronous must be one of {SYNCHRONOUS_MODES}, got {synchronous!r}")
        self.path = str(path)
        self.connection = sqlite3.connect(self.path, isolation_level=None)
        try:
            with self.readable():
                self._open(synchronous)
        except BaseException:
            self.connection.close()
            raise

    def _open(self, synchronous: str) -> None:
        if self.path != ":memory:":
            mode = self.connection.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise MemoryDatabaseError(f"{self.path}: SQLite refused WAL mode (got {mode!r})")
        self.connection.execute(f"PRAGMA synchronous={synchronous}")
        self.connection.execute("PRAGMA foreign_keys=ON")
        with self.transaction():
            self.connection.execute(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            version = self.get_meta("schema_version")
            if version not in (None, "1", SCHEMA_VERSION):
                raise MemoryDatabaseError(
                    f"{self.path}: memory schema version {version}, this rotmem reads {SCHEMA_VERSION} "
                    "(a newer rotmem wrote it)"
                )
            upgrade = version == "1"
            self._run_script(_SCHEMA)  # CREATE ... IF NOT EXISTS: a schema-1 file keeps its old tables
            if upgrade:
                self._run_script(_UPGRADE_FROM_1)
            self.set_meta("schema_version", SCHEMA_VERSION)

    def _run_script(self, script: str) -> None:
        for statement in script.split(";"):
            if statement.strip():
                self.connection.execute(statement)

    @contextmanager
    def readable(self) -> Iterator[None]:
        """Turn SQLite's "file is not a database" / "malformed" errors into ``MemoryDatabaseError``."""
        try:
            yield
        except sqlite3.DatabaseError as error:
            if not _unreadable(error):
                raise
            raise MemoryDatabaseError(
                f"{self.path}: not a readable rotmem memory database ({error}); restore it from a backup "
                "or point to another file"
            ) from None

    def data_version(self) -> int:
        """SQLite's ``data_version``: changes whenever another connection commits to the file."""
        return int(self.connection.execute("PRAGMA data_version").fetchone()[0])

    def close(self) -> None:
        self.connection.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; any exception rolls everything back and re-raises."""
        self.connection.execute("BEGIN IMMEDIATE")
        try:
            yield self.connection
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
        self.connection.execute("COMMIT")

    # --- meta -------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.connection.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        self.connection.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # --- reads ------------------------------------------------------------------------------
    def existing_sessions(self, session_ids: Sequence[str]) -> list[str]:
        """Those of ``session_ids`` already stored."""
        found: list[str] = []
        for start in range(0, len(session_ids), 500):
            chunk = list(session_ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            rows = self.connection.execute(
                f"SELECT session_id FROM sessions WHERE session_id IN ({marks})", chunk
            ).fetchall()
            found.extend(row[0] for row in rows)
        return found

    def next_session_index(self) -> int:
        return int(
            self.connection.execute("SELECT COALESCE(MAX(session_index), -1) + 1 FROM sessions").fetchone()[0]
        )

    def next_id(self, table: str) -> int:
        return int(self.connection.execute(f"SELECT COALESCE(MAX(id), -1) + 1 FROM {table}").fetchone()[0])

    def count(self, table: str, where: str = "", params: Sequence[Any] = ()) -> int:
        return int(self.connection.execute(f"SELECT COUNT(*) FROM {table} {where}", params).fetchone()[0])

    def fetch_facts(self, ids: Sequence[int]) -> dict[int, tuple]:
        """Fact rows (``FACT_COLUMNS``) by id."""
        return self._fetch("facts", FACT_COLUMNS, ids)

    def fetch_passages(self, ids: Sequence[int]) -> dict[int, tuple]:
        """Passage rows (``PASSAGE_COLUMNS``) by id."""
        return self._fetch("passages", PASSAGE_COLUMNS, ids)

    def _fetch(self, table: str, columns: str, ids: Sequence[int]) -> dict[int, tuple]:
        rows: dict[int, tuple] = {}
        for start in range(0, len(ids), 500):
            chunk = [int(i) for i in ids[start : start + 500]]
            marks = ",".join("?" * len(chunk))
            for row in self.connection.execute(f"SELECT {columns} FROM {table} WHERE id IN ({marks})", chunk):
                rows[row[0]] = row
        return rows

    def list_facts(self, where: str = "", params: Sequence[Any] = ()) -> list[tuple]:
        """Fact rows in source order (session index, then id)."""
        sql = f"SELECT {FACT_COLUMNS} FROM facts {where} ORDER BY session_index, id"
        return self.connection.execute(sql, params).fetchall()

    def list_passages(self, where: str = "", params: Sequence[Any] = ()) -> list[tuple]:
        """Passage rows in source order (session index, position)."""
        sql = f"SELECT {PASSAGE_COLUMNS} FROM passages {where} ORDER BY session_index, position, id"
        return self.connection.execute(sql, params).fetchall()

    def list_sessions(self) -> list[tuple]:
        """``(session_id, session_index, created_at)`` rows in session order."""
        sql = "SELECT session_id, session_index, created_at FROM sessions ORDER BY session_index, rowid"
        return self.connection.execute(sql).fetchall()

    def max_id(self, table: str) -> int:
        """The largest row id of ``table`` (-1 when empty)."""
        return self.next_id(table) - 1

    def vectors(
        self, table: str, extra: str, dim: int, after_id: int = -1, upto_id: int | None = None
    ) -> tuple[np.ndarray, list[Any], np.ndarray]:
        """``(ids [N], extra column values, vectors [N, dim])`` of the rows of ``table`` with
        ``after_id < id <= upto_id`` (all rows by default)."""
        upto = "" if upto_id is None else f" AND id <= {int(upto_id)}"
        rows = self.connection.execute(
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
    def insert_sessions(self, rows: Iterable[tuple]) -> None:
        """Rows ``(session_id, session_index, text, created_at)``."""
        self.connection.executemany(
            "INSERT INTO sessions(session_id, session_index, text, created_at) VALUES (?, ?, ?, ?)", rows
        )

    def insert_facts(self, rows: Iterable[tuple]) -> None:
        """Rows ``(id, subject, relation, object, group_key, relation_type, session_id,
        session_index, span_start, span_end, created_at, vector_blob, source)``."""
        self.connection.executemany(
            "INSERT INTO facts(id, subject, relation, object, group_key, relation_type, session_id, "
            "session_index, span_start, span_end, created_at, vector, source) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    def insert_passages(self, rows: Iterable[tuple]) -> None:
        """Rows ``(id, kind, session_id, session_index, position, text, created_at, vector_blob,
        source)``."""
        self.connection.executemany(
            "INSERT INTO passages(id, kind, session_id, session_index, position, text, created_at, vector, "
            "source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    def recompute_status(self, group_keys: Iterable[str]) -> None:
        """TEM status for whole version groups: historical iff below the group's latest session.

        The latest session index of a group never decreases (nothing is deleted), so a historical
        record stays historical; only current records (new ones included) can change, and only
        those are visited (through the partial index ``facts_current``).
        """
        self.connection.execute("CREATE TEMP TABLE IF NOT EXISTS touched(group_key TEXT PRIMARY KEY)")
        self.connection.execute("DELETE FROM touched")
        self.connection.executemany(
            "INSERT OR IGNORE INTO touched VALUES (?)", ((key,) for key in group_keys)
        )
        self.connection.execute(
            "UPDATE facts SET historical = 1 "
            "WHERE historical = 0 AND group_key IN (SELECT group_key FROM touched) AND session_index < "
            "(SELECT MAX(f2.session_index) FROM facts AS f2 WHERE f2.group_key = facts.group_key)"
        )

    # --- times (``TemporalMemory``) ---------------------------------------------------------
    def insert_temporal_facts(self, rows: Iterable[tuple]) -> None:
        """Rows ``(record_id, head, relation, tail, t_happen, t_obs, source)`` (call in a transaction)."""
        self.connection.executemany("INSERT INTO temporal_facts VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def insert_session_dates(self, rows: Iterable[tuple[str, float]]) -> None:
        """Rows ``(session_id, t_obs)`` (call in a transaction)."""
        self.connection.executemany("INSERT INTO session_dates VALUES (?, ?)", rows)

    def temporal_facts(self) -> list[tuple]:
        """Every ``temporal_facts`` row in write order."""
        return self.connection.execute("SELECT * FROM temporal_facts ORDER BY record_id").fetchall()

    def latest_observation(self) -> float | None:
        """The largest ``t_obs`` of a timed fact or dated session, or None."""
        return self.connection.execute(
            "SELECT MAX(t) FROM (SELECT MAX(t_obs) AS t FROM temporal_facts "
            "UNION ALL SELECT MAX(t_obs) FROM session_dates)"
        ).fetchone()[0]

    def fact_times(self, record_ids: Sequence[int]) -> dict[int, tuple[float, float]]:
        """``record_id -> (t_happen, t_obs)`` for those of ``record_ids`` that have times."""
        out: dict[int, tuple[float, float]] = {}
        for start in range(0, len(record_ids), 500):
            chunk = [int(i) for i in record_ids[start : start + 500]]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT record_id, t_happen, t_obs FROM temporal_facts WHERE record_id IN ({marks})"
            out.update((row[0], (row[1], row[2])) for row in self.connection.execute(sql, chunk))
        return out

    def session_dates(self) -> dict[str, float]:
        """``session_id -> t_obs`` of every dated session."""
        return dict(self.connection.execute("SELECT session_id, t_obs FROM session_dates").fetchall())


def _unreadable(error: sqlite3.DatabaseError) -> bool:
    text = str(error).lower()
    return any(words in text for words in ("not a database", "malformed", "disk image", "file is encrypted"))
