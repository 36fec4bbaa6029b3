"""Concurrent calls merged into batches: ``Batcher`` and the text encoder built on it.

``Batcher(run)``: threads call ``submit(items)``; while a batch runs, new calls queue up, and the
next batch is every queued call, handed to ``run`` as one list (``run(items) -> results``, one
result per item, in order). One thread at a time runs a batch (the leader); when its batch is done
it hands the lead to the oldest waiting call, so no caller waits for more than the batch in flight
and its own. A model or a flat index scan costs about as much for 16 inputs as for one, so under
load the cost per call falls with the queue.

Calls that another stage has just released together (a server's searches, woken at once when
their questions' shared encoder batch ends) reach ``submit`` one thread at a time; the first would
run alone and the rest wait for it. So ``submit(items, on_done=...)`` calls ``on_done()`` in the
leader's thread once the call's results are ready, before any caller wakes, and a next stage's
``expect(n)`` there announces the ``n`` items on their way (``submit(..., expected=True)``
withdraws them): a leader waits for the announced items, at most ``linger`` seconds, before it
takes its batch.

``ServiceEncoder(inner, max_batch)`` has ``inner``'s ``name`` (so stored vectors still match) and
takes at most ``max_batch`` texts per model call (default ``default_max_batch(inner.device)``: 8 on
a CPU, 64 on a GPU). A cap below the number of concurrent clients keeps the encoder busy: with no
cap, the questions of 16 clients gather into one batch of about 15, whose searches then run while
the encoder has one question or none (a convoy that repeats), and MiniLM on a CPU gains little past
8 texts a call (docs/memory.md, "Under load"). It has:

- ``encode(texts)``: the vectors of ``texts`` (``[n, D]``), through a ``Batcher`` over
  ``inner.encode``.
- ``vectors_of(texts)``: ``text -> vector``, embedded now (batched with other threads'), and
  ``using(table)``: a context in which this thread's ``encode`` of those texts returns them without
  the model. The HTTP server embeds an add's texts before it takes the namespace lock, and the
  thread that writes a batch of adds uses the vectors its callers embedded, so the lock is held only
  for the write itself.
- ``batch_sizes()``: its batcher's count of model calls by batch size; ``metrics_text`` writes it
  (and the model's device) in Prometheus' text format for ``GET /metrics``.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

import numpy as np

Item = TypeVar("Item")
Result = TypeVar("Result")


class _Call:
    def __init__(self, items: list):
        self.items = items
        self.results: Sequence | None = None
        self.error: BaseException | None = None
        self.on_done: Callable[[], None] | None = None
        self.lead = False
        self.wake = threading.Event()


class Batcher(Generic[Item, Result]):
    """Merge concurrent ``submit`` calls into batches for ``run`` (module docs).

    Args:
        run: ``run(items) -> results`` (a sequence with one result per item, sliceable).
        max_batch: the most items in one batch (a call with more still runs, alone).
        linger: the longest a leader waits for announced items (``expect``), in seconds.
    """

    def __init__(
        self, run: Callable[[list[Item]], Sequence[Result]], max_batch: int = 64, linger: float = 0.005
    ):
        self.run, self.max_batch, self.linger = run, int(max_batch), float(linger)
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._queue: list[_Call] = []
        self._running = False
        self._expected = 0  # items announced by ``expect`` and not yet submitted
        self._sizes: Counter[int] = Counter()

    def batch_sizes(self) -> dict[int, int]:
        """How many batches of each size ``run`` was given since this batcher was made."""
        with self._lock:
            return dict(self._sizes)

    def expect(self, count: int) -> None:
        """Announce ``count`` items that will be submitted with ``expected=True`` (negative: withdraw)."""
        with self._lock:
            self._expected += count

    def submit(
        self, items: Sequence[Item], on_done: Callable[[], None] | None = None, expected: bool = False
    ) -> Sequence[Result]:
        """The results of ``items`` (``run``'s exception, if it raised for their batch). ``on_done``:
        called by the leader when the results are ready, before any caller of the batch wakes;
        ``expected``: the items were announced by ``expect`` (module docs)."""
        call = _Call(list(items))
        call.on_done = on_done
        with self._lock:
            self._queue.append(call)
            if expected:
                self._expected -= len(call.items)
                self._arrived.notify_all()
            if not self._running:
                self._running = call.lead = True
        while True:
            if not call.lead:
                call.wake.wait()
            if call.lead and call.results is None and call.error is None:
                self._run_batch()
            if call.results is not None or call.error is not None:
                break
            call.wake.clear()
        if call.error is not None:
            raise call.error
        return call.results

    def _run_batch(self) -> None:
        """As the leader: wait for the announced items (at most ``linger``), run the queued calls (up to
        ``max_batch`` items), then pass the lead on."""
        with self._lock:
            self._arrived.wait_for(lambda: self._expected <= 0, timeout=self.linger)
            batch, size = [], 0
            while self._queue and (not batch or size + len(self._queue[0].items) <= self.max_batch):
                call = self._queue.pop(0)
                batch.append(call)
                size += len(call.items)
            self._sizes[size] += 1
        try:
            results = self.run([item for call in batch for item in call.items])
            if len(results) != size:
                raise RuntimeError(f"a batch of {size} items got {len(results)} results")
            start = 0
            for call in batch:
                call.results = results[start : start + len(call.items)]
                start += len(call.items)
            for call in batch:
                if call.on_done is not None:
                    call.on_done()
        except BaseException as error:  # every caller in the batch gets it
            for call in batch:
                call.error = error
        with self._lock:
            for call in batch:
                call.lead = False
            if self._queue:
                self._queue[0].lead = True
                self._queue[0].wake.set()
            else:
                self._running = False
        for call in batch:
            call.wake.set()


CPU_MAX_BATCH, GPU_MAX_BATCH = 8, 64  # texts per encoder call (module docs)


def default_max_batch(device: str) -> int:
    """The encoder's default cap on texts per call on ``device`` (module docs)."""
    return CPU_MAX_BATCH if str(device).startswith("cpu") else GPU_MAX_BATCH


class ServiceEncoder:
    """A thread-safe batching wrapper of a text encoder (module docs); ``max_batch``: the most texts
    in one model call (None: ``default_max_batch`` of the encoder's device)."""

    def __init__(self, inner: Any, max_batch: int | None = None):
        if max_batch is None:
            max_batch = default_max_batch(getattr(inner, "device", "cpu"))
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"the encoder's max batch must be an integer >= 1, got {max_batch!r}")
        self.inner, self.max_batch = inner, max_batch
        self.name = getattr(inner, "name", type(inner).__qualname__)
        self._batcher: Batcher[str, np.ndarray] = Batcher(self._encode_batch, max_batch)
        self._prepared = threading.local()

    def batch_sizes(self) -> dict[int, int]:
        """How many model calls of each batch size (texts per call) this encoder made."""
        return self._batcher.batch_sizes()

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.inner.encode(texts), dtype=np.float32)

    def encode(self, texts: list[str], on_done: Callable[[], None] | None = None) -> np.ndarray:
        """``[len(texts), D]``: from this thread's ``using`` table when it holds them all, else batched;
        ``on_done`` as ``Batcher.submit``'s (called once the vectors are ready)."""
        texts = list(texts)
        table = getattr(self._prepared, "table", None)
        if not table or not all(text in table for text in texts):
            return np.asarray(self._batcher.submit(texts, on_done))
        if on_done is not None:
            on_done()
        return np.stack([table[text] for text in texts]) if texts else np.zeros((0, 0), np.float32)

    def vectors_of(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """``text -> [D] vector`` of ``texts`` (each embedded once, batched with other threads')."""
        unique = list(dict.fromkeys(texts))
        vectors = self.encode(unique) if unique else np.zeros((0, 0), np.float32)
        return dict(zip(unique, vectors, strict=True))

    @contextmanager
    def using(self, table: dict[str, np.ndarray]) -> Iterator[None]:
        """A context in which this thread's ``encode`` of the texts of ``table`` (``vectors_of``)
        returns its vectors without the model."""
        self._prepared.table = table
        try:
            yield
        finally:
            self._prepared.table = None


BUCKETS = (1, 2, 4, 8, 16, 32, 64)


def metrics_text(encoder: ServiceEncoder) -> str:
    """The encoder's batch sizes as a Prometheus histogram (``rotmem_encoder_batch_size``: texts per
    model call, buckets 1 to 64), its device (``rotmem_encoder_info``) and its cap on texts per call
    (``rotmem_encoder_max_batch``); counts only, no tenant's."""
    sizes = encoder.batch_sizes()
    name = "rotmem_encoder_batch_size"
    lines = [
        f"# HELP {name} Texts per call of the text encoder (concurrent requests merged into one call).",
        f"# TYPE {name} histogram",
    ]
    for bound in BUCKETS:
        lines.append(f'{name}_bucket{{le="{bound}"}} {sum(n for size, n in sizes.items() if size <= bound)}')
    lines += [
        f'{name}_bucket{{le="+Inf"}} {sum(sizes.values())}',
        f"{name}_sum {sum(size * n for size, n in sizes.items())}",
        f"{name}_count {sum(sizes.values())}",
        "# HELP rotmem_encoder_info The device the text encoder runs on.",
        "# TYPE rotmem_encoder_info gauge",
        f'rotmem_encoder_info{{device="{getattr(encoder.inner, "device", "cpu")}"}} 1',
        "# HELP rotmem_encoder_max_batch The most texts in one call of the text encoder.",
        "# TYPE rotmem_encoder_max_batch gauge",
        f"rotmem_encoder_max_batch {encoder.max_batch}",
    ]
    return "\n".join(lines) + "\n"
