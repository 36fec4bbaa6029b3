"""HybridRetriever: units grouped by source id, dense + BM25 fusion, time boosts, growth; BM25 index."""

from __future__ import annotations

import numpy as np
import pytest

from rotmem.memory import HashingEncoder, TemporalMemory, TEMStore
from rotmem.memory.records import ExtractedFact
from rotmem.memory.retrieval.hybrid import HybridRetriever, render_evidence
from rotmem.memory.retrieval.lexical import LexicalIndex, tokenize

pytest.importorskip("bm25s")


def test_tokens_and_bm25_scores():
    assert tokenize("The cat's 2 hats, a HAT!") == ["the", "cat", "hats", "hat"]
    index = LexicalIndex(["red apple pie", "green apple", "blue sky"])
    scores = index.scores("apple pie")
    assert scores.shape == (3,) and scores[0] > scores[1] > 0 == scores[2]
    assert not index.scores("zebra").any() and not index.scores("?").any()
    assert LexicalIndex([]).scores("anything").shape == (0,)


def _memory() -> TemporalMemory:
    memory = TemporalMemory(encoder=HashingEncoder(128), verify=False)
    memory.add_session(
        "s1",
        [ExtractedFact("Ann", "adopted", "a grey cat named Momo", sources=("D1:2",))],
        date="2023-05-08",
        turns=["Ann: hello there", "Ann: I adopted a cat yesterday!", "Bo: lovely weather"],
        turn_ids=["D1:1", "D1:2", "D1:3"],
    )
    memory.add_session(
        "s2",
        [ExtractedFact("Bo", "ran", "a marathon in Berlin", sources=("D2:1", "D2:2"))],
        date="2023-06-20",
        turns=["Bo: guess what, I ran far", "Bo: the Berlin marathon!", "Ann: wow"],
        turn_ids=["D2:1", "D2:2", "D2:3"],
    )
    return memory


def test_units_group_a_turn_and_the_facts_read_from_it():
    memory = _memory()
    retriever = HybridRetriever(memory)
    units = retriever.retrieve("What pet did Ann adopt?", k=6)
    assert len(units) == 6 and [u.source for u in units] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D2:3"]
    by_source = {u.source: u for u in units}
    assert by_source["D1:2"].turn.text == "Ann: I adopted a cat yesterday!"
    assert [r.object for r in by_source["D1:2"].records] == ["a grey cat named Momo"]
    assert [r.object for r in by_source["D2:1"].records] == [r.object for r in by_source["D2:2"].records]
    assert by_source["D1:2"].ids == ("D1:2",) and by_source["D1:2"].day == memory.session_dates()["s1"]
    [best] = retriever.retrieve("What pet did Ann adopt?", k=1)
    assert best.source == "D1:2"
    text = render_evidence([best])
    assert text.splitlines() == [
        "[2023-05-08] Ann: I adopted a cat yesterday!",
        "  - Ann adopted a grey cat named Momo",
    ]


def test_bm25_ranks_first_a_unit_naming_a_rare_word():
    memory = _memory()
    lexical = HybridRetriever(memory, lexical_weight=1.0, time_boost=0.0)
    scores = lexical.scores("marathon")
    units = lexical._unit_key
    best = units[int(np.argmax(scores))][0]
    assert best in ("D2:1", "D2:2")  # the fact "a marathon in Berlin" and the turn both name it


def test_a_time_seeking_question_lifts_units_that_say_a_time():
    memory = _memory()
    plain = HybridRetriever(memory, time_boost=0.0)
    timed = HybridRetriever(memory, time_boost=0.5)
    question = "When did Ann adopt a cat?"
    lift = timed.scores(question) - plain.scores(question)
    keys = [key[0] for key in timed._unit_key]
    assert lift[keys.index("D1:2")] == pytest.approx(0.5)  # "yesterday"
    assert lift[keys.index("D1:1")] == 0.0
    assert not (timed.scores("What pet did Ann adopt?") - plain.scores("What pet did Ann adopt?")).any()


def test_an_explicit_question_lifts_units_dated_in_its_span():
    memory = _memory()
    plain = HybridRetriever(memory, time_boost=0.0)
    timed = HybridRetriever(memory, time_boost=0.5)
    question = "What did Bo do in June 2023?"
    lift = timed.scores(question) - plain.scores(question)
    sessions = [key[1] for key in timed._unit_key]
    assert all(lift[i] == pytest.approx(0.5 if s == "s2" else 0.0) for i, s in enumerate(sessions))


