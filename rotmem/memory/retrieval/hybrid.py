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

The unit tables and the BM25 indexes are built on the first query and then grown by the sessions
the store gains (written here or committed by another process): the same tables as a build over the
whole store. A session given an index before the last one read rebuilds them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from rotmem.data import date_of
from rotmem.memory.records import Passage, Record
from rotmem.memory.retrieval.grouped_max import GroupedMax
from rotmem.memory.retrieval.lexical import LexicalIndex
from rotmem.memory.tem.indexes import FACT_KIND
from rotmem.memory.tem.store import TEMStore, fact_text
from rotmem.memory.temporal.memory import TemporalMemory
from rotmem.memory.temporal.records import Day
from rotmem.memory.temporal.time_expressions import QueryMode, as_day, find_times, query_mode

LEXICAL_WEIGHT = 0.5
TIME_BOOST = 0.5
POOL = 2048  # FAISS on a GPU returns at most 2048 neighbours per search


def _positions(table: np.ndarray, ids: Sequence[int], end: int) -> np.ndarray:
    """``table`` (id -> position, -1: none) grown to hold ``ids``, the last ``len(ids)`` positions
    before ``end``."""
    if not ids:
        return table
    ids_array = np.asarray(ids, dtype=np.int64)
    if int(ids_array.max()) >= len(table):
        grown = np.full(max(2 * len(table), int(ids_array.max()) + 1), -1, dtype=np.int64)
        grown[: len(table)] = table
        table = grown
    table[ids_array] = np.arange(end - len(ids), end)
    return table


def _largest(values: np.ndarray, n: int) -> np.ndarray:
    """The ``n`` largest of ``values`` (all when fewer), in no order. BM25 scores are mostly 0: the
    positive ones are selected first, so that the rest, all equal, need no selection."""
    if values.size <= n:
        return values
    high = values[values > 0]
    if high.size >= n:
        return np.partition(high, high.size - n)[-n:]
    low, need = values[values <= 0], n - high.size
    if low.min() < low.max():
        low = np.partition(low, low.size - need)
    return np.concatenate([high, low[-need:]])


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


