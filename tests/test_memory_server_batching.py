"""``Batcher`` and ``ServiceEncoder``: concurrent calls are merged into batches, each caller gets
exactly its own results, errors reach every caller of the batch, prepared texts skip the model."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from rotmem.memory import HashingEncoder
from rotmem.server.batching import Batcher, ServiceEncoder, default_max_batch


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


def test_texts_embedded_ahead_skip_the_model_on_this_thread_inside_the_context_only():
    inner = SlowEncoder()
    encoder = ServiceEncoder(inner)
    table = encoder.vectors_of(["Ann lives in Rome", "Ann lives in Rome", "a turn"])
    assert inner.batches == [2] and list(table) == ["Ann lives in Rome", "a turn"]  # each text once
    with encoder.using(table):
        vectors = encoder.encode(["a turn", "Ann lives in Rome"])
        assert inner.batches == [2]
        np.testing.assert_array_equal(vectors, HashingEncoder(32).encode(["a turn", "Ann lives in Rome"]))
        other: list[np.ndarray] = []
        thread = threading.Thread(target=lambda: other.append(encoder.encode(["a turn"])))
        thread.start()
        thread.join(timeout=60)
        assert inner.batches == [2, 1]  # another thread does not see this thread's vectors
        encoder.encode(["a turn", "not prepared"])
        assert inner.batches == [2, 1, 2]
    encoder.encode(["a turn"])  # outside the context: the model again
    assert inner.batches == [2, 1, 2, 1]


def test_a_batcher_merges_concurrent_submits_and_returns_each_its_own_results():
    sizes: list[int] = []

    def run(items: list[int]) -> list[int]:
        sizes.append(len(items))
        time.sleep(0.02)
        return [item * 10 for item in items]

    batcher = Batcher(run, max_batch=8)
    results: dict[int, list[int]] = {}
    threads = [
        threading.Thread(target=lambda i=i: results.__setitem__(i, list(batcher.submit([i, i + 100]))))
        for i in range(20)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == {i: [i * 10, (i + 100) * 10] for i in range(20)}
    assert sum(sizes) == 40 and max(sizes) <= 8 and len(sizes) < 20


def test_a_batcher_refuses_a_run_that_loses_results():
    batcher = Batcher(lambda items: items[:-1])
    with pytest.raises(RuntimeError, match="a batch of 2 items got 1 results"):
        batcher.submit([1, 2])


def test_items_released_together_by_the_encoder_run_as_one_batch():
    """Searches whose questions shared an encoder batch are announced (``on_done`` -> ``expect``)
    before their threads wake, so the first to arrive waits for the rest instead of running alone."""
    searches: Batcher[int, int] = Batcher(lambda items: [item * 10 for item in items])
    encoder = ServiceEncoder(SlowEncoder())
    results: dict[int, int] = {}
    start = threading.Barrier(6)

    def search(i: int) -> None:
        start.wait()
        encoder.encode([f"question {i}"], on_done=lambda: searches.expect(1))
        time.sleep(0.0005 * i)  # the woken threads reach the next stage one after another
        [results[i]] = searches.submit([i], expected=True)

    threads = [threading.Thread(target=search, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == {i: i * 10 for i in range(6)}
    sizes = encoder.batch_sizes()
    assert sum(size * n for size, n in sizes.items()) == 6
    # one search batch per encoder batch: none of them split by the order the threads woke in
    assert searches.batch_sizes() == sizes


def test_an_announced_item_that_never_comes_delays_a_batch_by_at_most_linger():
    batcher: Batcher[int, int] = Batcher(lambda items: items, linger=0.05)
    batcher.expect(1)
    start = time.perf_counter()
    assert list(batcher.submit([7])) == [7]
    waited = time.perf_counter() - start
    assert 0.04 <= waited < 1.0
    batcher.expect(-1)
    start = time.perf_counter()
    assert list(batcher.submit([8])) == [8]
    assert time.perf_counter() - start < 0.04


class DeviceEncoder(SlowEncoder):
    """SlowEncoder that says it runs on ``device``."""

    def __init__(self, device: str):
        super().__init__()
        self.device = device


def test_the_encoder_caps_texts_per_call_by_device_or_as_asked():
    assert [default_max_batch(d) for d in ("cpu", "cuda", "cuda:1")] == [8, 64, 64]
    assert ServiceEncoder(SlowEncoder()).max_batch == 8  # no device named: the CPU's
    assert ServiceEncoder(DeviceEncoder("cuda")).max_batch == 64
    inner = SlowEncoder()
    encoder = ServiceEncoder(inner, max_batch=3)
    threads = [threading.Thread(target=encoder.encode, args=([f"question {i}"],)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sum(inner.batches) == 16 and max(inner.batches) == 3  # 16 waiting texts, 3 per call
    assert encoder.encode([f"text {i}" for i in range(5)]).shape == (5, 32)  # one call over the cap: alone
    assert inner.batches[-1] == 5
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="the encoder's max batch must be an integer >= 1"):
            ServiceEncoder(SlowEncoder(), max_batch=bad)