def test_units_follow_the_store_as_it_grows_and_work_on_a_plain_store():
    store = TEMStore(encoder=HashingEncoder(64))
    store.add_session("a", turns=["kim: I play chess"], turn_ids=["T1"])
    retriever = HybridRetriever(store)
    assert [u.source for u in retriever.retrieve("chess", k=3)] == ["T1"]
    store.add_session("b", [("kim", "plays", "go")], text=None, turns=["kim: and go"])
    units = retriever.retrieve("does kim play go", k=3)
    assert len(units) == 3  # a turn without an id and a fact without a source are units of their own
    assert {u.source for u in units} == {"T1", None}
    assert any(u.records and u.records[0].object == "go" for u in units)


def test_bad_arguments_are_named():
    memory = _memory()
    with pytest.raises(ValueError, match="lexical_weight"):
        HybridRetriever(memory, lexical_weight=-1)
    with pytest.raises(ValueError, match="pool"):
        HybridRetriever(memory, pool=1)
    with pytest.raises(ValueError, match="k must be"):
        HybridRetriever(memory).retrieve("x", k=0)
    assert HybridRetriever(TEMStore(encoder=HashingEncoder(8))).retrieve("anything", k=3) == []


def test_hits_are_the_ranked_units_facts_and_scores():
    """``hits_many`` (what BestMemory reads) holds ``ranked_many``'s units, in order, without Evidence."""
    memory = _memory()
    retriever = HybridRetriever(memory)
    questions = ["What pet did Ann adopt?", "When did Bo run a marathon?"]
    vectors = memory.store.encode(questions)
    ranked = retriever.ranked_many(questions, 4, vectors, [None, None])
    hits = retriever.hits_many(questions, 4, vectors, [None, None])
    assert [[(u.records, u.score) for u in units] for units in ranked] == [list(h) for h in hits]
    assert all(len(h) == 4 for h in hits) and any(hit.records for h in hits for hit in h)


def test_sparse_bm25_scores_are_the_nonzero_scores():
    """``sparse_scores`` lists exactly the texts with a nonzero score, with the same float32 values."""
    index = LexicalIndex(["red apple pie", "green apple", "blue sky", "apple apple tree", "pie"])
    for query in ("apple pie", "pie pie sky", "zebra", "apple"):
        scores = index.scores(query)
        positions, values = index.sparse_scores(query)
        assert positions.tolist() == np.flatnonzero(scores).tolist()
        assert values.dtype == np.float32 and np.array_equal(values, scores[positions])


def test_times_are_the_memorys_as_the_store_grows():
    """``times`` (kept with the tables) gives what ``TemporalMemory.times`` reads, for facts added
    after the tables were built and for facts the tables do not hold yet (read from the memory)."""
    memory = _memory()
    retriever = HybridRetriever(memory)
    retriever.refresh()
    memory.add_session("s3", [("Cy", "visited", "Rome", "2023-07-01")], date="2023-07-02", turns=[])
    newest = memory.store.records()[-1].id
    assert retriever.times([newest]) == memory.times([newest])  # not in the tables: from the memory
    retriever.refresh()
    ids = [r.id for r in memory.store.records()] + [10**6]
    assert retriever.times(ids) == memory.times(ids) and len(memory.times(ids)) == len(ids) - 1


def test_records_by_id_read_from_the_tables_are_the_stores_after_a_new_version():
    """The slot completion reads facts from the hybrid's tables: the same records as the store's,
    ``[historical]`` flags included once a later session replaces a version."""
    memory = _memory()
    retriever = HybridRetriever(memory)
    memory.add_session("s3", [ExtractedFact("Ann", "lives in", "Paris")], date="2023-07-01")
    retriever.refresh()
    memory.add_session("s4", [ExtractedFact("Ann", "lives in", "Berlin")], date="2023-08-01")
    retriever.refresh()  # reads s4, and Paris again: now historical
    ids = [r.id for r in memory.store.records()]
    unknown = max(ids) + 10
    assert retriever.records_by_id([*reversed(ids), unknown]) == memory.store.records_by_id(ids)
    assert list(retriever.records_by_id(ids)) == sorted(ids)
    paris = next(r for r in retriever.records_by_id(ids).values() if r.object == "Paris")
    assert paris.historical
    memory.add_session("s5", [ExtractedFact("Bo", "lives in", "Rome")], date="2023-09-01")
    new = max(r.id for r in memory.store.records())  # not in the tables yet: read from the store
    assert retriever.records_by_id([new]) == memory.store.records_by_id([new])