class UnitHit(NamedTuple):
    """An evidence unit's facts and score (``Evidence`` without its turn, date and ids)."""

    records: tuple[Record, ...]
    score: float


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
        self.generation = 0  # counts the builds from scratch (``records`` renumbered)
        self._reset()

    # --- tables -----------------------------------------------------------------------------
    def _sizes(self) -> tuple[int, int]:
        self.store.refresh()
        turns = self.store.index("turn")
        return len(self.store), 0 if turns is None else len(turns)

    def refresh(self) -> int:
        """The number of units, the tables first brought up to date with the store."""
        fresh = self._built_for is not None and self._built_for == self._sizes()
        if not fresh and not self._extend():
            self._reset()
            self._extend()
        return len(self._unit_turn)

    @property
    def records(self) -> list[Record]:
        """The facts the tables hold, in table order (grows; renumbered when ``generation`` moves)."""
        return self._records

    def _reset(self) -> None:
        """Empty tables (the next ``_extend`` reads the whole store)."""
        self._records: list[Record] = []
        self._turns: list[Passage] = []
        self._fact_position = np.full(1, -1, dtype=np.int64)  # record id -> position in _records
        self._fact_times: dict[int, tuple[float, float]] = {}  # record id -> (t_happen, t_obs), if timed
        self._turn_position = np.full(1, -1, dtype=np.int64)  # passage id -> position in _turns
        self._unit_of: dict[object, int] = {}
        self._unit_turns: list[int] = []  # position in ``_turns`` or -1
        self._unit_records: list[list[int]] = []
        self._unit_key: list[tuple[str | None, str, int]] = []  # (source, session_id, session_index)
        self._unit_days: list[set[float]] = []
        self._unit_facts = GroupedMax()  # (position in _records, unit) pairs
        self._day_pairs = np.zeros((0, 2), dtype=np.float64)  # (unit, day): the units' days, flat
        self._has_time = np.zeros(0, dtype=bool)
        self._group_positions: dict[str, list[int]] = {}  # version group -> positions in _records
        self._fact_lexical, self._turn_lexical = LexicalIndex(), LexicalIndex()
        self._session_day: dict[str, float] = {}
        self._unit_turn = np.zeros(0, dtype=np.int64)
        self._last_session = -math.inf
        self._last_ids = (-1, -1)  # the largest record and passage ids read
        self.generation += 1

    def _extend(self) -> bool:
        """Add what the store has gained since the last look: its new sessions' turns and facts,
        in the order a build over the whole store would take them (session by session, turns
        before facts). False, and nothing changed, when a new item belongs before the last session
        read (a session index given out of order): the tables are then built anew."""
        records = self.store.records(after_id=self._last_ids[0])
        turns = self.store.passages("turn", after_id=self._last_ids[1])
        if any(item.session_index <= self._last_session for item in [*records, *turns]):
            return False
        if records or turns:
            self._add(records, turns)
        self._built_for = (len(self._records), len(self._turns))
        return True

    def _add(self, records: list[Record], turns: list[Passage]) -> None:
        """Append ``records`` and ``turns`` (all of sessions after the tables' last) to the tables."""
        if self.memory is not None:
            self._session_day.update(
                self.memory.session_dates([item.session_id for item in [*records, *turns]])
            )
        by_session: dict[int, tuple[list[Passage], list[Record]]] = defaultdict(lambda: ([], []))
        for passage in turns:
            by_session[passage.session_index][0].append(passage)
        for record in records:
            by_session[record.session_index][1].append(record)
        touched: set[int] = set()
        pairs: list[tuple[int, int]] = []
        for session_index in sorted(by_session):
            session_turns, session_records = by_session[session_index]
            for passage in session_turns:
                for key in passage.sources or (("turn", passage.id),):
                    u = self._unit(key, passage.session_id, passage.session_index)
                    self._unit_turns[u] = len(self._turns)
                    touched.add(u)
                self._turns.append(passage)
            for record in session_records:
                for key in record.sources or (("fact", record.id),):
                    u = self._unit(key, record.session_id, record.session_index)
                    self._unit_records[u].append(len(self._records))
                    pairs.append((len(self._records), u))
                    touched.add(u)
                self._records.append(record)
            self._last_session = session_index
        self._fact_position = _positions(self._fact_position, [r.id for r in records], len(self._records))
        self._turn_position = _positions(self._turn_position, [p.id for p in turns], len(self._turns))
        pairs_array = np.asarray(pairs, np.int64).reshape(-1, 2)
        self._unit_facts.add(pairs_array[:, 0], pairs_array[:, 1])
        self._fact_lexical.add(fact_text(r.subject, r.relation, r.object) for r in records)
        self._turn_lexical.add(p.text for p in turns)
        self._refresh_current(records)
        self._date_units(sorted(touched))
        self._last_ids = (
            max([self._last_ids[0], *(r.id for r in records)]),
            max([self._last_ids[1], *(p.id for p in turns)]),
        )

    def _unit(self, key: object, session_id: str, session_index: int) -> int:
        """The unit of ``key`` (a source id, or ``(kind, id)`` for an item without one), made if new."""
        if key not in self._unit_of:
            self._unit_of[key] = len(self._unit_turns)
            self._unit_turns.append(-1)
            self._unit_records.append([])
            self._unit_key.append((key if isinstance(key, str) else None, session_id, session_index))
            self._unit_days.append(set())
        return self._unit_of[key]

    def _refresh_current(self, records: list[Record]) -> None:
        """Re-read the earlier facts of the new ``records``' version groups: a new version makes the
        current one ``[historical]`` (TEM's one update)."""
        stale: list[int] = []
        first_new = len(self._records) - len(records)
        for position, record in enumerate(records, first_new):
            group = self.store.version_group(record)
            stale += [p for p in self._group_positions.get(group, ()) if not self._records[p].historical]
            self._group_positions.setdefault(group, []).append(position)
        if stale:
            fresh = self.store.records_by_id([self._records[p].id for p in stale])
            for p in stale:
                self._records[p] = fresh.get(self._records[p].id, self._records[p])

    def _date_units(self, units: list[int]) -> None:
        """Time flags and days of ``units`` (new or grown): whether their turn or a fact says a
        time, and their session's date and facts' ``t_happen``."""
        old = len(self._unit_turn)  # the array follows the list: its new units, then those touched
        self._unit_turn = np.concatenate([self._unit_turn, np.asarray(self._unit_turns[old:], np.int64)])
        self._unit_turn[units] = [self._unit_turns[u] for u in units]
        self._has_time = np.concatenate([self._has_time, np.zeros(len(self._unit_turn) - old, dtype=bool)])
        ids = [self._records[i].id for u in units for i in self._unit_records[u]]
        times = self.memory.times(ids) if self.memory is not None and ids else {}
        self._fact_times.update(times)
        new_days: list[tuple[int, float]] = []
        for u in units:
            facts = [self._records[i] for i in self._unit_records[u]]
            turn = self._unit_turns[u]
            said = bool(find_times(self._turns[turn].text, 0)) if turn >= 0 else False
            self._has_time[u] = said or any(find_times(r.object, 0) for r in facts)
            session = self._unit_key[u][1]
            days = {times[r.id][0] for r in facts if r.id in times}
            days |= {self._session_day[session]} if session in self._session_day else set()
            new_days += [(u, day) for day in sorted(days - self._unit_days[u])]
            self._unit_days[u] |= days
        self._day_pairs = np.concatenate([self._day_pairs, np.asarray(new_days, np.float64).reshape(-1, 2)])

    def times(self, ids: Sequence[int]) -> dict[int, tuple[float, float]]:
        """``TemporalMemory.times`` of the facts ``ids``: for those the tables hold, the times read
        when they were added (a fact's times are written with it and never change); the others'
        from the memory."""
        known = self._fact_times
        out = {i: known[i] for i in ids if i in known}
        unread = [i for i in ids if i not in known and not self._holds(i)]
        if unread and self.memory is not None:
            out.update(self.memory.times(unread))
        return out

    def records_by_id(self, ids: Sequence[int]) -> dict[int, Record]:
        """``TEMStore.records_by_id`` of the facts ``ids``, ascending: those the tables hold from
        them (kept as stored: a new version's earlier ones are read again, ``_refresh_current``),
        the others from the store."""
        held = {i: self._records[self._fact_position[i]] for i in sorted(set(ids)) if self._holds(i)}
        unread = [i for i in ids if i not in held]
        if unread:
            held = dict(sorted({**held, **self.store.records_by_id(unread)}.items()))
        return held

    def _holds(self, record_id: int) -> bool:
        """Whether the fact ``record_id`` is in the tables."""
        return 0 <= record_id < len(self._fact_position) and self._fact_position[record_id] >= 0

    # --- scores -----------------------------------------------------------------------------
    def _dense(
        self, kind: str, queries: np.ndarray, positions: np.ndarray, size: int
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each of the ``[B, D]`` questions' dense pool as ``(positions, float32 scores)`` (its top
        ``pool`` items by the index; an item outside it has no dense score): one index search for
        the batch; ``positions``: id -> position (-1: none), ``size`` items in all."""
        index = self.store.index(kind)
        if index is None or size == 0:
            return [(np.zeros(0, np.int64), np.zeros(0, np.float32)) for _ in queries]
        scores, ids = index.search(queries, min(self.pool, len(index)))
        ids, scores = np.asarray(ids, dtype=np.int64), np.asarray(scores, dtype=np.float32)
        at = np.where((ids >= 0) & (ids < len(positions)), positions[np.clip(ids, 0, len(positions) - 1)], -1)
        return [
            (row_at[row_at >= 0], row_scores[row_at >= 0])
            for row_at, row_scores in zip(at, scores, strict=True)
        ]

    def _standardised(self, positions: np.ndarray, values: np.ndarray, size: int, rest: float) -> np.ndarray:
        """``[size]`` z-scores of a stream that is ``values`` at ``positions`` and ``rest`` elsewhere
        (NaN: no score, 0: no BM25 term), over its top ``pool`` finite values; the items below the
        pool get the pool's lowest z-score. Built from the listed items and one fill, with the float32
        arithmetic of an elementwise pass over the whole stream (the same numbers)."""
        finite = np.isfinite(values)
        rests = 0 if math.isnan(rest) else min(size - len(positions), self.pool)  # enough for the top
        pool = np.concatenate([values[finite], np.full(rests, rest, np.float32)])
        top = np.sort(_largest(pool, self.pool))[::-1]  # as a full sort's top pool
        if top.size == 0:
            return np.zeros(size, dtype=np.float32)
        mean, std = float(top.mean()), float(top.std()) or 1.0
        lowest = (float(top[-1]) - mean) / std
        fill = ((np.float32([rest]) - mean) / std)[0] if rests and rest >= top[-1] else lowest
        out = np.full(size, fill, dtype=np.float32)
        kept = finite & (values >= top[-1])
        out[positions[kept]] = (values[kept] - mean) / std
        out[positions[~kept]] = lowest
        return out

    def _lexical(self, index: LexicalIndex, question: str) -> np.ndarray:
        """``[len(index)]`` z-scores of BM25 for ``question`` (``_standardised``; 0 outside its terms)."""
        positions, values = index.sparse_scores(question)
        return self._standardised(positions, values, len(index), 0.0)

    def scores(self, question: str, vector: np.ndarray | None = None, now: Day | None = None) -> np.ndarray:
        """``[units]`` scores of every evidence unit for ``question`` (module docs, steps 1-3)."""
        query = None if vector is None else np.asarray(vector, np.float32)
        if query is None and self.refresh() > 0:
            query = self.store.encode([question])[0]
        return self.scores_many([question], None if query is None else query[None], [now])[0]

    def scores_many(
        self, questions: Sequence[str], vectors: np.ndarray | None, nows: Sequence[Day | None]
    ) -> list[np.ndarray]:
        """``scores`` of each question (``vectors [B, D]``: their embeddings), as one pass: the
        tables checked once, one dense index search per kind for the batch."""
        n = self.refresh()
        if n == 0:
            return [np.zeros(0, dtype=np.float32) for _ in questions]
        queries = np.asarray(vectors, dtype=np.float32).reshape(len(questions), -1)
        dense_turns = self._dense("turn", queries, self._turn_position, len(self._turns))
        dense_facts = self._dense(FACT_KIND, queries, self._fact_position, len(self._records))
        w, nan = self.lexical_weight, math.nan
        out = []
        for question, now, dense_turn, dense_fact in zip(
            questions, nows, dense_turns, dense_facts, strict=True
        ):
            turn = self._standardised(*dense_turn, len(self._turns), nan) + w * self._lexical(
                self._turn_lexical, question
            )
            fact = self._standardised(*dense_fact, len(self._records), nan) + w * self._lexical(
                self._fact_lexical, question
            )
            low_turn = float(turn.min()) if turn.size else 0.0
            unit_turn = (  # a memory without turns: every unit gets the stand-in
                np.where(self._unit_turn >= 0, turn[np.maximum(self._unit_turn, 0)], low_turn)
                if turn.size
                else np.full(n, low_turn, dtype=np.float32)
            )
            unit_fact = np.full(n, -np.inf, dtype=np.float32)
            self._unit_facts.max_into(unit_fact, fact)
            scores = unit_turn + np.where(np.isfinite(unit_fact), unit_fact, low_turn)
            matches = self._time_matches(question, now)
            out.append(scores if matches is None else scores + self.time_boost * matches)
        return out

    def _time_matches(self, question: str, now: Day | None) -> np.ndarray | None:
        """``[units]`` 1.0 where the question's time mode boosts a unit (module docs, step 3), 0.0
        elsewhere; None when it boosts none (a sum of 0 left out)."""
        if now is None and self.memory is not None:
            now = self.memory.latest_observation()
        asked = query_mode(question, 0 if now is None else as_day(now))
        if asked.mode == QueryMode.TIME_SEEKING:
            return self._has_time.astype(np.float32)
        if asked.mode == QueryMode.EXPLICIT and asked.span is not None:
            units, days = self._day_pairs[:, 0].astype(np.int64), self._day_pairs[:, 1]
            inside = units[(asked.span.start <= days) & (days <= asked.span.end)]  # Span.contains
            return (np.bincount(inside, minlength=len(self._unit_turn)) > 0).astype(np.float32)
        return None

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

    def hits_many(
        self, questions: Sequence[str], k: int, vectors: np.ndarray, nows: Sequence[Day | None]
    ) -> list[list[UnitHit]]:
        """``ranked_many``'s units as ``UnitHit``s (facts and score): what ``BestMemory`` reads, without
        building each unit's ``Evidence``."""
        for question in questions:
            self._check(question, k)
        out = []
        records, unit_records = self._records, self._unit_records
        for scores in self.scores_many(questions, vectors, nows):
            top = self._top_units(scores, k)
            hits = zip(top.tolist(), scores[top].tolist(), strict=True)
            out.append([UnitHit(tuple([records[i] for i in unit_records[u]]), score) for u, score in hits])
        return out

    def _top(self, scores: np.ndarray, k: int) -> list[Evidence]:
        """The ``k`` best units' ``Evidence`` (``_top_units``)."""
        return [self._evidence(int(u), float(scores[u])) for u in self._top_units(scores, k)]

    def _top_units(self, scores: np.ndarray, k: int) -> np.ndarray:
        """The ``k`` best units, ties in unit order (a stable sort's top ``k``, without sorting all:
        most units sit at the lowest score, so the selection runs over those above it)."""
        if scores.size <= k:
            candidates = np.arange(scores.size)
        else:
            lowest = scores.min()
            above = np.nonzero(scores > lowest)[0]
            if above.size >= k:
                part = scores[above]
                candidates = above[part >= np.partition(part, part.size - k)[part.size - k]]
            else:  # every unit above the lowest score, then the first units at it
                at_lowest = np.nonzero(scores == lowest)[0][: k - above.size]
                candidates = np.sort(np.concatenate([above, at_lowest]))
        return candidates[np.argsort(-scores[candidates], kind="stable")[:k]]

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
