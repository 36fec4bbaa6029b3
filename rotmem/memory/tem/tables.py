"""TEM's tables (registered with ``rotmem.memory.storage.schema``) and the SQL that reads them.

- ``sessions(session_id, session_index, text, created_at)`` (+ ``arrival`` on Postgres: the
  order sessions arrived in; SQLite's ``rowid`` plays that part).
- ``facts(id, subject, relation, object, group_key, relation_type, session_id, session_index,
  span_start, span_end, created_at, historical, vector, source)``: append-only; only
  ``historical`` is ever updated (recomputed per version group at write time, 0 → 1 only).
- ``passages(id, kind, session_id, session_index, position, text, created_at, vector, source)``:
  the side store of dialogue turns and event summaries.

``source`` (schema 2) is the provenance of a row inside its session: the ids of the dialogue turns
a fact was extracted from, or a turn's own id, joined by ``SOURCE_SEPARATOR``; NULL when unknown.
Vectors are float32 unit rows stored as little-endian bytes (``BLOB``/``BYTEA``).

Late index (module docs of ``schema``): ``sessions_by_index``, so that ``next_session_index`` (every
write's ``MAX(session_index)``) is a lookup, not a scan of every session (5 ms per write at 44k
sessions, most of a one-fact add's CPU).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from rotmem.memory.records import DuplicateSessionError, Passage, Record
from rotmem.memory.storage.database import MemoryDatabase
from rotmem.memory.storage.schema import Column, Table, register

SOURCE_SEPARATOR = "\x1f"


def _duplicate_session(error: Exception) -> Exception:
    return DuplicateSessionError(f"session id already stored ({error}); nothing written")


SESSIONS, FACTS, PASSAGES = register(
    __name__,
    Table(
        "sessions",
        (
            Column("session_id", "TEXT PRIMARY KEY"),
            Column("session_index", "INTEGER NOT NULL", "BIGINT NOT NULL"),
            Column("text", "TEXT"),
            Column("created_at", "REAL NOT NULL", "DOUBLE PRECISION NOT NULL"),
            Column("arrival", None, "BIGSERIAL", written=False),
        ),
        late_indexes=(
            (
                "sessions_by_index",
                "CREATE INDEX IF NOT EXISTS sessions_by_index ON sessions(session_index)",
            ),
        ),
        on_duplicate=_duplicate_session,
    ),
    Table(
        "facts",
        (
            Column("id", "INTEGER PRIMARY KEY", "BIGINT PRIMARY KEY"),
            Column("subject", "TEXT NOT NULL"),
            Column("relation", "TEXT NOT NULL"),
            Column("object", "TEXT NOT NULL"),
            Column("group_key", "TEXT NOT NULL", 'TEXT COLLATE "C" NOT NULL'),
            Column("relation_type", "TEXT"),
            Column("session_id", "TEXT NOT NULL REFERENCES sessions(session_id)"),
            Column("session_index", "INTEGER NOT NULL", "BIGINT NOT NULL"),
            Column("span_start", "INTEGER"),
            Column("span_end", "INTEGER"),
            Column("created_at", "REAL NOT NULL", "DOUBLE PRECISION NOT NULL"),
            Column("historical", "INTEGER NOT NULL DEFAULT 0", written=False),
            Column("vector", "BLOB NOT NULL", "BYTEA NOT NULL"),
            Column("source", "TEXT"),
        ),
        indexes=(
            "CREATE INDEX IF NOT EXISTS facts_by_group ON facts(group_key, session_index)",
            "CREATE INDEX IF NOT EXISTS facts_current ON facts(group_key, session_index) "
            "WHERE historical = 0",
        ),
    ),
    Table(
        "passages",
        (
            Column("id", "INTEGER PRIMARY KEY", "BIGINT PRIMARY KEY"),
            Column("kind", "TEXT NOT NULL CHECK (kind IN ('turn', 'summary'))"),
            Column("session_id", "TEXT NOT NULL REFERENCES sessions(session_id)"),
            Column("session_index", "INTEGER NOT NULL", "BIGINT NOT NULL"),
            Column("position", "INTEGER NOT NULL"),
            Column("text", "TEXT NOT NULL"),
            Column("created_at", "REAL NOT NULL", "DOUBLE PRECISION NOT NULL"),
            Column("vector", "BLOB NOT NULL", "BYTEA NOT NULL"),
            Column("source", "TEXT"),
        ),
        indexes=("CREATE INDEX IF NOT EXISTS passages_by_kind ON passages(kind, id)",),
    ),
)


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


class StoredPassage(NamedTuple):
    """A row of ``passages`` as read back (``PASSAGE_COLUMNS``)."""

    id: int
    kind: str
    text: str
    session_id: str
    session_index: int
    position: int
    source: str | None


FACT_COLUMNS = ", ".join(StoredFact._fields)
PASSAGE_COLUMNS = ", ".join(StoredPassage._fields)


def join_sources(sources: Sequence[str]) -> str | None:
    """The stored form of a row's source ids (None for none)."""
    return SOURCE_SEPARATOR.join(sources) if sources else None


