"""EmbeddingCache: a fact sentence told again is not embedded again, and gets the same vector."""

from __future__ import annotations

import numpy as np
import pytest

from rotmem.memory import HashingEncoder, TEMStore
from rotmem.memory.embedding_cache import EmbeddingCache
from rotmem.memory.encoder import encode_texts


class CountingEncoder:
    """HashingEncoder that records every text it is asked to embed."""

    def __init__(self):
        self.inner, self.name, self.seen = HashingEncoder(64), "hashing:64", []

    def encode(self, texts):
        self.seen += list(texts)
        return self.inner.encode(texts)


def test_a_held_text_is_not_embedded_again_and_gets_the_same_vector():
    encoder, cache = CountingEncoder(), EmbeddingCache(10)
    first = cache.encode(encoder, ["a b", "c d"])
    again = cache.encode(encoder, ["c d", "e f", "a b", "e f"])
    assert encoder.seen == ["a b", "c d", "e f"]
    np.testing.assert_array_equal(again[[0, 2]], first[[1, 0]])
    np.testing.assert_array_equal(again[1], again[3])
    expected = encode_texts(HashingEncoder(64), ["c d", "e f", "a b", "e f"])  # what a miss computes
    np.testing.assert_array_equal(again, expected)
    assert (cache.misses, cache.hits, len(cache)) == (3, 3, 3)


def test_the_least_recently_used_text_goes_first_when_full():
    encoder, cache = CountingEncoder(), EmbeddingCache(2)
    cache.encode(encoder, ["a"])
    cache.encode(encoder, ["b"])
    cache.encode(encoder, ["a"])  # a is now the most recent: b goes when c comes
    cache.encode(encoder, ["c"])
    cache.encode(encoder, ["a", "b"])
    assert encoder.seen == ["a", "b", "c", "b"]
    assert len(cache) == 2


def test_capacity_zero_embeds_everything_and_bad_capacities_are_refused():
    encoder, cache = CountingEncoder(), EmbeddingCache(0)
    cache.encode(encoder, ["a"])
    cache.encode(encoder, ["a"])
    assert encoder.seen == ["a", "a"] and len(cache) == 0
    for bad in (-1, 1.5, True, "10"):
        with pytest.raises(ValueError, match="embedding cache capacity"):
            EmbeddingCache(bad)


def test_the_store_embeds_a_repeated_fact_once_across_sessions_and_indexes_every_copy():
    encoder = CountingEncoder()
    with TEMStore(encoder=encoder, verify=False) as store:
        store.add_session("d1", [("Iran", "threaten", "Israel"), ("Iran", "host", "Iraq")])
        store.add_session("d2", [("Iran", "threaten", "Israel")], turns=["Iran threaten Israel"])
        assert encoder.seen == ["Iran threaten Israel", "Iran host Iraq", "Iran threaten Israel"]
        assert len(store) == 3  # both copies of the repeated fact are stored and indexed
        hits = store.retrieve_vector(HashingEncoder(64).encode(["Iran threaten Israel"])[0], k=3)
        assert sorted(r.session_id for r in hits if r.object == "Israel") == ["d1", "d2"]
    with TEMStore(encoder=CountingEncoder(), verify=False, embedding_cache=0) as store:
        store.add_session("d1", [("Iran", "threaten", "Israel")])
        store.add_session("d2", [("Iran", "threaten", "Israel")])
        assert store.encoder.seen == ["Iran threaten Israel"] * 2


def test_cached_encoder_embeds_each_text_once_and_serves_put_vectors():
    from rotmem.memory import CachedEncoder

    inner = CountingEncoder()
    encoder = CachedEncoder(inner)  # no bound
    assert encoder.name == "hashing:64"
    first = encoder.encode(["a b", "c d", "a b"])
    again = encoder.encode(["c d", "e f"])
    assert inner.seen == ["a b", "c d", "e f"]
    np.testing.assert_array_equal(again[0], first[1])
    np.testing.assert_array_equal(first, encode_texts(HashingEncoder(64), ["a b", "c d", "a b"]))
    encoder.put(["g"], np.array([[3.0] + [0.0] * 63]))
    np.testing.assert_array_equal(encoder.encode(["g"])[0], [1.0] + [0.0] * 63)  # normalised
    assert inner.seen == ["a b", "c d", "e f"] and encoder.encode([]).shape[0] == 0


def test_a_stores_fact_vectors_serve_another_memory_without_the_encoder(tmp_path):
    from rotmem.memory import CachedEncoder

    path = str(tmp_path / "memory.db")
    with TEMStore(path, HashingEncoder(64), verify=False) as store:
        store.add_session("d1", [("Iran", "threaten", "Israel"), ("Iran", "host", "Iraq")])
        store.add_session("d2", [("Iran", "threaten", "Israel")], turns=["Iran threaten Israel"])
    with TEMStore(path, CountingEncoder(), read_only=True) as store:
        texts, vectors = store.fact_vectors()
    assert texts == ["Iran threaten Israel", "Iran host Iraq", "Iran threaten Israel"]  # facts only
    np.testing.assert_array_equal(vectors, encode_texts(HashingEncoder(64), texts))
    inner = CountingEncoder()
    encoder = CachedEncoder(inner)
    encoder.put(texts, vectors)
    np.testing.assert_allclose(encoder.encode(texts), vectors, atol=1e-6)  # put re-normalises
    assert inner.seen == []
    with pytest.raises(ValueError, match="was written with encoder"):
        TEMStore(path, HashingEncoder(32), read_only=True)
    with TEMStore(encoder=HashingEncoder(8)) as empty:
        assert empty.fact_vectors()[0] == [] and len(empty.fact_vectors()[1]) == 0
