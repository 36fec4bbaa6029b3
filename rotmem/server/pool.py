"""The namespaces of a memory service: one ``TemporalMemory`` per tenant, opened on first use.

``store`` is a directory (SQLite: one file ``<namespace>.db`` per namespace, created on the first
write) or a Postgres DSN (one schema per namespace, ``rotmem.memory.postgres``). A store is not
thread-safe, so every use of a namespace holds its lock; namespaces do not wait for each other.
Reads of a namespace that was never written see an empty memory and create nothing. Deleting a
namespace removes every record it holds (its file and WAL sidecars, or its schema); nothing else
is ever deleted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rotmem.memory import TemporalMemory
from rotmem.memory.backends import is_postgres
from rotmem.memory.database import MemoryDatabaseError
from rotmem.memory.sql_database import check_namespace
from rotmem.server.batching import ServiceEncoder


@dataclass
class Tenant:
    """One namespace's open memory and the lock that serialises its use."""

    memory: TemporalMemory
    lock: threading.Lock = field(default_factory=threading.Lock)


class MemoryPool:
    """Open memories by namespace (module docs).

    Args:
        store: a directory for SQLite files, or a ``postgresql://`` DSN.
        encoder: the text encoder every namespace embeds with (one model in memory, wrapped in a
            ``ServiceEncoder`` so concurrent requests are embedded in batches).
        extractor: a ``FactExtractor`` for sessions sent without facts (None: facts are required).
        memory_options: more ``TemporalMemory`` / ``TEMStore`` arguments (e.g. ``synchronous``).
    """

    def __init__(self, store: str, encoder: Any, extractor: Any = None, **memory_options: Any):
        self.store, self.extractor = str(store), extractor
        self.encoder = encoder if isinstance(encoder, ServiceEncoder) else ServiceEncoder(encoder)
        self.postgres = is_postgres(self.store)
        self.memory_options = memory_options
        if not self.postgres:
            folder = Path(self.store)
            if not folder.is_dir():
                raise ValueError(f"{self.store}: the store directory does not exist (create it first)")
        self._tenants: dict[str, Tenant] = {}
        self._lock = threading.Lock()

    def path(self, namespace: str) -> str:
        """Where ``namespace`` lives: its SQLite file, or the DSN."""
        return self.store if self.postgres else str(Path(self.store) / f"{check_namespace(namespace)}.db")

    def exists(self, namespace: str) -> bool:
        """Whether ``namespace`` has been written (or opened for writing) before."""
        check_namespace(namespace)
        if namespace in self._tenants:
            return True
        if self.postgres:
            from rotmem.memory.postgres import namespace_exists

            return namespace_exists(self.store, namespace)
        return Path(self.path(namespace)).is_file()

    def _open(self, namespace: str) -> TemporalMemory:
        options = dict(self.memory_options)
        if self.postgres:
            options["namespace"] = namespace
        return TemporalMemory(self.path(namespace), encoder=self.encoder, extractor=self.extractor, **options)

    @contextmanager
    def use(self, namespace: str, create: bool) -> Iterator[TemporalMemory | None]:
        """The namespace's memory, held under its lock; None when it does not exist and not ``create``."""
        with self._lock:
            tenant = self._tenants.get(namespace)
            if tenant is None:
                if not create and not self.exists(namespace):
                    tenant = None
                else:
                    tenant = self._tenants[namespace] = Tenant(self._open(namespace))
        if tenant is None:
            yield None
            return
        with tenant.lock:
            yield tenant.memory

    def delete(self, namespace: str) -> bool:
        """Remove every record of ``namespace``; returns whether it held anything."""
        check_namespace(namespace)
        with self._lock:
            tenant = self._tenants.pop(namespace, None)
            if tenant is not None:
                with tenant.lock:
                    tenant.memory.close()
            if self.postgres:
                from rotmem.memory.postgres import drop_namespace

                return drop_namespace(self.store, namespace)
            existed = False
            for suffix in ("", "-wal", "-shm"):
                file = Path(self.path(namespace) + suffix)
                if file.exists():
                    file.unlink()
                    existed = True
            return existed

    def ready(self) -> str | None:
        """None when the storage answers, else why not (one line)."""
        try:
            if self.postgres:
                from rotmem.memory.postgres import namespace_exists

                namespace_exists(self.store, "readiness_probe")
            elif not Path(self.store).is_dir():
                return f"{self.store}: the store directory is gone"
        except MemoryDatabaseError as error:
            return str(error)
        return None

    def close(self) -> None:
        with self._lock:
            for tenant in self._tenants.values():
                with tenant.lock:
                    tenant.memory.close()
            self._tenants.clear()
