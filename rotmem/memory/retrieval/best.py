"""``BestMemory``: the hybrid retriever, RoMem's re-rank and the question's time constraint, in one.

Per question asked on day ``now``:

1. Candidates: the hybrid's (``HybridRetriever``: dense + BM25 over facts and turns, the date boost)
   top ``pool`` facts, each with its unit's score.
2. Re-rank: ``score + beta · S_kge`` (``TemporalMemory.temporal_scores`` at
   ``TemporalMemory.taus``; the hybrid score is a sum of z-scores, so RoMem is added). Without a
   fitted model (``fit``) or with ``rerank=False``, ``S_kge`` is 0: the hybrid order.
3. Time constraint (``time_constraint.parse_time_constraint``, ``constrain.apply_constraint``):
   candidates outside the asked window move to the end, the asked slot's facts are ordered by date
   for first / last / before / after / as of / now (the slot's other stored facts join the pool
   for this: ``complete_slots``); the score orders the rest (facts without dates, ties). An event
   in place of a date ("in the same month as A praised B") is dated by the top fact the hybrid
   finds for the event's words.
4. The top ``k``, **best first** (the constraint's order, then the score): ``retrieve`` does not
   sort them by source. TEM's reading order, oldest session first, is a separate step:
   ``render_in_source_order(records)``.

``BestMemory.preset(path)`` is the configuration measured best in docs/memory.md (temporal QA over
ICEWS05-15): TNTComplEx with the history term of ``icews05-15-tntcomplex-history`` fitted online
(10 epochs, batch 1024, dim 64; ``preset_fit_config``), ``beta = 0.5``, the hybrid's defaults,
time constraints on. ``TemporalMemory.fit``'s own defaults are not these: the preset carries them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from rotmem.memory.records import SessionResult, check_question
from rotmem.memory.retrieval.constrain import Candidate, Slot, apply_constraint
from rotmem.memory.retrieval.hybrid import LEXICAL_WEIGHT, TIME_BOOST, Evidence, HybridRetriever, UnitHit
from rotmem.memory.retrieval.time_constraint import TimeConstraint, parse_time_constraint
from rotmem.memory.tem.tense import asks_about_past
from rotmem.memory.temporal.fit import FitConfig
from rotmem.memory.temporal.memory import TemporalMemory
from rotmem.memory.temporal.records import Day, Query, TemporalRecord, render_timed
from rotmem.memory.temporal.time_expressions import TimeQuery

BETA = 0.5  # the dev grid's best re-rank weight (docs/memory.md)
POOL = 100  # hybrid candidates the re-rank and the constraint see
SLOT_LIMIT = 5000  # facts of one slot the completion reads at most (the newest)
PRESET_CONFIG = "icews05-15-tntcomplex-history"  # where the preset's history windows come from


def preset_fit_config(**overrides: Any) -> FitConfig:
    """The fit of docs/memory.md's best row: TNTComplEx + the history term of
    ``icews05-15-tntcomplex-history``, 10 epochs, batch 1024, dim 64 (``overrides`` replace fields)."""
    from rotmem import configs

    history = configs.load(configs.resolve(PRESET_CONFIG))["model"]["history"]
    settings = dict(family="tntcomplex", history=history, epochs=10, batch_size=1024, dim=64)
    return FitConfig(**{**settings, **overrides})


def render_in_source_order(records: Iterable[TemporalRecord], show_dates: bool = True) -> str:
    """TEM's evidence text: ``records`` oldest session first (then write order), dated lines with
    ``[historical]`` labels (``render_timed``), whatever order they were retrieved in."""
    ordered = sorted(records, key=lambda r: (r.record.session_index, r.record.id))
    return render_timed(ordered, show_dates)


class BestMemory:
    """Hybrid + time constraint + RoMem re-rank over a ``TemporalMemory`` (module docs).

    Args:
        memory: the ``TemporalMemory`` to read (and write through ``add_session(s)``).
        beta: weight of ``S_kge`` in the re-rank (0: none).
        pool: hybrid candidates handed to the re-rank and the constraint.
        constrain: apply the question's time constraint.
        rerank: add RoMem's score (when a model is fitted).
        fit_config: what ``fit()`` trains (default ``FitConfig()``; the preset's is
            ``preset_fit_config()``).
        complete_slots: hand the constraint every stored fact of the asked slot (relation and
            named entity), not only the pool's (``constrain``, step 5).
        present: read a question with no time constraint that does not ask about the past
            (``rotmem.memory.tem.tense.asks_about_past``) as asked "now": the current version of the
            asked slot first, and for such questions each TEM version group's current version
            before its ``[historical]`` ones (the service's setting; off by default, so the
            measured rows hold).
        lexical_weight, time_boost: the hybrid's weights.
    """

    def __init__(
        self,
        memory: TemporalMemory,
        *,
        beta: float = BETA,
        pool: int = POOL,
        constrain: bool = True,
        rerank: bool = True,
        fit_config: FitConfig | None = None,
        complete_slots: bool = True,
        present: bool = False,
        lexical_weight: float = LEXICAL_WEIGHT,
        time_boost: float = TIME_BOOST,
    ):
        if not isinstance(memory, TemporalMemory):
            raise TypeError(f"memory must be a TemporalMemory, got {type(memory).__name__}")
        if not beta >= 0:
            raise ValueError(f"beta must be >= 0, got {beta!r}")
        if isinstance(pool, bool) or not isinstance(pool, int) or pool < 1:
            raise ValueError(f"pool must be a positive integer, got {pool!r}")
        self.memory, self.beta, self.pool = memory, float(beta), pool
        self.constrain, self.rerank = bool(constrain), bool(rerank)
        self.fit_config, self.complete_slots = fit_config, bool(complete_slots)
        self.present = bool(present)
        self._slots_for = (-1, 0)  # (the hybrid's generation, its records read into the slots)
        self._relation_vectors: dict[str, np.ndarray] = {}
        self._by_subject: dict[tuple[str, str], list[int]] = {}
        self._by_object: dict[tuple[str, str], list[int]] = {}
        self.hybrid = HybridRetriever(memory, lexical_weight=lexical_weight, time_boost=time_boost)

    @classmethod
    def preset(cls, path: str = ":memory:", encoder: Any = None, **store_options: Any) -> BestMemory:
        """The best configuration of docs/memory.md on a new ``TemporalMemory(path, encoder)``;
        call ``fit()`` once facts are in (without it: hybrid + time constraint)."""
        memory = TemporalMemory(path, encoder, **store_options)
        return cls(memory, beta=BETA, pool=POOL, fit_config=preset_fit_config())

    # --- writes and the fit -------------------------------------------------------------------
    def add_session(self, *args: Any, **kwargs: Any) -> SessionResult:
        """``TemporalMemory.add_session``."""
        return self.memory.add_session(*args, **kwargs)

    def add_sessions(self, sessions: Iterable[Mapping[str, Any]]) -> list[SessionResult]:
        """``TemporalMemory.add_sessions``."""
        return self.memory.add_sessions(sessions)

    def fit(self, config: FitConfig | None = None) -> dict[str, float]:
        """``TemporalMemory.fit`` with ``config``, else this memory's ``fit_config``."""
        return self.memory.fit(config or self.fit_config)

    # --- reads ----------------------------------------------------------------------------------
    def retrieve(
        self, question: str, k: int = 10, now: Day | None = None, *, vector: np.ndarray | None = None
    ) -> list[TemporalRecord]:
        """The top ``k`` facts for ``question`` asked on ``now`` (default: the latest session date),
        **best first** (module docs); ``score`` is the hybrid score plus ``beta · S_kge``.
        ``vector``: the question's embedding when already computed."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        tq, now_day = self.memory.time_query(question, now)
        constraint = self._constraint(question, now_day)
        if constraint.anchor_kind and constraint.anchor_kind.startswith("same_"):  # the event is not asked
            question, vector = constraint.main or question, None
        if vector is None:
            vector = self.memory.store.encode([question])[0]
        units = self.hybrid.ranked(question, max(self.pool, k), vector=vector, now=now_day)
        return self._finish(units, k, tq, now_day, constraint, vector)

    def retrieve_many(
        self, queries: Sequence[Query], vectors: np.ndarray | None = None
    ) -> list[list[TemporalRecord]]:
        """``retrieve`` for each of ``queries`` (``TemporalMemory.retrieve_many``'s signature;
        ``vectors [B, D]``: the questions' embeddings), with one hybrid pass for the batch (the
        tables checked once, one dense index search per kind); the time constraint (and the
        re-rank) per question. The same records as ``retrieve`` one by one."""
        for query in queries:
            check_question(query.question)
            if isinstance(query.k, bool) or not isinstance(query.k, int) or query.k < 1:
                raise ValueError(f"k must be a positive integer, got {query.k!r}")
        self.memory.store.refresh()
        if not queries or self.memory.store.index() is None:
            return [[] for _ in queries]
        if vectors is None:
            vectors = self.memory.store.encode([query.question for query in queries])
        latest = self.memory.latest_observation() if any(q.now is None for q in queries) else None
        asked, texts, rows = [], [], np.array(vectors, dtype=np.float32)
        for row, query in enumerate(queries):
            tq, now_day = self.memory.time_query(query.question, latest if query.now is None else query.now)
            constraint = self._constraint(query.question, now_day)
            text = query.question
            if constraint.anchor_kind and constraint.anchor_kind.startswith("same_"):
                text = constraint.main or text
            if text != query.question:  # the event is not asked: embed the rest
                rows[row] = self.memory.store.encode([text])[0]
            asked.append((tq, now_day, constraint))
            texts.append(text)
        depth = max(max(self.pool, query.k) for query in queries)
        units = self.hybrid.hits_many(texts, depth, rows, [now_day for _, now_day, _ in asked])
        return [
            self._finish(found[: max(self.pool, query.k)], query.k, tq, now_day, constraint, vector)
            for query, found, (tq, now_day, constraint), vector in zip(
                queries, units, asked, rows, strict=True
            )
        ]

    def _constraint(self, question: str, now_day: float) -> TimeConstraint:
        """The question's time constraint (``present``: "now" when it states none)."""
        if not self.constrain:
            return TimeConstraint()
        constraint = parse_time_constraint(question, int(now_day))
        if self.present and not constraint and not asks_about_past(question):
            window = (-math.inf, int(now_day))
            return replace(constraint, window=window, order="latest", relation="current")
        return constraint

    def _finish(
        self,
        units: Sequence[Evidence | UnitHit],
        k: int,
        tq: TimeQuery,
        now_day: float,
        constraint: TimeConstraint,
        vector: np.ndarray,
    ) -> list[TemporalRecord]:
        """The top ``k`` of the hybrid's ``units``: re-ranked, then the time constraint applied."""
        seen: dict[int, tuple[Any, float]] = {}
        for unit in units:
            for record in unit.records:
                if record.id not in seen or seen[record.id][1] < unit.score:
                    seen[record.id] = (record, unit.score)
        records = [r for r, _ in seen.values()]
        if not records:
            return []
        times = self.hybrid.times([r.id for r in records])
        taus = self.memory._taus_at(records, tq, now_day, times)
        kge = (
            self.memory.temporal_scores(records, taus) if self.rerank and self.beta else [None] * len(records)
        )
        candidates = [
            Candidate(r, times[r.id][0] if r.id in times else None, s + self.beta * (g or 0.0))
            for (r, s), g in zip(seen.values(), kge, strict=True)
        ]
        floor = min(c.score for c in candidates) - 1.0
        complete = (lambda key: self._slot_facts(key, floor)) if self.complete_slots else None
        similarity = self._similarity(vector, {r.relation for r in records}) if constraint else None
        event = self._event_day(constraint, now_day)
        ordered = apply_constraint(candidates, constraint, event, complete, similarity)
        if self.present and constraint.relation == "current":
            ordered = self._current_first(ordered)
        streams = dict(zip(seen, zip(kge, taus, strict=True), strict=True))
        added = [c.record.id for c in ordered[:k] if c.record.id not in times]  # completed slot facts
        times.update(self.hybrid.times(added) if added else {})
        out = []
        for c in ordered[:k]:
            g, tau = streams.get(c.record.id, (None, None))
            happen, obs = times.get(c.record.id, (None, None))
            s_sem = c.score - self.beta * (g or 0.0)
            out.append(TemporalRecord(c.record, happen, obs, s_sem, g or 0.0, c.score, tau))
        return out

    def _current_first(self, ordered: list[Candidate]) -> list[Candidate]:
        """``ordered`` with each TEM version group's current version in the group's first place
        (the ``[historical]`` ones after it, in their order): the slot of a relation that TEM
        groups with another ("lives in", "moved to") is not the constraint's."""
        places: dict[str, list[int]] = defaultdict(list)
        group_key = self.memory.store.group_key  # version_group's key, without its call
        for place, candidate in enumerate(ordered):
            places[group_key(candidate.record.subject, candidate.record.relation)].append(place)
        out = list(ordered)
        for group in places.values():
            if len(group) == 1:  # one version, nothing to move
                continue
            members = [ordered[p] for p in group]
            current = [c for c in members if not c.record.historical]
            if len(current) in (0, len(members)):  # nothing to move before the historical ones
                continue
            members = current + [c for c in members if c.record.historical]  # a stable sort's order
            for place, member in zip(group, members, strict=True):
                out[place] = member
        return out

    def _similarity(self, vector: np.ndarray, relations: set[str]) -> Callable[[str], float]:
        """``relation -> cosine(question, relation)`` with the store's encoder (vectors kept)."""
        new = sorted(relations - self._relation_vectors.keys())
        if new:
            self._relation_vectors.update(zip(new, self.memory.store.encode(new), strict=True))
        query = np.asarray(vector, dtype=np.float32)
        return lambda relation: float(self._relation_vectors[relation] @ query)

    def _slot_facts(self, key: Slot, score: float) -> list[Candidate]:
        """Every stored fact of the slot ``key`` (at most ``SLOT_LIMIT``, newest), scored ``score``;
        the slots follow the hybrid's tables, which the search that asks has just brought up to date."""
        if self._slots_for[0] != self.hybrid.generation:
            self._by_subject, self._by_object = defaultdict(list), defaultdict(list)
            self._slots_for = (self.hybrid.generation, 0)
        for r in self.hybrid.records[self._slots_for[1] :]:
            self._by_subject[(r.relation, r.subject)].append(r.id)
            self._by_object[(r.relation, r.object)].append(r.id)
        self._slots_for = (self.hybrid.generation, len(self.hybrid.records))
        relation, subject, obj = key
        table, entity = (self._by_subject, subject) if subject is not None else (self._by_object, obj)
        ids = table.get((relation, entity), [])[-SLOT_LIMIT:]
        records = self.hybrid.records_by_id(ids) if ids else {}
        if obj is not None and subject is not None:
            records = {i: r for i, r in records.items() if r.object == obj}
        times = self.hybrid.times(list(records)) if records else {}
        return [Candidate(r, times[i][0] if i in times else None, score) for i, r in records.items()]

    def _event_day(self, constraint: TimeConstraint, now_day: float) -> float | None:
        """The day of the event a ``same_*`` anchor names: the hybrid's top fact for its words."""
        if constraint.anchor is None or not constraint.anchor_kind.startswith("same_"):
            return None
        for unit in self.hybrid.ranked(constraint.anchor, 1, now=now_day):
            ids = [r.id for r in unit.records]
            times = self.hybrid.times(ids) if ids else {}
            days = [times[i][0] for i in ids if i in times]
            if days:
                return days[0]
            if unit.day is not None:
                return unit.day
        return None

    def close(self) -> None:
        self.memory.close()

    def __enter__(self) -> BestMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
