"""One text encoder shared by a server's request threads: concurrent calls are merged into batches.

``ServiceEncoder(inner)`` has ``inner``'s ``name`` (so stored vectors still match) and:

- ``encode(texts)``: the vectors of ``texts`` (``[n, D]``). Threads that call it while a batch is
  being encoded queue up; the next batch is every queued call, encoded in one ``inner.encode``.
  One thread at a time runs the model (the leader); when its batch is done it hands the lead to
  the oldest waiting call, so no caller waits for more than the batch in flight and its own.
- ``prepare(texts)``: encode now (outside any namespace lock) and keep the vectors for this
  thread; the next ``encode`` of exactly these texts on this thread returns them without the model.
  The HTTP server prepares a question before it takes the namespace lock, so the model runs in
  parallel with other namespaces' and other requests' index searches, batched.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np


class _Call:
    def __init__(self, texts: list[str]):
        self.texts = texts
        self.result: np.ndarray | None = None
        self.error: BaseException | None = None
        self.lead = False
        self.wake = threading.Event()


class ServiceEncoder:
    """A thread-safe batching wrapper of a text encoder (module docs)."""

    def __init__(self, inner: Any, max_batch: int = 64):
        self.inner, self.max_batch = inner, int(max_batch)
        self.name = getattr(inner, "name", type(inner).__qualname__)
        self._lock = threading.Lock()
        self._queue: list[_Call] = []
        self._running = False
        self._prepared = threading.local()

    def prepare(self, texts: list[str]) -> None:
        self._prepared.texts, self._prepared.vectors = list(texts), self._encode(list(texts))

    def encode(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        if getattr(self._prepared, "texts", None) == texts:
            vectors = self._prepared.vectors
            self._prepared.texts = self._prepared.vectors = None
            return vectors
        return self._encode(texts)

    def _encode(self, texts: list[str]) -> np.ndarray:
        call = _Call(texts)
        with self._lock:
            self._queue.append(call)
            if not self._running:
                self._running = call.lead = True
        while True:
            if not call.lead:
                call.wake.wait()
            if call.lead and call.result is None and call.error is None:
                self._run_batch()
            if call.result is not None or call.error is not None:
                break
            call.wake.clear()
        if call.error is not None:
            raise call.error
        return call.result

    def _run_batch(self) -> None:
        """As the leader: encode the queued calls (up to ``max_batch`` texts), then pass the lead on."""
        with self._lock:
            batch, size = [], 0
            while self._queue and (not batch or size + len(self._queue[0].texts) <= self.max_batch):
                call = self._queue.pop(0)
                batch.append(call)
                size += len(call.texts)
        try:
            vectors = np.asarray(
                self.inner.encode([t for call in batch for t in call.texts]), dtype=np.float32
            )
            start = 0
            for call in batch:
                call.result = vectors[start : start + len(call.texts)]
                start += len(call.texts)
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
