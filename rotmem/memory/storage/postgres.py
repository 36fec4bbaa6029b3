"""The memory database on a Postgres server (psycopg 3): the same tables as the SQLite file
(``rotmem.memory.storage.schema``, in Postgres types), one schema per namespace
(``rotmem_<namespace>``), for deployments with several server processes.

Vectors are stored as ``BYTEA`` (float32 little-endian, as in SQLite) and searched by the same
in-memory index (``rotmem.index``) that each process rebuilds on open and extends with the rows
other processes commit; pgvector is not used (not packaged for this Debian release; see
docs/memory.md). Writers of one namespace take a transaction-scoped advisory lock, so ids are
handed out in commit order exactly as under SQLite's write lock, and ``data_version`` (the largest
fact and passage ids) tells a reader what is new. Readers never lock: ``read_only`` sessions are
``default_transaction_read_only``. Every commit is as durable as the server's ``synchronous_commit``
(on by default).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rotmem.extras import require
from rotmem.memory.storage.database import MemoryDatabase, MemoryDatabaseError, check_namespace
from rotmem.memory.storage.schema import SCHEMA_VERSION, create_statements, late_indexes


def schema_name(namespace: str) -> str:
    """The Postgres schema that holds ``namespace``."""
    return f"rotmem_{check_namespace(namespace)}"


def _connect(dsn: str) -> Any:
    psycopg = require("psycopg", "a Postgres memory")
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise MemoryDatabaseError(f"cannot connect to the Postgres memory ({first})") from None


class PostgresDatabase(MemoryDatabase):
    """One namespace of a memory on a Postgres server (see the module docs).

    Args:
        dsn: a libpq connection string (``postgresql://user@host:port/db`` or ``host=/run/... dbname=...``).
        namespace: the tenant (``check_namespace``); created on the first writable opening.
        read_only: never write; a namespace that does not exist raises ``MemoryDatabaseError``.
    """

    arrival = "arrival"

    def __init__(self, dsn: str, namespace: str = "default", *, read_only: bool = False):
        psycopg = require("psycopg", "a Postgres memory")
        self.integrity_error = psycopg.errors.UniqueViolation
        self._operational_error = psycopg.OperationalError
        self.namespace, self.schema = namespace, schema_name(namespace)
        self.path = f"postgres namespace {namespace!r}"
        self.read_only = bool(read_only)
        self.connection = _connect(dsn)
        try:
            with self.readable():
                self._open()
        except BaseException:
            self.connection.close()
            raise

    def _open(self) -> None:
        exists = self.execute("SELECT 1 FROM pg_namespace WHERE nspname = ?", (self.schema,)).fetchone()
        if self.read_only:
            if not exists:
                raise MemoryDatabaseError(f"{self.path}: no such memory namespace (nothing was created)")
            self.execute("SET default_transaction_read_only = on")
        elif not exists or self._version() != SCHEMA_VERSION or not self._has_late_indexes():
            with self.transaction():  # the advisory lock serialises concurrent creators
                self.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                self._use_schema()
                for statement in create_statements("postgres"):
                    self.execute(statement)
                if self.get_meta("schema_version") is None:
                    self.set_meta("schema_version", SCHEMA_VERSION)
        self._use_schema()
        version = self._version()
        if version != SCHEMA_VERSION:
            raise MemoryDatabaseError(
                f"{self.path}: memory schema version {version}, this rotmem reads {SCHEMA_VERSION}"
            )

    def _use_schema(self) -> None:
        self.execute(f'SET search_path TO "{self.schema}"')

    def _has_late_indexes(self) -> bool:
        found = self.execute("SELECT indexname FROM pg_indexes WHERE schemaname = ?", (self.schema,))
        names = {row[0] for row in found.fetchall()}
        return all(name in names for name, _ in late_indexes())

    def _version(self) -> str | None:
        row = self.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = ? AND table_name = 'meta'",
            (self.schema,),
        ).fetchone()
        if row is None:
            return None
        found = self.execute(f'SELECT value FROM "{self.schema}".meta WHERE key = ?', ("schema_version",))
        value = found.fetchone()
        return None if value is None else value[0]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.connection.execute(sql.replace("?", "%s"), tuple(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self.connection.cursor() as cursor:
            cursor.executemany(sql.replace("?", "%s"), [tuple(row) for row in rows])

    @contextmanager
    def readable(self) -> Iterator[None]:
        """A lost or refused connection becomes one ``MemoryDatabaseError`` line."""
        try:
            yield
        except self._operational_error as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise MemoryDatabaseError(f"{self.path}: the Postgres server failed ({first})") from None

    @contextmanager
    def transaction(self) -> Iterator[PostgresDatabase]:
        """One transaction holding the namespace's advisory lock; any exception rolls it back."""
        if self.read_only:
            raise MemoryDatabaseError(f"{self.path}: opened read-only; nothing was written")
        with self.readable(), self.connection.transaction():
            self.execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (self.schema,))
            yield self

    def data_version(self) -> tuple[int, int]:
        """The largest fact and passage ids: they grow with every commit that adds rows."""
        row = self.execute(
            "SELECT (SELECT COALESCE(MAX(id), -1) FROM facts), (SELECT COALESCE(MAX(id), -1) FROM passages)"
        ).fetchone()
        return int(row[0]), int(row[1])

    def close(self) -> None:
        self.connection.close()


def namespace_exists(dsn: str, namespace: str) -> bool:
    """Whether ``namespace`` has been created on the server at ``dsn``."""
    connection = _connect(dsn)
    try:
        found = connection.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema_name(namespace),))
        return found.fetchone() is not None
    finally:
        connection.close()


def drop_namespace(dsn: str, namespace: str) -> bool:
    """Delete every record of ``namespace`` (its schema); returns whether it existed."""
    schema = schema_name(namespace)
    connection = _connect(dsn)
    try:
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (schema,))
            existed = connection.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)
            ).fetchone()
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        return existed is not None
    finally:
        connection.close()
