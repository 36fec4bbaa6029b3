"""The hybrid's tables and BM25 grow with the store: after every write, the same scores and
evidence as tables built over the whole store at once, and its selections the same as full sorts."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rotmem.memory import HashingEncoder, TemporalMemory
from rotmem.memory.records import ExtractedFact
from rotmem.memory.retrieval.best import BestMemory
from rotmem.memory.retrieval.hybrid import HybridRetriever
from rotmem.memory.retrieval.lexical import LexicalIndex, english_stopwords, tokenize
from rotmem.memory.temporal.records import Query

bm25s = pytest.importorskip("bm25s")

WORDS = ["apple", "pie", "red", "the", "of", "ann", "bo", "lives", "paris", "berlin", "x", "cat"]
texts = st.lists(st.lists(st.sampled_from(WORDS), max_size=7).map(" ".join), min_size=1, max_size=25)
questions = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)


@given(texts, st.integers(0, 25), questions)
def test_a_grown_bm25_index_scores_as_one_built_at_once(corpus, cut, question):
    grown = LexicalIndex(corpus[:cut])
    grown.add(corpus[cut:])
    assert np.array_equal(grown.scores(question), LexicalIndex(corpus).scores(question))


@given(texts, questions)
def test_bm25_agrees_with_bm25s(corpus, question):
    stop = english_stopwords()
    tokens = [tokenize(t, stop) for t in corpus]
    query = tokenize(question, stop)
    mine = LexicalIndex(corpus).scores(question)
    if not any(tokens) or not any(t in set().union(*map(set, tokens)) for t in query):
        assert not mine.any()  # bm25s cannot index a corpus without tokens; no known word: 0
        return
    reference = bm25s.BM25()
    reference.index(tokens, show_progress=False)
    theirs = np.asarray(reference.get_scores(query), dtype=np.float32)
    # bm25s sums float32 terms (each a few roundings of 2^-24); ours float64, rounded once
    bound = (8 + 2 * len(query)) * 2.0**-24 * float(np.abs(theirs).max())
    np.testing.assert_allclose(mine, theirs, rtol=0, atol=bound)


def _session(rng: random.Random, s: int) -> dict:
    people = ["Ann", "Bo", "Cy"]
    facts, turns, ids = [], [], []
    for t in range(rng.randrange(0, 4)):
        ids.append(f"D{s}:{t}")
        said = rng.choice(["I moved last May", "lovely weather", "we met in Paris", "ok"])
        turns.append(f"{rng.choice(people)}: {said}")
    for _ in range(rng.randrange(1, 4)):
        sources = (rng.choice(ids),) if ids and rng.random() < 0.7 else ()
        place = rng.choice(["Paris", "Berlin", "Rome", "June 2023"])
        facts.append(
            ExtractedFact(rng.choice(people), rng.choice(["lives in", "visited"]), place, sources=sources)
        )
    return dict(session_id=f"s{s}", facts=facts, turns=turns, turn_ids=ids, date=19500 + 3 * s)


ASKED = ["Where does Ann live?", "Where did Bo live in May 2023?", "When did Cy visit Paris?", "weather"]


def _scores(retriever: HybridRetriever) -> list[np.ndarray]:
    vectors = retriever.store.encode(ASKED)
    return retriever.scores_many(ASKED, vectors, [None] * len(ASKED))


@pytest.mark.parametrize("seed", range(4))
def test_the_tables_grown_after_each_write_match_tables_built_at_once(seed):
    rng = random.Random(seed)
    memory = TemporalMemory(encoder=HashingEncoder(64), verify=False)
    grown = HybridRetriever(memory)
    for s in range(12):
        session = _session(rng, s)
        if s == 8:  # told late: a session index before the last one read, so the tables are rebuilt
            session["session_index"] = 2
        memory.add_session(**session)
        before = grown.generation
        for ours, fresh in zip(_scores(grown), _scores(HybridRetriever(memory)), strict=True):
            assert np.array_equal(ours, fresh)
        assert grown.generation == before + (s == 8)
        for question in ASKED:
            assert grown.ranked(question, 6) == HybridRetriever(memory).ranked(question, 6)
    assert any(r.historical for r in grown.records)  # a newer version made an older one historical


def test_best_memory_grown_answers_as_a_fresh_one():
    rng = random.Random(7)
    memory = TemporalMemory(encoder=HashingEncoder(64), verify=False)
    grown = BestMemory(memory, rerank=False, present=True)
    queries = [Query(q, 5, None) for q in ASKED]
    for s in range(10):
        memory.add_session(**_session(rng, s))
        fresh = BestMemory(memory, rerank=False, present=True)
        assert grown.retrieve_many(queries) == fresh.retrieve_many(queries)


scores = st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, -1.0, math.nan]), min_size=1, max_size=60)


@settings(max_examples=300)
@given(scores, st.integers(1, 70), st.integers(2, 70), st.sampled_from([math.nan, 0.0]), st.data())
def test_top_and_standardised_match_full_sorts(values, k, pool, rest, data):
    """``_standardised`` of a stream given as its listed items and a fill (``rest``: NaN for the dense
    pool, 0 for BM25) equals the z-scores of the whole stream, bit for bit."""
    size = data.draw(st.integers(len(values), len(values) + 80))
    positions = np.sort(np.asarray(data.draw(st.permutations(range(size)))[: len(values)], dtype=np.int64))
    listed = np.asarray(values, dtype=np.float32)
    x = np.full(size, rest, dtype=np.float32)
    x[positions] = listed
    retriever = HybridRetriever(TemporalMemory(encoder=HashingEncoder(8)), pool=pool)
    known = np.where(np.isnan(x), -np.inf, x)
    top = np.sort(known)[::-1][:pool]
    top = top[np.isfinite(top)]
    if top.size == 0:
        expected = np.zeros_like(x)
    else:
        mean, std = float(top.mean()), float(top.std()) or 1.0
        floor = (float(top[-1]) - mean) / std
        expected = np.where(known >= top[-1], (known - mean) / std, floor).astype(np.float32)
    assert np.array_equal(retriever._standardised(positions, listed, size, rest), expected)
    x = listed
    finite = np.nan_to_num(x, nan=-5.0)
    order = np.argsort(-finite, kind="stable")[:k]
    retriever._evidence = lambda u, score: u  # the positions only
    assert retriever._top(finite, k) == [int(u) for u in order]
