"""Relation types and weights, fact verification, rendering and the built-in encoders."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rotmem.memory import HashingEncoder, Passage, Record, RelationWeights, render
from rotmem.memory.encoder import encode_texts, encoder_from_name
from rotmem.memory.tem.relation_weights import normalise_relation
from rotmem.memory.tem.verification import SessionText, object_span


@pytest.mark.parametrize(
    "relation, kind, weight",
    [
        ("lives in", "residence", 1.0),
        ("Moved_To", "residence", 1.0),
        ("resides  in", "residence", 1.0),
        ("works for", "employer", 1.0),
        ("works as", "occupation", 0.9),
        ("owns", "possession", 0.8),
        ("likes", "likes", 0.6),
        ("hates", "dislikes", 0.6),
        ("plays", None, 1.0),
    ],
)
def test_default_types_and_weights(relation, kind, weight):
    weights = RelationWeights()
    assert weights.relation_type(relation) == kind
    assert weights.weight(relation) == weight
    assert weights.group_relation(relation) == (kind or normalise_relation(relation))


def test_weights_and_synonyms_are_configurable():
    weights = RelationWeights({"likes": 0.3, "plays": 0.5}, synonyms={"Is Into": "likes"}, unknown_weight=0.7)
    assert weights.weight("is into") == 0.3 and weights.weight("plays") == 0.5
    assert weights.weight("collects") == 0.7 and weights.weight("lives in") == 1.0
    assert weights.group_relation("IS_INTO") == "likes"
    with pytest.raises(ValueError, match="non-negative"):
        RelationWeights({"likes": -1.0})


def test_object_span_is_whole_word_case_and_space_insensitive():
    text = "I moved to\nNew York; not Yorkshire."
    assert text[slice(*object_span("new york", text))] == "New York"
    assert object_span("york", "Yorkshire") is None
    assert object_span("C++", "I write C++ daily") == (8, 11)


WORDS = st.sampled_from(["new", "York", "york", "yorkshire", "İstanbul", "a_b", "C++", "tea,", "Tea"])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(WORDS, st.sampled_from([" ", "  ", "\n", "\t "])), max_size=12),
    st.lists(WORDS, min_size=1, max_size=3),
)
@example(words=[("new", "  "), ("new", " "), ("new", " ")], obj_words=["new", "new"])  # first hit: 2 spaces
def test_fast_lookup_equals_the_regular_expression(words, obj_words):
    text = "".join(word + space for word, space in words)
    obj = " ".join(obj_words)
    assert SessionText(text).find(obj) == object_span(obj, text)


def test_render_format():
    items = [
        Record("Alice", "lives in", "Paris", "a", 0, True),
        Record("Alice", "moved to", "Berlin", "b", 4, False),
        Passage("turn", "Alice: hi", "b", 4, 0),
        Passage("summary", "Alice moved", "b", 4, 1),
    ]
    assert render(items).splitlines() == [
        "s0: Alice lives in Paris [historical]",
        "s4: Alice moved to Berlin",
        "s4: Alice: hi",
        "s4: summary: Alice moved",
    ]
    with pytest.raises(TypeError, match="Record or Passage"):
        render(["text"])


def test_hashing_encoder_is_deterministic_and_normalised():
    encoder = HashingEncoder(32)
    a = encoder.encode(["Alice lives in Paris", "alice LIVES in paris", "...", ""])
    assert a.dtype == np.float32 and a.shape == (4, 32)
    np.testing.assert_allclose(np.linalg.norm(a[:2], axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(a[0], a[1])
    assert not a[2:].any()
    assert encoder_from_name(encoder.name).encode(["x y"]).tolist() == encoder.encode(["x y"]).tolist()
    with pytest.raises(ValueError, match="cannot rebuild encoder"):
        encoder_from_name("my-own-encoder")


def test_encode_texts_checks_the_encoder_output():
    class Broken:
        name = "broken"

        def encode(self, texts):
            return np.ones((len(texts) + 1, 4))

    with pytest.raises(ValueError, match="broken returned shape"):
        encode_texts(Broken(), ["a"])

    class Unnormalised:
        name = "raw"

        def encode(self, texts):
            return np.full((len(texts), 4), 3.0)

    np.testing.assert_allclose(
        np.linalg.norm(encode_texts(Unnormalised(), ["a", "b"], batch_size=1), axis=1), 1.0
    )
