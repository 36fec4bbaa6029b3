"""The tables of ``TemporalMemory`` (registered with ``rotmem.memory.storage.schema``, in the
store's own database) and the SQL that reads them; all times in days since 1970-01-01.

- ``temporal_facts(record_id, head, relation, tail, t_happen, t_obs, source)``: a TEM record's
  times, keyed by its record id; ``source`` is its session id.
- ``session_dates(session_id, t_obs)``: the date of every session added through ``TemporalMemory``.

Late indexes (module docs of ``schema``): ``latest_observation`` is ``MAX(t_obs)``, a lookup with
them and a scan of every timed fact without (38 ms per search at 100k facts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from rotmem.memory.storage.database import MemoryDatabase
from rotmem.memory.storage.schema import Column, Table, register

TEMPORAL_FACTS, SESSION_DATES = register(
    __name__,
    Table(
        "temporal_facts",
        (
            Column("record_id", "INTEGER PRIMARY KEY", "BIGINT PRIMARY KEY"),
            Column("head", "TEXT NOT NULL"),
            Column("relation", "TEXT NOT NULL"),
            Column("tail", "TEXT NOT NULL"),
            Column("t_happen", "REAL NOT NULL", "DOUBLE PRECISION NOT NULL"),
            Column("t_obs", "REAL NOT NULL", "DOUBLE PRECISION NOT NULL"),
            Column("source", "TEXT NOT NULL"),
        ),
        late_indexes=(
            (
                "temporal_facts_by_t_obs",
                "CREATE INDEX IF NOT EXISTS temporal_facts_by_t_obs ON temporal_facts(t_obs)",
            ),
        ),
    ),
    Table(
        "session_dates",
        (
            Column("session_id", "TEXT PRIMARY KEY"),
            Column("t_obs", "REAL NOT NULL", "DOUBLE PRECISION NOT NULL"),
        ),
        late_indexes=(
            (
                "session_dates_by_t_obs",
                "CREATE INDEX IF NOT EXISTS session_dates_by_t_obs ON session_dates(t_obs)",
            ),
        ),
    ),
)


class TimedFactRow(NamedTuple):
    """A row of ``temporal_facts``: a record's times in days since 1970-01-01, its session id."""

    record_id: int
    head: str
    relation: str
    tail: str
    t_happen: float
    t_obs: float
    source: str


def temporal_facts(db: MemoryDatabase) -> list[TimedFactRow]:
    """Every ``temporal_facts`` row in write order."""
    sql = f"SELECT {', '.join(TimedFactRow._fields)} FROM temporal_facts ORDER BY record_id"
    return [TimedFactRow._make(row) for row in db.execute(sql)]


def latest_observation(db: MemoryDatabase) -> float | None:
    """The largest ``t_obs`` of a timed fact or dated session, or None."""
    return db.execute(
        "SELECT MAX(t) FROM (SELECT MAX(t_obs) AS t FROM temporal_facts "
        "UNION ALL SELECT MAX(t_obs) FROM session_dates) AS times"
    ).fetchone()[0]


def fact_times(db: MemoryDatabase, record_ids: Sequence[int]) -> dict[int, tuple[float, float]]:
    """``record_id -> (t_happen, t_obs)`` for those of ``record_ids`` that have times."""
    out: dict[int, tuple[float, float]] = {}
    for start in range(0, len(record_ids), 500):
        chunk = [int(i) for i in record_ids[start : start + 500]]
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT record_id, t_happen, t_obs FROM temporal_facts WHERE record_id IN ({marks})"
        out.update((row[0], (row[1], row[2])) for row in db.execute(sql, chunk))
    return out


def session_dates(db: MemoryDatabase, session_ids: Sequence[str] | None = None) -> dict[str, float]:
    """``session_id -> t_obs`` of every dated session, or of those of ``session_ids``."""
    sql = "SELECT session_id, t_obs FROM session_dates"
    if session_ids is None:
        return dict(db.execute(sql).fetchall())
    ids, out = list(dict.fromkeys(session_ids)), {}
    for first in range(0, len(ids), 500):  # under every SQLite build's limit on parameters
        chunk = ids[first : first + 500]
        out.update(db.execute(f"{sql} WHERE session_id IN ({', '.join('?' * len(chunk))})", chunk).fetchall())
    return out
