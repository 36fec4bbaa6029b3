"""The memory database on SQLite: opening (and upgrading schema 1), transactions, SQLite's errors.

One file (or ``":memory:"``), stdlib ``sqlite3``, WAL journal (file databases), ``synchronous=FULL``
by default so a committed session survives a crash of the process or the machine. Writes happen
only inside ``transaction()`` (``BEGIN IMMEDIATE`` … ``COMMIT``; any exception rolls back, so a
failed or interrupted write leaves the database as it was).

Opening: ``read_only=True`` opens the file with SQLite's ``mode=ro`` (never a write, never the
write lock: works on a file the process may not write, and beside a writer in the middle of a
transaction); a missing file, a directory, an empty or foreign SQLite file (tables but no rotmem
``meta``) raise ``MemoryDatabaseError`` naming the file. A writable opening takes the write lock
only when the schema must be created or upgraded; a new file is switched to WAL after the busy
timeout is set, retried while another process holds the lock, so many processes may open one new
file at once. The tables are the layers' (``rotmem.memory.storage.schema``; TEM's in
``rotmem.memory.tem.tables``, the times of ``TemporalMemory`` in ``rotmem.memory.temporal.tables``).

A schema-1 file is upgraded in place when opened (the new columns are NULL, ``session_dates`` is
filled from ``temporal_facts``).

Vectors are float32 unit rows stored as little-endian BLOBs; the in-memory index is rebuilt from
them when a store is opened and extended with rows other connections commit (``data_version``).
A file that is not a readable SQLite database (truncated, overwritten) raises
``MemoryDatabaseError``, a ``ValueError`` naming the file.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rotmem.memory.storage.database import MemoryDatabase, MemoryDatabaseError
from rotmem.memory.storage.schema import SCHEMA_VERSION, create_statements, late_indexes

SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")
BUSY_TIMEOUT_S = 30.0  # how long a statement waits for another process's lock

_UPGRADE_FROM_1 = """
ALTER TABLE facts ADD COLUMN source TEXT;
ALTER TABLE passages ADD COLUMN source TEXT;
INSERT OR IGNORE INTO session_dates SELECT source, MIN(t_obs) FROM temporal_facts GROUP BY source;
"""


class SQLiteDatabase(MemoryDatabase):
    """The SQLite file behind a ``TEMStore`` (see the module docs). Not thread-safe: a caller that
    shares one across threads serialises its use (``rotmem.server`` holds a lock per namespace).

    Args:
        path: the file, or ``":memory:"``.
        synchronous: SQLite's ``synchronous`` pragma (``SYNCHRONOUS_MODES``).
        read_only: open without ever writing (the file must be a rotmem memory database).
    """

    arrival = "rowid"
    integrity_error = sqlite3.IntegrityError

    def __init__(self, path: str = ":memory:", synchronous: str = "FULL", *, read_only: bool = False):
        synchronous = synchronous.upper()
        if synchronous not in SYNCHRONOUS_MODES:
            raise ValueError(f"synchronous must be one of {SYNCHRONOUS_MODES}, got {synchronous!r}")
        self.path = str(path)
        self.read_only = bool(read_only)
        self.connection = self._connect()
        try:
            with self.readable():
                self._open(synchronous)
        except BaseException:
            self.connection.close()
            raise

    def _connect(self) -> sqlite3.Connection:
        if self.path == ":memory:":
            if self.read_only:
                raise MemoryDatabaseError(":memory: cannot be opened read-only (it would always be empty)")
            return sqlite3.connect(
                self.path, isolation_level=None, timeout=BUSY_TIMEOUT_S, check_same_thread=False
            )
        file = Path(self.path)
        if file.is_dir():
            raise MemoryDatabaseError(f"{self.path}: is a directory, not a memory database file")
        if self.read_only and not file.is_file():
            raise MemoryDatabaseError(f"{self.path}: no such memory database (nothing was created)")
        if not file.parent.is_dir():
            raise MemoryDatabaseError(f"{self.path}: the directory {str(file.parent)!r} does not exist")
        try:
            if self.read_only:
                return self._connect_read_only(file)
            return sqlite3.connect(
                self.path, isolation_level=None, timeout=BUSY_TIMEOUT_S, check_same_thread=False
            )
        except sqlite3.OperationalError as error:
            raise MemoryDatabaseError(f"{self.path}: cannot open the memory database ({error})") from None

    def _connect_read_only(self, file: Path) -> sqlite3.Connection:
        """``mode=ro``. A WAL file whose ``-shm`` is missing and cannot be created (a directory this
        process may not write) is opened ``immutable``: SQLite cannot read it otherwise, and no
        writer is active on it (an active writer keeps its ``-wal`` and ``-shm`` beside it)."""
        uri = file.resolve().as_uri()
        sidecars = [Path(f"{file}-wal"), Path(f"{file}-shm")]
        if not os.access(file.parent, os.W_OK) and not any(p.exists() for p in sidecars):
            uri += "?mode=ro&immutable=1"
        else:
            uri += "?mode=ro"
        return sqlite3.connect(
            uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_S, check_same_thread=False
        )

    def _open(self, synchronous: str) -> None:
        self.connection.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        version = self._schema_version()
        if self.read_only:
            if version != SCHEMA_VERSION:
                raise MemoryDatabaseError(
                    f"{self.path}: memory schema version {version}; open it once for writing (e.g. rotmem "
                    f"memory add) to upgrade it to version {SCHEMA_VERSION}"
                )
            self.connection.execute("PRAGMA query_only=ON")
            return
        if self.path != ":memory:":
            self._use_wal()
        self.connection.execute(f"PRAGMA synchronous={synchronous}")
        self.connection.execute("PRAGMA foreign_keys=ON")
        if version == SCHEMA_VERSION and self._has_late_indexes():
            return
        with self.transaction():
            version = self._schema_version()  # another process may have created it meanwhile
            if version != SCHEMA_VERSION:
                # CREATE ... IF NOT EXISTS: a schema-1 file keeps its old tables
                for statement in create_statements("sqlite"):
                    self.connection.execute(statement)
                if version == "1":
                    self._run_script(_UPGRADE_FROM_1)
                self.set_meta("schema_version", SCHEMA_VERSION)
            for _, statement in late_indexes():
                self.connection.execute(statement)

    def _has_late_indexes(self) -> bool:
        found = self.connection.execute("SELECT name FROM sqlite_master WHERE type='index'")
        names = {row[0] for row in found}
        return all(name in names for name, _ in late_indexes())

    def _schema_version(self) -> str | None:
        """The stored schema version; None for a database without tables (new); raises
        ``MemoryDatabaseError`` for a foreign database or a newer schema."""
        tables = {
            row[0] for row in self.connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if not tables:
            if self.read_only:
                raise MemoryDatabaseError(f"{self.path}: an empty database, not a rotmem memory database")
            return None
        version = self.get_meta("schema_version") if "meta" in tables else None
        if version is None:
            raise MemoryDatabaseError(
                f"{self.path}: not a rotmem memory database (it holds other tables: {sorted(tables)[:5]}); "
                "left unchanged"
            )
        if version not in ("1", SCHEMA_VERSION):
            raise MemoryDatabaseError(
                f"{self.path}: memory schema version {version}, this rotmem reads {SCHEMA_VERSION} "
                "(a newer rotmem wrote it)"
            )
        return version

    def _use_wal(self) -> None:
        """Switch the file to WAL (persistent), retrying while another process holds a lock: the
        switch needs an exclusive lock, and SQLite may return "locked" at once without waiting."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                mode = self.connection.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() != "wal":
                    mode = self.connection.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise MemoryDatabaseError(f"{self.path}: SQLite refused WAL mode (got {mode!r})")
                return
            except sqlite3.OperationalError as error:
                if not _busy(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _run_script(self, script: str) -> None:
        for statement in script.split(";"):
            if statement.strip():
                self.connection.execute(statement)

    @contextmanager
    def readable(self) -> Iterator[None]:
        """Turn SQLite's "not a database" / "malformed" / "readonly" errors into ``MemoryDatabaseError``."""
        try:
            yield
        except sqlite3.DatabaseError as error:
            if _read_only(error):
                raise MemoryDatabaseError(
                    f"{self.path}: cannot write the memory database ({error})"
                ) from None
            if not _unreadable(error):
                raise
            raise MemoryDatabaseError(
                f"{self.path}: not a readable rotmem memory database ({error}); restore it from a backup "
                "or point to another file"
            ) from None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.connection.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.connection.executemany(sql, rows)

    def data_version(self) -> int:
        """SQLite's ``data_version``: changes whenever another connection commits to the file."""
        return int(self.connection.execute("PRAGMA data_version").fetchone()[0])

    def close(self) -> None:
        self.connection.close()

    @contextmanager
    def transaction(self) -> Iterator[SQLiteDatabase]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; any exception rolls everything back and re-raises."""
        if self.read_only:
            raise MemoryDatabaseError(f"{self.path}: opened read-only; nothing was written")
        with self.readable():
            self.connection.execute("BEGIN IMMEDIATE")
            try:
                yield self
            except BaseException:
                self.connection.execute("ROLLBACK")
                raise
            self.connection.execute("COMMIT")


def _busy(error: sqlite3.OperationalError) -> bool:
    text = str(error).lower()
    return "locked" in text or "busy" in text


def _read_only(error: sqlite3.DatabaseError) -> bool:
    return "readonly" in str(error).lower() or "read-only" in str(error).lower()


def _unreadable(error: sqlite3.DatabaseError) -> bool:
    text = str(error).lower()
    return any(words in text for words in ("not a database", "malformed", "disk image", "file is encrypted"))
