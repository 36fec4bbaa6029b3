"""Hybrid evidence retrieval: facts and dialogue turns, dense and BM25, grouped by source turn.

An agent's memory holds two views of one conversation: the turns as said and the facts extracted
from them. Each fact keeps the ids of its source turns (``Record.sources``), each turn its own id
(``Passage.sources``); an *evidence unit* is one source id with its turn and the facts read from
it (a fact or turn without a source id is a unit of its own). Per question:

1. Four score streams over the whole memory: dense facts (the store's ``cosine x relation
   weight``), BM25 facts (``subject relation object``), dense turns, BM25 turns. Each stream is
   standardised over its top ``pool`` items (z-scores; items below the pool get the pool's lowest),
   so that cosine and BM25 scales add up.
2. ``fact = z(dense) + lexical_weight * z(bm25)``, the same for ``turn``; a unit scores
   ``turn + max(fact over its facts)``, with the lowest turn score standing in for a missing turn
   or a missing fact.
3. Time: a *time-seeking* question ("When did ...") adds ``time_boost`` to units whose turn or
   facts contain a time expression (the answer is a date said there); an *explicit* one ("... in
   May 2023") adds it to units whose session date or fact ``t_happen`` lies in the named span
   (dates known only through ``TemporalMemory``). Modes: ``time_expressions.query_mode``.
4. The top ``k`` units, in source order.

Summaries are not units: they name no turn. The defaults (``lexical_weight = 0.5``,
``time_boost = 0.5``) were chosen on three LoCoMo conversations (conv-26, conv-30, conv-41) and
are reported on the other seven as well (docs/memory.md).

The unit tables and the BM25 indexes are built on the first query and rebuilt when the store has
grown (rows written here or committed by another process), a pass over the memory: cheap next to
embedding what was added.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rotmem.data import date_of
from rotmem.memory.records import Passage, Record
from rotmem.memory.retrieval.lexical import LexicalIndex
from rotmem.memory.tem.indexes import FACT_KIND
from rotmem.memory.tem.store import TEMStore, fact_text
from rotmem.memory.temporal.memory import TemporalMemory
from rotmem.memory.temporal.records import Day
from rotmem.memory.temporal.time_expressions import QueryMode, as_day, find_times, query_mode

LEXICAL_WEIGHT = 0.5
TIME_BOOST = 0.5
POOL = 2048  # FAISS on a GPU returns at most 2048 neighbours per search


@dataclass(frozen=True)
class Evidence:
    """One evidence unit: a source id, its turn (None if the memory has no turn with that id) and the
    facts read from it; ``day``: the session date (days) when known; ``score``: the unit's score."""

    source: str | None
    session_id: str
    session_index: int
    turn: Passage | None
    records: tuple[Record, ...] = ()
    day: float | None = None
    score: float = 0.0
    ids: tuple[str, ...] = field(default=())

    def render(self) -> str:
        """``[YYYY-MM-DD] turn text`` then one indented line per fact (``[historical]`` labelled)."""
        head = f"[{date_of(self.day)}] " if self.day is not None else f"s{self.session_index}: "
        lines = [head + (self.turn.text if self.turn is not None else "")]
        for record in self.records:
            label = " [historical]" if record.historical else ""
            lines.append(f"  - {record.subject} {record.relation} {record.object}{label}")
        if self.turn is None and self.records:
            lines = [head + lines[1][4:], *lines[2:]]
        return "\n".join(lines)


def render_evidence(items: Sequence[Evidence]) -> str:
    """The evidence text a reader gets: one block per unit, in the given order."""
    return "\n".join(item.render() for item in items)


