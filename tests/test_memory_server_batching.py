"""``ServiceEncoder``: concurrent encode calls are merged into batches, each caller gets exactly its
own vectors, errors reach every caller of the batch, and a prepared question skips the model."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from rotmem.memory import HashingEncoder
from rotmem.server.batching import ServiceEncoder


class SlowEncoder(HashingEncoder):
    """HashingEncoder that records its batch sizes and takes 20 ms per call (a model's latency)."""

    def __init__(self):
        super().__init__(32)
        self.batches: list[int] = []

    def encode(self, texts):
        self.batches.append(len(texts))
        time.sleep(0.02)
        if "boom" in texts:
            raise RuntimeError("model failed")
        return super().encode(texts)


def test_concurrent_calls_are_batched_and_each_gets_its_own_vectors():
    inner = SlowEncoder()
    encoder = ServiceEncoder(inner)
    texts = [[f"question {i}", f"other {i}"] for i in range(24)]
    results: dict[int, np.ndarray] = {}

    def call(i: int) -> None:
        results[i] = encoder.encode(texts[i])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    reference = HashingEncoder(32)
    for i in range(24):
        np.testing.assert_array_equal(results[i], reference.encode(texts[i]))
    assert sum(inner.batches) == 48 and len(inner.batches) < 24  # merged: fewer model calls than callers
    assert encoder.name == "hashing:32"


def test_an_error_reaches_the_caller_and_the_encoder_keeps_working():
    encoder = ServiceEncoder(SlowEncoder())
    with pytest.raises(RuntimeError, match="model failed"):
        encoder.encode(["boom"])
    assert encoder.encode(["fine"]).shape == (1, 32)


def test_a_prepared_text_is_not_encoded_again_on_the_same_thread():
    inner = SlowEncoder()
    encoder = ServiceEncoder(inner)
    encoder.prepare(["where does Ann live"])
    assert inner.batches == [1]
    vector = encoder.encode(["where does Ann live"])
    assert inner.batches == [1] and vector.shape == (1, 32)
    encoder.encode(["where does Ann live"])  # used once: encoded again
    assert inner.batches == [1, 1]