def split_sources(value: str | None) -> tuple[str, ...]:
    """Source ids from their stored form."""
    return tuple(value.split(SOURCE_SEPARATOR)) if value else ()


def record_of(row: StoredFact, weight: float) -> Record:
    """The ``Record`` of a stored fact (unscored), with its relation's ``weight``."""
    return Record(
        subject=row.subject,
        relation=row.relation,
        object=row.object,
        session_id=row.session_id,
        session_index=int(row.session_index),
        historical=bool(row.historical),
        score=None,
        id=int(row.id),
        relation_type=row.relation_type,
        weight=weight,
        span=None if row.span_start is None else (int(row.span_start), int(row.span_end)),
        created_at=float(row.created_at),
        sources=split_sources(row.source),
    )


def passage_of(row: StoredPassage, score: float | None) -> Passage:
    """The ``Passage`` of a stored passage row, with ``score``."""
    sources = split_sources(row.source)
    return Passage(
        row.kind, row.text, row.session_id, row.session_index, row.position, sources, score, row.id
    )


# --- reads ------------------------------------------------------------------------------------
def existing_sessions(db: MemoryDatabase, session_ids: Sequence[str]) -> list[str]:
    """Those of ``session_ids`` already stored."""
    found: list[str] = []
    for start in range(0, len(session_ids), 500):
        chunk = list(session_ids[start : start + 500])
        marks = ",".join("?" * len(chunk))
        rows = db.execute(f"SELECT session_id FROM sessions WHERE session_id IN ({marks})", chunk).fetchall()
        found.extend(row[0] for row in rows)
    return found


def next_session_index(db: MemoryDatabase) -> int:
    """One past the largest stored session index (0 for an empty memory)."""
    return int(db.execute("SELECT COALESCE(MAX(session_index), -1) + 1 FROM sessions").fetchone()[0])


def fetch_facts(db: MemoryDatabase, ids: Sequence[int]) -> dict[int, StoredFact]:
    """Fact rows by id (ids not stored are left out)."""
    return {row[0]: StoredFact._make(row) for row in db.fetch_by_id("facts", FACT_COLUMNS, ids)}


def fetch_passages(db: MemoryDatabase, ids: Sequence[int]) -> dict[int, StoredPassage]:
    """Passage rows by id (ids not stored are left out)."""
    return {row[0]: StoredPassage._make(row) for row in db.fetch_by_id("passages", PASSAGE_COLUMNS, ids)}


def list_facts(
    db: MemoryDatabase, group_key: str | None = None, group_prefix: str | None = None, after_id: int = -1
) -> list[StoredFact]:
    """Fact rows in source order (session index, then id): all, one version group's, or those
    whose group key starts with ``group_prefix`` (one subject's); only ids above ``after_id``."""
    where, params = "WHERE id > ?", (int(after_id),)
    if group_key is not None:
        where, params = where + " AND group_key = ?", (*params, group_key)
    elif group_prefix is not None:
        upper = group_prefix[:-1] + chr(ord(group_prefix[-1]) + 1)  # keeps the index usable
        where, params = where + " AND group_key >= ? AND group_key < ?", (*params, group_prefix, upper)
    sql = f"SELECT {FACT_COLUMNS} FROM facts {where} ORDER BY session_index, id"
    return [StoredFact._make(row) for row in db.execute(sql, params)]


def list_passages(db: MemoryDatabase, kind: str | None = None, after_id: int = -1) -> list[StoredPassage]:
    """Passage rows in source order (session index, position), of one ``kind`` or all; only ids
    above ``after_id``."""
    where, params = "WHERE id > ?", (int(after_id),)
    if kind:
        where, params = where + " AND kind = ?", (*params, kind)
    sql = f"SELECT {PASSAGE_COLUMNS} FROM passages {where} ORDER BY session_index, position, id"
    return [StoredPassage._make(row) for row in db.execute(sql, params)]


def list_sessions(db: MemoryDatabase) -> list[tuple[str, int, float]]:
    """``(session_id, session_index, created_at)`` rows in session order."""
    order = f"session_index, {db.arrival}"
    return db.execute(
        f"SELECT session_id, session_index, created_at FROM sessions ORDER BY {order}"
    ).fetchall()


# --- the one update -----------------------------------------------------------------------------
def recompute_status(db: MemoryDatabase, group_keys: Iterable[str]) -> None:
    """TEM status for whole version groups: historical iff below the group's latest session (call
    inside a transaction, after the group's new facts are written).

    The latest session index of a group never decreases (nothing is deleted), so a historical
    record stays historical; only current records (new ones included) can change, and only
    those are visited (through the partial index ``facts_current``).
    """
    keys = sorted(set(group_keys))
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        db.execute(
            "UPDATE facts SET historical = 1 WHERE historical = 0 AND group_key IN "
            f"({','.join('?' * len(chunk))}) AND session_index < (SELECT MAX(f2.session_index) "
            "FROM facts AS f2 WHERE f2.group_key = facts.group_key)",
            chunk,
        )