class HybridRetriever:
    """Evidence units for a question (module docs) over a ``TemporalMemory`` or a ``TEMStore``."""

    def __init__(
        self,
        memory: TemporalMemory | TEMStore,
        *,
        lexical_weight: float = LEXICAL_WEIGHT,
        time_boost: float = TIME_BOOST,
        pool: int = POOL,
    ):
        if not lexical_weight >= 0 or not time_boost >= 0:
            raise ValueError(
                f"lexical_weight and time_boost must be >= 0, got {lexical_weight}, {time_boost}"
            )
        if isinstance(pool, bool) or not isinstance(pool, int) or pool < 2:
            raise ValueError(f"pool must be an integer >= 2, got {pool!r}")
        self.memory = memory if isinstance(memory, TemporalMemory) else None
        self.store = memory.store if isinstance(memory, TemporalMemory) else memory
        self.lexical_weight, self.time_boost, self.pool = float(lexical_weight), float(time_boost), pool
        self._built_for: tuple[int, int] | None = None

    # --- tables -----------------------------------------------------------------------------
    def _sizes(self) -> tuple[int, int]:
        self.store.refresh()
        turns = self.store.index("turn")
        return len(self.store), 0 if turns is None else len(turns)

    def _build(self) -> None:
        """Units, their turns and facts, BM25 indexes, time flags and days, from the store."""
        records = self.store.records()
        turns = self.store.passages("turn")
        dates = self.memory.session_dates() if self.memory is not None else {}
        times = self.memory.times([r.id for r in records]) if self.memory is not None and records else {}
        unit_of: dict[object, int] = {}
        unit_turn: list[int] = []  # position in ``turns`` or -1
        unit_records: list[list[int]] = []
        unit_key: list[tuple[str | None, str, int]] = []  # (source, session_id, session_index)

        def unit(key: object, source: str | None, session_id: str, session_index: int) -> int:
            if key not in unit_of:
                unit_of[key] = len(unit_turn)
                unit_turn.append(-1)
                unit_records.append([])
                unit_key.append((source, session_id, session_index))
            return unit_of[key]

        for position, passage in enumerate(turns):
            keys = passage.sources or (("turn", passage.id),)
            for key in keys:
                u = unit(
                    key, key if isinstance(key, str) else None, passage.session_id, passage.session_index
                )
                unit_turn[u] = position
        fact_unit: list[tuple[int, int]] = []  # (position in ``records``, unit)
        for position, record in enumerate(records):
            for key in record.sources or (("fact", record.id),):
                u = unit(key, key if isinstance(key, str) else None, record.session_id, record.session_index)
                unit_records[u].append(position)
                fact_unit.append((position, u))
        self._records, self._turns = records, turns
        self._record_pos = {r.id: i for i, r in enumerate(records)}
        self._turn_pos = {p.id: i for i, p in enumerate(turns)}
        self._unit_turn = np.asarray(unit_turn, dtype=np.int64)
        self._unit_records, self._unit_key = unit_records, unit_key
        self._fact_pairs = np.asarray(fact_unit, dtype=np.int64).reshape(-1, 2)
        self._fact_lexical = LexicalIndex([fact_text(r.subject, r.relation, r.object) for r in records])
        self._turn_lexical = LexicalIndex([p.text for p in turns])
        n = len(unit_turn)
        self._has_time = np.zeros(n, dtype=bool)
        self._unit_days: list[set[float]] = [set() for _ in range(n)]
        for u in range(n):
            texts = [records[i] for i in unit_records[u]]
            if unit_turn[u] >= 0:
                self._has_time[u] = bool(find_times(turns[unit_turn[u]].text, 0))
            self._has_time[u] |= any(find_times(r.object, 0) for r in texts)
            session_id = unit_key[u][1]
            if session_id in dates:
                self._unit_days[u].add(dates[session_id])
            for r in texts:
                if r.id in times:
                    self._unit_days[u].add(times[r.id][0])
        self._session_day = dates
        self._built_for = (len(records), len(turns))

    # --- scores -----------------------------------------------------------------------------
    def _dense(self, kind: str, queries: np.ndarray, positions: dict[int, int], size: int) -> np.ndarray:
        """``[B, size]`` dense scores of the ``[B, D]`` questions (NaN: not in a question's top
        ``pool``): one index search for the batch."""
        index = self.store.index(kind)
        out = np.full((len(queries), size), np.nan, dtype=np.float32)
        if index is None or size == 0:
            return out
        scores, ids = index.search(queries, min(self.pool, len(index)))
        for row, (row_scores, row_ids) in enumerate(zip(np.asarray(scores), np.asarray(ids), strict=True)):
            for score, i in zip(row_scores, row_ids, strict=True):
                if i >= 0 and int(i) in positions:
                    out[row, positions[int(i)]] = score
        return out

    def _standardised(self, x: np.ndarray) -> np.ndarray:
        """z-scores over the top ``pool`` values (NaN: not in the dense pool); the rest get the
        pool's lowest z-score."""
        known = np.where(np.isnan(x), -np.inf, x)
        top = np.sort(known)[::-1][: self.pool]
        top = top[np.isfinite(top)]
        if top.size == 0:
            return np.zeros_like(x)
        mean, std = float(top.mean()), float(top.std()) or 1.0
        z = (known - mean) / std
        floor = (float(top[-1]) - mean) / std
        return np.where(known >= top[-1], z, floor).astype(np.float32)

    def scores(self, question: str, vector: np.ndarray | None = None, now: Day | None = None) -> np.ndarray:
        """``[units]`` scores of every evidence unit for ``question`` (module docs, steps 1-3)."""
        query = None if vector is None else np.asarray(vector, np.float32)
        if query is None and self._unit_count() > 0:
            query = self.store.encode([question])[0]
        return self.scores_many([question], None if query is None else query[None], [now])[0]

    def _unit_count(self) -> int:
        if self._built_for is None or self._built_for != self._sizes():
            self._build()
        return len(self._unit_turn)

    def scores_many(
        self, questions: Sequence[str], vectors: np.ndarray | None, nows: Sequence[Day | None]
    ) -> list[np.ndarray]:
        """``scores`` of each question (``vectors [B, D]``: their embeddings), as one pass: the
        tables checked once, one dense index search per kind for the batch."""
        n = self._unit_count()
        if n == 0:
            return [np.zeros(0, dtype=np.float32) for _ in questions]
        queries = np.asarray(vectors, dtype=np.float32).reshape(len(questions), -1)
        dense_turns = self._dense("turn", queries, self._turn_pos, len(self._turns))
        dense_facts = self._dense(FACT_KIND, queries, self._record_pos, len(self._records))
        w = self.lexical_weight
        out = []
        for question, now, dense_turn, dense_fact in zip(
            questions, nows, dense_turns, dense_facts, strict=True
        ):
            turn = self._standardised(dense_turn) + w * self._standardised(
                self._turn_lexical.scores(question)
            )
            fact = self._standardised(dense_fact) + w * self._standardised(
                self._fact_lexical.scores(question)
            )
            low_turn = float(turn.min()) if turn.size else 0.0
            unit_turn = (  # a memory without turns: every unit gets the stand-in
                np.where(self._unit_turn >= 0, turn[np.maximum(self._unit_turn, 0)], low_turn)
                if turn.size
                else np.full(n, low_turn, dtype=np.float32)
            )
            unit_fact = np.full(n, -np.inf, dtype=np.float32)
            if len(self._fact_pairs):
                np.maximum.at(unit_fact, self._fact_pairs[:, 1], fact[self._fact_pairs[:, 0]])
            scores = unit_turn + np.where(np.isfinite(unit_fact), unit_fact, low_turn)
            out.append(scores + self.time_boost * self._time_matches(question, now))
        return out

    def _time_matches(self, question: str, now: Day | None) -> np.ndarray:
        if now is None and self.memory is not None:
            now = self.memory.latest_observation()
        asked = query_mode(question, 0 if now is None else as_day(now))
        if asked.mode == QueryMode.TIME_SEEKING:
            return self._has_time.astype(np.float32)
        if asked.mode == QueryMode.EXPLICIT and asked.span is not None:
            span = asked.span
            return np.asarray([any(span.contains(d) for d in days) for days in self._unit_days], np.float32)
        return np.zeros(len(self._unit_turn), dtype=np.float32)

    def ranked(
        self, question: str, k: int = 10, *, vector: np.ndarray | None = None, now: Day | None = None
    ) -> list[Evidence]:
        """The top ``k`` evidence units, best first. ``vector``: the question's embedding when
        already computed; ``now``: the day the question is asked (for relative expressions in it;
        default the latest session date)."""
        self._check(question, k)
        return self._top(self.scores(question, vector, now), k)

    def ranked_many(
        self, questions: Sequence[str], k: int, vectors: np.ndarray, nows: Sequence[Day | None]
    ) -> list[list[Evidence]]:
        """``ranked`` for each question (``vectors [B, D]`` their embeddings, ``nows`` their days) in
        one pass (``scores_many``)."""
        for question in questions:
            self._check(question, k)
        return [self._top(scores, k) for scores in self.scores_many(questions, vectors, nows)]

    @staticmethod
    def _check(question: str, k: int) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"question must be a non-empty string, got {question!r}")

    def _top(self, scores: np.ndarray, k: int) -> list[Evidence]:
        top = np.argsort(-scores, kind="stable")[:k]
        return [self._evidence(int(u), float(scores[u])) for u in top]

    def retrieve(
        self, question: str, k: int = 10, *, vector: np.ndarray | None = None, now: Day | None = None
    ) -> list[Evidence]:
        """``ranked``'s units in source order (session, then position in it), as a reader gets them."""
        items = self.ranked(question, k, vector=vector, now=now)
        return sorted(
            items, key=lambda e: (e.session_index, e.turn.position if e.turn else 0, e.source or "")
        )

    def _evidence(self, u: int, score: float) -> Evidence:
        source, session_id, session_index = self._unit_key[u]
        turn = self._turns[self._unit_turn[u]] if self._unit_turn[u] >= 0 else None
        records = tuple(self._records[i] for i in self._unit_records[u])
        # The unit's own id; a unit without one (no source given) counts what its items name.
        ids = (source,) if source else tuple(dict.fromkeys(s for r in records for s in r.sources))
        return Evidence(
            source, session_id, session_index, turn, records, self._session_day.get(session_id), score, ids
        )
