"""``rotmem.memory.BestMemory`` end to end on a tiny memory: preset, fit, time constraints, rendering."""

from __future__ import annotations

import pytest

from rotmem.memory import BestMemory, ExtractedFact, HashingEncoder, render_in_source_order
from rotmem.memory.retrieval import preset_fit_config
from rotmem.memory.temporal.fit import FitConfig
from rotmem.memory.temporal.records import Query
from rotmem.models import HistorySpec

SESSIONS = [
    ("s1", "2023-05-08", [("Alice", "lives in", "Paris"), ("Bob", "works at", "Acme")]),
    ("s2", "2023-09-01", [("Alice", "lives in", "Berlin")]),
    (
        "s3",
        "2024-02-11",
        [("Bob", "works at", "Initech"), ExtractedFact("Alice", "visited", "Rome", "2024-01-20")],
    ),
]


@pytest.fixture
def best() -> BestMemory:
    memory = BestMemory.preset(encoder=HashingEncoder(256))
    for session_id, date, facts in SESSIONS:
        memory.add_session(session_id, facts, date=date)
    return memory


def objects(records) -> list[str]:
    return [r.record.object for r in records]


def test_the_preset_is_the_documented_best_configuration(best: BestMemory) -> None:
    windows = dict(history=HistorySpec(slot_windows=(1, 3, 7, 30, 90, 365), pair_windows=(1, 3, 7, 30)))
    assert best.fit_config == FitConfig(family="tntcomplex", epochs=10, batch_size=1024, dim=64, **windows)
    assert (best.beta, best.constrain, best.rerank, best.complete_slots) == (0.5, True, True, True)
    assert preset_fit_config(epochs=2) == FitConfig(
        family="tntcomplex", epochs=2, batch_size=1024, dim=64, **windows
    )


def test_time_constraints_pick_the_version_the_question_asks_for(best: BestMemory) -> None:
    best.fit(preset_fit_config(epochs=1))  # a short fit: the re-rank path runs
    now = best.retrieve("Where does Alice live now?", k=3)
    assert now[0].record.object == "Berlin"
    may = best.retrieve("Where did Alice live in May 2023?", k=3)
    assert may[0].record.object == "Paris"
    as_of = best.retrieve("Where did Bob work as of December 2023?", k=3)
    assert as_of[0].record.object == "Acme"
    first = best.retrieve("Where did Bob work first?", k=3)
    assert first[0].record.object == "Acme"


def test_retrieve_is_by_score_and_rendering_in_source_order_is_a_separate_step(best: BestMemory) -> None:
    found = best.retrieve("Alice lives in", k=3)  # no time constraint: the score decides
    scores = [r.score for r in found]
    assert scores == sorted(scores, reverse=True) and len(found) == 3
    text = render_in_source_order(found).splitlines()
    order = sorted(found, key=lambda r: (r.record.session_index, r.record.id))
    assert text == [render_in_source_order([r]) for r in order]
    assert "Paris [historical]" in render_in_source_order(best.retrieve("Where did Alice live in 2023?", k=5))


def test_bad_arguments_are_refused(best: BestMemory) -> None:
    with pytest.raises(ValueError, match="k must be"):
        best.retrieve("Where?", k=0)
    with pytest.raises(TypeError, match="TemporalMemory"):
        BestMemory(best.memory.store)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pool"):
        BestMemory(best.memory, pool=0)


def test_retrieve_many_gives_what_retrieve_gives_each_question(best: BestMemory) -> None:
    best.add_session(
        "s4", [("Carol", "works at", "Initech")], date="2024-03-01", text="Carol: I started at Initech."
    )
    queries = [
        Query("Where does Alice live now?", 3),
        Query("Where did Alice live in May 2023?", 2, "2024-06-01"),
        Query("Where did Bob work first?", 4),
        Query("Who works at Initech?", 5, 19800),
        Query("Where did Bob work in the same year as Alice visited Rome?", 3),  # an event anchor
        Query("Alice lives in", 1),
    ]
    one_by_one = [best.retrieve(q.question, q.k, q.now) for q in queries]
    batched = best.retrieve_many(queries)
    vectors = best.memory.store.encode([q.question for q in queries])
    assert best.retrieve_many(queries, vectors) == batched
    for alone, together in zip(one_by_one, batched, strict=True):
        assert [r.record.id for r in together] == [r.record.id for r in alone] and together
        assert [r.score for r in together] == pytest.approx([r.score for r in alone], abs=1e-5)
    assert objects(batched[0])[0] == "Berlin" and objects(batched[1])[0] == "Paris"
    assert best.retrieve_many([]) == []
    with pytest.raises(ValueError, match="k must be"):
        best.retrieve_many([Query("Where?", 0)])


def test_present_reads_a_question_without_a_time_as_asked_now(best: BestMemory) -> None:
    present = BestMemory(best.memory, rerank=False, present=True)
    assert objects(present.retrieve("Where does Alice live?", k=2)) == ["Berlin", "Paris"]
    assert present._constraint("Where does Alice live?", 19700).relation == "current"
    assert not present._constraint("Where did Alice live?", 19700)  # asks about the past: no "now"
    assert not best._constraint("Where does Alice live?", 19700)  # off by default
