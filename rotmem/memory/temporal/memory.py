"""``TemporalMemory``: RoMem time-aware retrieval over a TEM store (ROMEM.md, "Query time").

Facts are the store's records plus their times: ``(h, r, t, t_happen, t_obs, source)`` with
``t_happen`` the day the fact became true, ``t_obs`` the day it was told (the session's date) and
``source`` the session id; all days are days since 1970-01-01. They live append-only in the table
``temporal_facts`` of the store's own database (same file or namespace, same
connection; ``rotmem.memory.temporal.tables``), keyed by the store's record id; each session's date
goes to ``session_dates``. A session's records and their times are written in one transaction
(the store's ``before_commit`` hook adds them to the store's ``SessionWriter``): both land or
neither does. Records written to the store directly (not through this class)
have no times: they are ranked on similarity alone and left out of ``fit``.

``t_happen`` is given with a fact or read from the session text
(``rotmem.memory.temporal.time_expressions.happened_day``). Without one, ``t_happen = t_obs``.

Facts may also come from an extractor (``rotmem.memory.llm.FactExtractor``, e.g. an LLM): a session
added with ``facts=None`` and a ``text`` is handed to the memory's ``extractor``.

Read path for a question asked on day ``now``:

1. ``S_sem``: the store's TEM retrieval (cosine x relation weight) for the top ``candidates``
   records, clamped at 0 so that the temporal factor can only amplify.
2. The query mode (``time_expressions.query_mode``) picks the time each candidate is scored at:
   *explicit* -> the middle of the named span; *time-seeking* -> the candidate's own ``t_happen``;
   *time-agnostic* -> ``now``.
3. ``S_kge`` (``rotmem.memory.temporal.scorer``) = RoMem's probability of the candidate's object
   among **all** entities as the tail of ``(subject, relation, ?, tau)``, a softmax over the entity
   table, so ``S_kge`` is in [0, 1] and comparable across questions. Before ``fit`` (or for a record
   whose strings the fitted model has
   not seen, or without times) ``S_kge = 0``.
4. ``S_final = S_sem * (1 + alpha_g * S_kge)`` with ``alpha_g = 0.3``; the top ``k`` by ``S_final``
   are returned in TEM's presentation order (``rotmem.memory.tem.tense.present_order``): for a question
   about the present, current versions before ``[historical]`` ones; for one naming a past time, the
   versions valid then first; for another past-tense question, source order.

``fit`` is the online Phase 2 (``rotmem.memory.temporal.fit``): it builds an in-memory ``TemporalKG``
from the stored facts (each at its ``t_happen``) and trains a small RoMem through the training core
(``rotmem.training``, plain torch, no Lightning; ``FitConfig("romem-complex")`` or any family
instead, e.g. ``FitConfig("tntcomplex")``: per-day embeddings, the discrete-time ablation); the
relation speeds stay frozen: alpha = 1 (no gate), a mapping relation -> alpha,
or a Semantic Speed Gate file (``rotmem.gate.relation_speeds``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rotmem.data import TemporalKG
from rotmem.memory.llm import FactExtractor, Reader, extract_facts
from rotmem.memory.records import (
    ExtractedFact,
    Record,
    Session,
    SessionResult,
    ValidSession,
    check_day,
    check_question,
)
from rotmem.memory.storage.writer import SessionWriter
from rotmem.memory.tem.store import TEMStore
from rotmem.memory.tem.tense import present_order
from rotmem.memory.temporal import fit as online_fit
from rotmem.memory.temporal import tables
from rotmem.memory.temporal.records import Day, Query, TemporalFact, TemporalRecord, render_timed
from rotmem.memory.temporal.scorer import KGEScorer
from rotmem.memory.temporal.time_expressions import QueryMode, TimeQuery, as_day, happened_day, query_mode
from rotmem.models import RoMem
from rotmem.training import TrainConfig

ALPHA_G = 0.3


class TemporalMemory:
    """RoMem time-aware retrieval on top of a ``TEMStore`` (see the module docs).

    Args:
        path: the SQLite file (or ``":memory:"``) when no ``store`` is given.
        encoder: the store's text encoder when no ``store`` is given.
        store: an open ``TEMStore`` to extend.
        alpha_g: the weight of the temporal stream in ``S_sem * (1 + alpha_g * S_kge)``.
        candidates: how many records the semantic stream hands to the re-ranker.
        speeds: relation speeds for ``fit``: None (alpha = 1 for every relation), a mapping
            relation -> alpha (missing relations get 1), or the path of a saved Semantic Speed Gate.
        extractor: a ``FactExtractor`` for sessions added with ``facts=None`` (module docs).
        store_options: more ``TEMStore`` arguments when no ``store`` is given.
    """

    def __init__(
        self,
        path: str = ":memory:",
        encoder: Any = None,
        *,
        store: TEMStore | None = None,
        alpha_g: float = ALPHA_G,
        candidates: int = 50,
        speeds: Mapping[str, float] | str | Path | None = None,
        extractor: FactExtractor | None = None,
        **store_options: Any,
    ):
        if store is not None and (encoder is not None or store_options or path != ":memory:"):
            raise ValueError("pass either an open store or path/encoder/store options, not both")
        if not alpha_g >= 0:
            raise ValueError(f"alpha_g must be >= 0, got {alpha_g!r}")
        if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
            raise ValueError(f"candidates must be a positive integer, got {candidates!r}")
        self.store = store if store is not None else TEMStore(path, encoder, **store_options)
        self.alpha_g, self.candidates, self.speeds = float(alpha_g), candidates, speeds
        self.extractor = extractor
        self.scorer = KGEScorer()

    @property
    def model(self) -> RoMem | None:
        """The model ``S_kge`` comes from (None before ``fit`` or ``use_model``)."""
        return self.scorer.model

    # --- writes -----------------------------------------------------------------------------
    def add_session(
        self,
        session_id: str,
        facts: Sequence[Sequence[Any] | ExtractedFact] | None = (),
        *,
        date: Day,
        text: str | None = None,
        session_index: int | None = None,
        turns: Sequence[str] | None = None,
        summaries: str | Sequence[str] = (),
        turn_ids: Sequence[str] | None = None,
    ) -> SessionResult:
        """Append one session told on ``date`` (a day number or ``"YYYY-MM-DD"``).

        ``facts`` are ``(subject, relation, object)``, ``(subject, relation, object, t_happen)``
        or ``ExtractedFact`` items, with ``t_happen`` a day, a date string or None (then read from
        ``text``, see module docs). ``facts=None``: the memory's ``extractor`` reads them from
        ``text``. The other arguments go to ``TEMStore.add_session``, which stores
        every fact (``verified`` says which passed the text check).
        """
        return self.add_sessions(
            [
                dict(
                    session_id=session_id,
                    facts=facts,
                    date=date,
                    text=text,
                    session_index=session_index,
                    turns=turns,
                    summaries=summaries,
                    turn_ids=turn_ids,
                )
            ]
        )[0]

    def add_sessions(self, sessions: Iterable[Mapping[str, Any]]) -> list[SessionResult]:
        """Append many sessions (mappings with ``add_session``'s argument names) in one store batch.

        Every session is checked by ``Session.validate(timed=True)`` (dates and ``t_happen`` inside
        the calendar, finite) before anything is written."""
        batch = []
        for position, mapping in enumerate(sessions):
            session = Session.coerce(mapping)
            if session.date is None:
                raise ValueError(f"session {position} ({session.session_id!r}): a date is required")
            if session.facts is None:
                t_obs = check_day(session.date, f"session {session.session_id!r}", "date")
                session = replace(session, facts=self._extract(session, int(t_obs)))
            batch.append(session.validate(timed=True))

        def write_times(writer: SessionWriter, written: list[tuple[ValidSession, SessionResult]]) -> None:
            for session, result in written:
                t_obs = float(int(session.date))
                for fact, record_id in zip(session.facts, result.fact_ids, strict=True):
                    t_happen = (
                        fact.t_happen
                        if fact.t_happen is not None
                        else happened_day(fact.object, session.text, t_obs)
                    )
                    writer.add(
                        "temporal_facts",
                        record_id=record_id,
                        head=fact.subject,
                        relation=fact.relation,
                        tail=fact.object,
                        t_happen=t_happen,
                        t_obs=t_obs,
                        source=session.session_id,
                    )
            for session, _ in written:
                writer.add("session_dates", session_id=session.session_id, t_obs=float(int(session.date)))

        return self.store.add_sessions(batch, before_commit=write_times)

    def _extract(self, session: Session, t_obs: int) -> list[ExtractedFact]:
        where = f"session {session.session_id!r}"
        if self.extractor is None:
            raise ValueError(f"{where}: facts=None needs an extractor (TemporalMemory(extractor=...))")
        if not isinstance(session.text, str) or not session.text.strip():
            raise ValueError(f"{where}: facts=None needs the session text to extract from")
        return extract_facts(self.extractor, session.text, t_obs, where)

    # --- reads ------------------------------------------------------------------------------
    def facts(self) -> list[TemporalFact]:
        """Every timed fact, in write order."""
        return [TemporalFact(*row) for row in tables.temporal_facts(self.store.db)]

    def latest_observation(self) -> float | None:
        """The last session date stored (the default "now"), or None for an empty memory."""
        return tables.latest_observation(self.store.db)

    def session_dates(self, session_ids: Sequence[str] | None = None) -> dict[str, float]:
        """``session_id -> t_obs`` (days) of every session added through this class (or of those of
        ``session_ids``)."""
        return tables.session_dates(self.store.db, session_ids)

    def times(self, record_ids: Sequence[int]) -> dict[int, tuple[float, float]]:
        """``record_id -> (t_happen, t_obs)`` of those of ``record_ids`` that have times."""
        return tables.fact_times(self.store.db, record_ids)

    def time_query(self, question: str, now: Day | None = None) -> tuple[TimeQuery, float]:
        """The question's mode and the day it is asked on (``now``, default the latest ``t_obs``)."""
        if now is None:
            now = self.latest_observation()
            if now is None:
                raise ValueError("the memory is empty: pass now= to say what day the question is asked on")
        now_day = (
            float(now) if isinstance(now, int | float) and not isinstance(now, bool) else float(as_day(now))
        )
        return query_mode(question, int(now_day)), now_day

    def retrieve(self, question: str, k: int = 15, now: Day | None = None) -> list[TemporalRecord]:
        """The top ``k`` records by ``S_final``, in TEM's presentation order (module docs, step 4)."""
        return self.retrieve_many([Query(question, k, now)])[0]

    def retrieve_many(
        self, queries: Sequence[Query], vectors: np.ndarray | None = None
    ) -> list[list[TemporalRecord]]:
        """``retrieve`` for each of ``queries``, as one batch: one embedding call (none when the
        question vectors ``[B, D]`` are given), one index search, one fetch of the records and one
        of their times, the default "now" read once.

        Without a fitted model ``S_final = max(S_sem, 0)``, so only the candidates that can reach a
        query's top ``k`` (clamped score at least the ``k``-th one's, ties included) are fetched.
        """
        for query in queries:
            check_question(query.question)
            if isinstance(query.k, bool) or not isinstance(query.k, int) or query.k < 1:
                raise ValueError(f"k must be a positive integer, got {query.k!r}")
        self.store.refresh()
        if not queries or self.store.index() is None:
            return [[] for _ in queries]
        if vectors is None:
            vectors = self.store.encode([query.question for query in queries])
        depth = max(max(query.k, self.candidates) for query in queries)
        hits = self.store.search_vectors(vectors, depth)
        kept = [
            self._reachable(found[: max(query.k, self.candidates)], query.k)
            for query, found in zip(queries, hits, strict=True)
        ]
        records = self.store.records_by_id(i for found in kept for i, _ in found)
        times = self.times(sorted(records))
        latest: list[float | None] = []  # the default "now", read at most once per batch
        out = []
        for query, found in zip(queries, kept, strict=True):
            if not found:
                out.append([])
                continue
            now = query.now
            if now is None:
                if not latest:
                    latest.append(self.latest_observation())
                now = latest[0]
            tq, now_day = self.time_query(query.question, now)
            candidates = [replace(records[i], score=score) for i, score in found]
            top = self._rank(candidates, tq, now_day, times, query.k)
            out.append(present_order(top, query.question, tq.span, now_day, self.store.version_group))
        return out

    def _reachable(self, found: list[tuple[int, float]], k: int) -> list[tuple[int, float]]:
        """The candidates of ``found`` (best first) that can be in the top ``k`` (``retrieve_many``)."""
        if self.model is not None or len(found) <= k:
            return found
        floor = max(found[k - 1][1], 0.0)
        return [(i, score) for i, score in found if max(score, 0.0) >= floor]

    def _rank(
        self,
        candidates: list[Record],
        tq: TimeQuery,
        now_day: float,
        times: Mapping[int, tuple[float, float]],
        k: int,
    ) -> list[TemporalRecord]:
        """The top ``k`` of ``candidates`` by ``S_final`` (module docs), best first."""
        taus = self._taus_at(candidates, tq, now_day, times)
        scored = []
        for record, tau, kge in zip(candidates, taus, self.temporal_scores(candidates, taus), strict=True):
            s_sem = max(float(record.score or 0.0), 0.0)
            happen, obs = times.get(record.id, (None, None))
            s_kge = 0.0 if kge is None else kge
            final = s_sem * (1.0 + self.alpha_g * s_kge)
            scored.append(
                TemporalRecord(record, happen, obs, s_sem, s_kge, final, None if kge is None else tau)
            )
        return sorted(scored, key=lambda r: (-r.score, r.record.session_index, r.record.id))[:k]

    def taus(
        self,
        question: str,
        records: Sequence[Record],
        now: Day | None = None,
        times: Mapping[int, tuple[float, float]] | None = None,
    ) -> list[float | None]:
        """The day each record is scored at for ``question`` (module docs, step 2); None for a
        record without times. ``times``: ``times`` of the records when already read."""
        tq, now_day = self.time_query(question, now)
        times = self.times([r.id for r in records]) if times is None else times
        return self._taus_at(records, tq, now_day, times)

    @staticmethod
    def _taus_at(
        records: Sequence[Record], tq: TimeQuery, now_day: float, times: Mapping[int, tuple[float, float]]
    ) -> list[float | None]:
        """``taus`` for an already parsed question ``tq`` asked on ``now_day``."""
        out: list[float | None] = []
        for record in records:
            known = times.get(record.id)
            if known is None:
                out.append(None)
            elif tq.mode == QueryMode.EXPLICIT:
                out.append(tq.span.midpoint)
            elif tq.mode == QueryMode.TIME_SEEKING:
                out.append(known[0])
            else:
                out.append(now_day)
        return out

    def with_times(self, records: Sequence[Record]) -> list[TemporalRecord]:
        """``records`` (e.g. from ``store.retrieve``) with their stored times, unscored by RoMem:
        ``s_sem = score = record.score``, ``s_kge = 0``. For rendering TEM's evidence with dates."""
        times = self.times([r.id for r in records]) if records else {}
        out = []
        for record in records:
            happen, obs = times.get(record.id, (None, None))
            s_sem = float(record.score or 0.0)
            out.append(TemporalRecord(record, happen, obs, s_sem, 0.0, s_sem, None))
        return out

    def temporal_scores(self, records: Sequence[Record], taus: Sequence[float | None]) -> list[float | None]:
        """``S_kge`` in [0, 1] of each record at its day in ``taus``; None where it cannot be scored
        (no fitted model, no time, or strings the model has not seen): ``KGEScorer.scores``."""
        return self.scorer.scores(records, taus)

    def render(self, records: Iterable[TemporalRecord], show_dates: bool = True) -> str:
        """``render_timed(records, show_dates)``."""
        return render_timed(records, show_dates)

    # --- online Phase 2 ---------------------------------------------------------------------
    def use_model(self, model: RoMem) -> None:
        """Score with ``model`` from now on (``KGEScorer.use``: a RoMem with a vocabulary)."""
        self.scorer.use(model)

    def knowledge_graph(self) -> TemporalKG:
        """The stored facts as a ``TemporalKG`` (``rotmem.memory.temporal.fit.knowledge_graph``)."""
        return online_fit.knowledge_graph(self.facts())

    def relation_speeds(self, relations: Sequence[str]) -> torch.Tensor | None:
        """``alpha [R]`` from ``speeds`` (``temporal.fit.relation_speeds``), or None for alpha = 1."""
        return online_fit.relation_speeds(self.speeds, relations)

    def fit(self, config: TrainConfig | None = None) -> dict[str, float]:
        """Train RoMem (or ``config.family``, any family: ``FitConfig``) on the stored facts
        (``temporal.fit.fit_model``, the training core, speeds frozen) and score with it from now
        on; returns ``{"loss": last epoch's mean, "facts": number trained on}``. Without
        ``config``: ``FitConfig("romem")`` (100 epochs, batch 256), not the fit docs/memory.md
        measured best; ``BestMemory.preset`` carries that one
        (``rotmem.memory.retrieval.preset_fit_config()``)."""
        kg = self.knowledge_graph()
        model, loss = online_fit.fit_model(
            kg, config or online_fit.FitConfig(), self.relation_speeds(kg.relations)
        )
        self.use_model(model)
        return {"loss": loss, "facts": float(kg.train.shape[0])}

    def answer(self, question: str, reader: Reader, k: int = 15, now: Day | None = None) -> str:
        """``reader(question, evidence)`` on the rendered top-``k`` records (``retrieve``)."""
        return reader(question, self.render(self.retrieve(question, k=k, now=now)))

    # --- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> TemporalMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
