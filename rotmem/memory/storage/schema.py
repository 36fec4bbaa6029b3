"""The memory database's schema: the tables each layer registers, and the SQL made from them.

A layer describes the tables it owns (``Table``: columns with their SQLite and Postgres types,
indexes) and hands them to ``register`` when its ``tables`` module is imported; ``LAYERS`` names
those modules, in the order their tables are created and written (a table after the tables it
refers to). Every backend builds its ``CREATE`` statements and its ``INSERT`` statements from this
one registry, so a column is named once, and ``SessionWriter`` writes rows by column name.

``SCHEMA_VERSION`` "2"; ``meta(key, value)`` holds it with the encoder name and the vector width.
A table's ``late_indexes`` are indexes a schema-2 database may lack (added after version 2 was
released; an older rotmem reads a file that has them): a writable opening creates them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

SCHEMA_VERSION = "2"
LAYERS = ("rotmem.memory.tem.tables", "rotmem.memory.temporal.tables")
META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
DIALECTS = ("sqlite", "postgres")


@dataclass(frozen=True)
class Column:
    """One column: its type and constraints in SQLite and in Postgres (``postgres=None``: the same
    text as SQLite; ``sqlite=None``: a Postgres-only column). ``written``: rows name it (False for a
    column the database fills, e.g. a default or a serial)."""

    name: str
    sqlite: str | None
    postgres: str | None = None
    written: bool = True

    def definition(self, dialect: str) -> str | None:
        """``"name TYPE ..."`` in ``dialect``, or None when the column does not exist there."""
        if dialect == "sqlite":
            return None if self.sqlite is None else f"{self.name} {self.sqlite}"
        kind = self.postgres if self.postgres is not None else self.sqlite
        return None if kind is None else f"{self.name} {kind}"


@dataclass(frozen=True)
class Table:
    """A table a layer owns (module docs).

    ``indexes``: ``CREATE INDEX IF NOT EXISTS`` statements made with the table; ``late_indexes``:
    ``(name, statement)`` pairs a database may lack (module docs). ``on_duplicate(error)``: the
    exception to raise instead of the backend's integrity error when a written row's key is taken.
    """

    name: str
    columns: tuple[Column, ...]
    indexes: tuple[str, ...] = ()
    late_indexes: tuple[tuple[str, str], ...] = ()
    on_duplicate: Callable[[Exception], Exception] | None = None

    @cached_property  # a table is frozen: computed once, not for every row written
    def written(self) -> tuple[str, ...]:
        """The columns a written row names, in insert order."""
        return tuple(column.name for column in self.columns if column.written)

    def create(self, dialect: str) -> str:
        """``CREATE TABLE IF NOT EXISTS`` for ``dialect`` (``"sqlite"`` or ``"postgres"``)."""
        lines = [d for column in self.columns if (d := column.definition(dialect)) is not None]
        body = ",\n    ".join(lines)
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n    {body}\n)"

    def insert(self) -> str:
        """``INSERT`` of one written row (``?`` placeholders, ``written`` order)."""
        names = self.written
        return f"INSERT INTO {self.name}({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"


_REGISTRY: dict[str, list[Table]] = {}


def register(layer: str, *tables: Table) -> tuple[Table, ...]:
    """Add ``tables`` to the schema as owned by ``layer`` (its tables module's ``__name__``, one of
    ``LAYERS``); registering a layer again replaces its tables (a module reload)."""
    if layer not in LAYERS:
        raise ValueError(f"{layer!r} is not a memory layer with tables ({LAYERS})")
    taken = {t.name for owner, owned in _REGISTRY.items() if owner != layer for t in owned}
    clash = sorted(taken & {t.name for t in tables})
    if clash:
        raise ValueError(f"{layer}: tables {clash} are already registered by another layer")
    _REGISTRY[layer] = list(tables)
    return tables


def tables() -> list[Table]:
    """Every registered table, layer by layer in ``LAYERS`` order (each layer's module imported)."""
    out: list[Table] = []
    for layer in LAYERS:
        if layer not in _REGISTRY:
            importlib.import_module(layer)
        out += _REGISTRY.get(layer, [])
    return out


def table(name: str) -> Table:
    """The registered table ``name``; a KeyError naming the known ones."""
    for known in tables():
        if known.name == name:
            return known
    raise KeyError(f"no memory table {name!r}; the tables are {[t.name for t in tables()]}")


def create_statements(dialect: str) -> list[str]:
    """Every ``CREATE`` of the schema in ``dialect``: ``meta``, then each table with its indexes
    (the late indexes too: a new database has them all)."""
    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be one of {DIALECTS}, got {dialect!r}")
    statements = [META]
    for known in tables():
        statements += [known.create(dialect), *known.indexes]
    return statements + [statement for _, statement in late_indexes()]


def late_indexes() -> list[tuple[str, str]]:
    """``(name, statement)`` of every table's late indexes (module docs)."""
    return [index for known in tables() for index in known.late_indexes]
