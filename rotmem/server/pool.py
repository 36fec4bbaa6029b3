"""The namespaces of a memory service: one ``TemporalMemory`` per tenant, opened on first use, and
the ``BestMemory`` its searches go through (hybrid + the question's time constraint; no re-rank,
which needs a fit: docs/memory.md, "The memory as a service").

``store`` is a directory (SQLite: one file ``<namespace>.db`` per namespace, created on the first
write) or a Postgres DSN (one schema per namespace, ``rotmem.memory.storage.postgres``). A store is not
thread-safe, so every use of a namespace holds its lock; namespaces do not wait for each other.
Searches are embedded outside the lock (``ServiceEncoder``, batched across namespaces) and the
concurrent searches of one namespace run as one batch under its lock (``BestMemory.retrieve_many``:
one hybrid pass, one dense index search per kind, for the whole batch). Adds likewise: their texts
embedded outside the lock, the concurrent adds of a namespace written in one transaction (one
commit, one fsync), each acknowledged once it is committed.
Reads of a namespace that was never written see an empty memory and create nothing. Deleting a
namespace removes every record it holds (its file and WAL sidecars, or its schema); nothing else
is ever deleted.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rotmem.memory import TemporalMemory
from rotmem.memory.records import SessionResult, check_question
from rotmem.memory.retrieval.best import BestMemory
from rotmem.memory.storage.database import MemoryDatabaseError, check_namespace
from rotmem.memory.storage.open import is_postgres
from rotmem.memory.tem.tense import present_order
from rotmem.memory.temporal.records import Query, TemporalRecord
from rotmem.server.batching import Batcher, ServiceEncoder

RETRIEVERS = ("best", "temporal")


@dataclass(frozen=True)
class SearchResult:
    """One search's records, best first (``BestMemory.retrieve``), the same records in TEM's
    presentation order (``rotmem.memory.tem.tense.present_order``: what the rendered evidence shows),
    and the query mode (None when empty)."""

    records: list[TemporalRecord]
    mode: str | None
    presented: list[TemporalRecord] = field(default_factory=list)


def _each_alone(run: Callable[[list[Any]], list[Any]], items: list[Any]) -> list[Any]:
    """``run(items)``; when that raises ``ValueError`` (a caller's bad input) for several items,
    ``run`` of each item alone, so that one caller's mistake is not every caller's: per item, its
    result or its error."""
    try:
        return run(items)
    except ValueError:
        if len(items) == 1:
            raise
    out: list[Any] = []
    for item in items:
        try:
            out += run([item])
        except ValueError as error:
            out.append(error)
    return out


@dataclass
class Tenant:
    """One namespace's open memory, the ``BestMemory`` that searches it, the lock that serialises
    their use, and its search and write batches."""

    memory: TemporalMemory
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False
    searches: Batcher | None = None
    retriever: str = "best"
    best: BestMemory | None = None
    frozen_at: int = 0  # the facts held when the heap was last settled (``_settle_heap``)
    encoder: ServiceEncoder | None = None  # the pool's: the writes' vectors were embedded by it
    writes: Batcher | None = None

    def __post_init__(self) -> None:
        self.searches = Batcher(self._search_batch)
        self.writes = Batcher(self._write_batch)
        if self.retriever == "best":
            self.best = BestMemory(self.memory, rerank=False, present=True)  # module docs

    def _search_batch(self, items: list[tuple[Query, np.ndarray]]) -> list[SearchResult | ValueError]:
        """The batch's results (``_each_alone`` when it fails on bad input), then ``_settle_heap``."""
        with self.lock:
            if self.closed:  # deleted while the batch waited
                return [SearchResult([], None) for _ in items]
            try:
                return _each_alone(self._search, items)
            finally:
                self._settle_heap()

    def _write_batch(self, items: list[tuple[dict[str, Any], dict[str, np.ndarray]]]) -> list[Any]:
        """The sessions of concurrent adds (each with the vectors of its texts) in one transaction:
        one commit for all (``_each_alone`` when it fails on a caller's mistake: nothing is written
        then)."""
        # a text two adds embedded keeps the first add's vector: written one after the other, the
        # later add would have reused a fact's from the store's embedding cache (encoder batches may
        # round apart); a turn or summary repeated across the batch gets it too
        table: dict[str, np.ndarray] = {}
        for _, vectors in items:
            for text, vector in vectors.items():
                table.setdefault(text, vector)
        with self.lock, self.encoder.using(table):
            if self.closed:  # deleted while the batch waited
                raise RuntimeError("the namespace was deleted during this write; nothing was written")
            return _each_alone(self.memory.add_sessions, [session for session, _ in items])

    def _settle_heap(self) -> None:
        """Once the namespace holds at least twice the facts it held the last time (its first
        search builds the retriever's tables), move every object the process holds out of the
        cyclic garbage collector's reach (``gc.freeze``): a full collection otherwise walks the
        tables' records, 0.5 s at 100k facts, and every request waits for it (docs/memory.md,
        "Under load"). Objects made afterwards are collected as usual."""
        facts = len(self.memory.store)
        if facts and facts >= 2 * self.frozen_at:
            gc.freeze()
            self.frozen_at = facts

    def _search(self, items: list[tuple[Query, np.ndarray]]) -> list[SearchResult]:
        queries = [query for query, _ in items]
        vectors = np.stack([vector for _, vector in items])
        if self.best is None:  # TemporalMemory: its records come in TEM's presentation order
            return [
                SearchResult(records, self.memory.time_query(q.question, q.now)[0].mode.value, records)
                if records
                else SearchResult([], None)
                for q, records in zip(queries, self.memory.retrieve_many(queries, vectors), strict=True)
            ]
        found = self.best.retrieve_many(queries, vectors)
        out = []
        for query, records in zip(queries, found, strict=True):
            if not records:
                out.append(SearchResult([], None))
                continue
            tq, now_day = self.memory.time_query(query.question, query.now)
            group = self.memory.store.version_group
            presented = present_order(records, query.question, tq.span, now_day, group)
            out.append(SearchResult(records, tq.mode.value, presented))
        return out


class MemoryPool:
    """Open memories by namespace (module docs).

    Args:
        store: a directory for SQLite files, or a ``postgresql://`` DSN.
        encoder: the text encoder every namespace embeds with (one model in memory, wrapped in a
            ``ServiceEncoder`` so concurrent requests are embedded in batches).
        extractor: a ``FactExtractor`` for sessions sent without facts (None: facts are required).
        retriever: ``"best"`` (``BestMemory``: the question's time constraint applied, 0.92 against
            0.46 MRR on the temporal-QA test split, docs/memory.md; its tables grow with each write)
            or ``"temporal"`` (``TemporalMemory.retrieve_many`` alone: one index scan per batch).
        memory_options: more ``TemporalMemory`` / ``TEMStore`` arguments (e.g. ``synchronous``).
    """

    def __init__(
        self,
        store: str,
        encoder: Any,
        extractor: Any = None,
        retriever: str = "best",
        **memory_options: Any,
    ):
        if retriever not in RETRIEVERS:
            raise ValueError(f"unknown retriever {retriever!r}; expected one of {RETRIEVERS}")
        self.store, self.extractor, self.retriever = str(store), extractor, retriever
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
            from rotmem.memory.storage.postgres import namespace_exists

            return namespace_exists(self.store, namespace)
        return Path(self.path(namespace)).is_file()

    def _open(self, namespace: str) -> TemporalMemory:
        options = dict(self.memory_options)
        if self.postgres:
            options["namespace"] = namespace
        return TemporalMemory(self.path(namespace), encoder=self.encoder, extractor=self.extractor, **options)

    def _tenant(self, namespace: str, create: bool) -> Tenant | None:
        with self._lock:
            tenant = self._tenants.get(namespace)
            if tenant is None and (create or self.exists(namespace)):
                memory = self._open(namespace)
                tenant = Tenant(memory, retriever=self.retriever, encoder=self.encoder)
                self._tenants[namespace] = tenant
            return tenant

    def search(self, namespace: str, question: str, k: int, now: float | None) -> SearchResult:
        """The top ``k`` records for ``question`` asked on day ``now`` (None: the latest session date);
        embedded outside the namespace lock, searched in one batch with the namespace's concurrent
        searches. A blank question is refused (``ValueError``) whether or not the namespace holds
        anything; an empty or never written namespace gives no records."""
        check_question(question)
        query = Query(question, k, now)
        tenant = self._tenant(namespace, create=False)
        if tenant is None:
            return SearchResult([], None)
        # announced to the namespace's batch when the encoder's batch ends (``Batcher`` docs)
        vector = self.encoder.encode([question], on_done=lambda: tenant.searches.expect(1))[0]
        [result] = tenant.searches.submit([(query, vector)], expected=True)
        if isinstance(result, ValueError):
            raise result
        return result

    def add_session(self, namespace: str, session: Mapping[str, Any], texts: Sequence[str]) -> SessionResult:
        """Write ``session`` (``TemporalMemory.add_session``'s arguments by name) into ``namespace``
        (made if new) and return its result once committed. ``texts``, what the session will embed
        (its facts' and passages' texts), are embedded first, outside the namespace lock and batched
        with other requests; the concurrent adds of a namespace are then written as one batch, in
        one transaction (``Tenant._write_batch``)."""
        tenant = self._tenant(namespace, create=True)
        vectors = self.encoder.vectors_of(texts)
        [result] = tenant.writes.submit([(dict(session), vectors)])
        if isinstance(result, ValueError):
            raise result
        return result

    @contextmanager
    def use(self, namespace: str, create: bool) -> Iterator[TemporalMemory | None]:
        """The namespace's memory, held under its lock; None when it does not exist and not ``create``."""
        tenant = self._tenant(namespace, create)
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
                    tenant.closed = True
                    tenant.memory.close()
            if self.postgres:
                from rotmem.memory.storage.postgres import drop_namespace

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
                from rotmem.memory.storage.postgres import namespace_exists

                namespace_exists(self.store, "readiness_probe")
            elif not Path(self.store).is_dir():
                return f"{self.store}: the store directory is gone"
        except MemoryDatabaseError as error:
            return str(error)
        return None

    def close(self) -> None:
        """Close every namespace, hand the frozen objects back to the garbage collector
        (``Tenant._settle_heap``), then close the encoder when it has a ``close`` (``ProcessEncoder``)."""
        with self._lock:
            for tenant in self._tenants.values():
                with tenant.lock:
                    tenant.closed = True
                    tenant.memory.close()
            self._tenants.clear()
        gc.unfreeze()  # what ``_settle_heap`` froze is collected again (at exit, too)
        close_encoder = getattr(self.encoder.inner, "close", None)
        if close_encoder is not None:
            close_encoder()
