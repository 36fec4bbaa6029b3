"""``TemporalMemory.retrieve_many``: a batch of questions gives what ``retrieve`` gives each one, by
the documented ranking (``max(S_sem, 0)`` without a model, ties by source order), with fewer
records fetched; the latest-date index makes the default "now" a lookup."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from rotmem.memory import HashingEncoder
from rotmem.memory.tem.tense import present_order
from rotmem.memory.temporal.memory import TemporalMemory
from rotmem.memory.temporal.records import Query

WORDS = ["rome", "paris", "lisbon", "tea", "coffee", "chess", "nurse", "pilot"]


@pytest.fixture
def memory(tmp_path) -> TemporalMemory:
    """Repeated triples (exact score ties) and unrelated facts (cosine <= 0 to most questions)."""
    mem = TemporalMemory(str(tmp_path / "m.db"), encoder=HashingEncoder(64))
    rng = np.random.default_rng(0)
    sessions = []
    for s in range(60):
        facts = [
            (
                f"p{rng.integers(6)}",
                str(rng.choice(["lives in", "likes", "works as"])),
                str(rng.choice(WORDS)),
            )
            for _ in range(5)
        ]
        sessions.append(dict(session_id=f"s{s}", facts=facts, date=19000 + s, turns=()))
    mem.add_sessions(sessions)
    return mem


def reference(memory: TemporalMemory, question: str, k: int) -> list[int]:
    """The ranking the module documents, computed over every candidate without shortcuts."""
    candidates = memory.store.retrieve(question, k=max(k, memory.candidates))
    top = sorted(candidates, key=lambda r: (-max(r.score, 0.0), r.session_index, r.id))[:k]
    return [r.id for r in present_order(top, question, None, None, memory.store.version_group)]


QUESTIONS = ["where does p1 live", "does p2 like tea", "zzz unrelated words", "p3 works as pilot"]


@pytest.mark.parametrize("k", [1, 3, 15, 40, 300])
def test_a_batch_ranks_each_question_as_the_reference_does(memory: TemporalMemory, k: int) -> None:
    batch = memory.retrieve_many([Query(q, k) for q in QUESTIONS])
    for question, found in zip(QUESTIONS, batch, strict=True):
        assert [r.record.id for r in found] == reference(memory, question, k)
        assert [r.record.id for r in found] == [r.record.id for r in memory.retrieve(question, k=k)]


def test_given_vectors_are_used_and_each_query_keeps_its_own_k_and_now(memory: TemporalMemory) -> None:
    queries = [Query("where does p1 live", 2, 19010), Query("does p2 like tea", 5)]
    vectors = memory.store.encode([q.question for q in queries])
    first, second = memory.retrieve_many(queries, vectors)
    assert len(first) == 2 and len(second) == 5
    assert [r.record.id for r in second] == reference(memory, "does p2 like tea", 5)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        memory.retrieve_many([Query("fine", 0)])
    with pytest.raises(ValueError, match="non-empty string"):
        memory.retrieve_many([Query("  ", 3)])


def test_an_empty_memory_retrieves_nothing_for_every_query(tmp_path) -> None:
    mem = TemporalMemory(str(tmp_path / "e.db"), encoder=HashingEncoder(64))
    assert mem.retrieve_many([Query("anything"), Query("else", 3)]) == [[], []]


def test_the_latest_date_is_an_index_lookup_and_old_files_get_the_indexes(tmp_path, memory) -> None:
    path = memory.store.path
    memory.close()
    with sqlite3.connect(path) as connection:
        plan = connection.execute("EXPLAIN QUERY PLAN SELECT MAX(t_obs) FROM temporal_facts").fetchall()
        assert any("temporal_facts_by_t_obs" in str(row) for row in plan)
        connection.execute("DROP INDEX temporal_facts_by_t_obs")  # a file written before them
        connection.execute("DROP INDEX session_dates_by_t_obs")
    reopened = TemporalMemory(path, encoder=HashingEncoder(64))
    assert reopened.latest_observation() == 19059
    reopened.close()
    with sqlite3.connect(path) as connection:
        names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"temporal_facts_by_t_obs", "session_dates_by_t_obs"} <= names
