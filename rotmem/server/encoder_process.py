"""The service's text encoder in a process of its own, out of reach of the server's GIL.

A model forward in Python is hundreds of torch calls, each of which lets the GIL go and must take it
back. In the server, 16 request threads and the event loop want the GIL for their own Python work,
and each time one holds it the encoder waits up to the switch interval (5 ms) before its next op:
on this project's 2-core machine, one pure-Python thread beside MiniLM cut it from 221 to 54
sentences/s (the convoy effect). In a process of its own the encoder competes for a core, not for
the GIL.

``ProcessEncoder(name, device, threads, cpus)`` builds the encoder ``name`` (``rotmem serve --encoder``:
``minilm``, ``hashing``, ``sentence-transformers:<model>``) in a spawned worker with ``threads`` torch
threads, on the CPUs ``cpus`` only when given (``rotmem serve --encoder-cpus``, ``rotmem.server.cpus``)
(``python -m rotmem.server.encoder_process``, so no ``__main__`` is re-run) and serves
``encode(texts)`` over a socket pair: the texts go in, the ``[n, D]`` float32 vectors
come back. One call at a time (``ServiceEncoder``'s batcher makes the calls; a lock keeps any other
caller in line). An error the encoder raises comes back as the same kind (ValueError, or a
RuntimeError naming it); a worker that died is started again on the next call, which is retried
once. The worker leaves when the pipe closes, so it never outlives the server, even after SIGKILL.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import subprocess
import sys
import threading
from collections.abc import Collection
from multiprocessing.connection import Connection

import numpy as np

from rotmem.server.cpus import format_cpu_list, parse_cpu_list, pin_process

START_TIMEOUT_S = 600.0  # a first load of a model from a cold disk


def _worker(
    conn: Connection, name: str, device: str, threads: int | None, cpus: frozenset[int] | None = None
) -> None:
    """The worker's loop: pin itself to ``cpus`` (with one torch thread a CPU unless ``threads``
    says), build the encoder, say so (its ``name`` and device), answer each list of texts with
    ``("ok", vectors)`` or ``("error", kind, message)``; leave at ``None`` or EOF."""
    try:
        if cpus:
            pin_process(cpus)
            threads = len(cpus) if threads is None else threads
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        from rotmem.commands.memory import _encoder

        encoder = _encoder(name, device)
        encoder.encode(["warm up"])  # loads the model now: the server is ready when this is
        conn.send(("ready", encoder.name, str(getattr(encoder, "device", "cpu"))))
    except Exception as error:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("error", type(error).__name__, str(error)))
        return
    while True:
        try:
            texts = conn.recv()
            if texts is None:
                return
            try:
                answer = ("ok", np.asarray(encoder.encode(texts), dtype=np.float32))
            except Exception as error:  # noqa: BLE001 - reported to the parent, which raises it
                answer = ("error", type(error).__name__, str(error))
            conn.send(answer)
        except (EOFError, OSError):  # the server is gone
            return


def _raise(kind: str, message: str) -> None:
    if kind == "ValueError":
        raise ValueError(message)
    raise RuntimeError(f"the text encoder failed ({kind}): {message}")


class ProcessEncoder:
    """A text encoder run in a worker process (module docs); ``name`` and ``device`` are the inner
    encoder's, so stored vectors still match and ``GET /metrics`` names the right device."""

    def __init__(
        self, name: str, device: str = "auto", threads: int | None = None, cpus: Collection[int] | None = None
    ):
        self._spec = (name, device, threads, frozenset(cpus) if cpus else None)
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self.name, self.device = self._start()

    def _start(self) -> tuple[str, str]:
        ours, theirs = socket.socketpair()
        name, device, threads, cpus = self._spec
        command = [sys.executable, "-m", __name__, "--fd", str(theirs.fileno()), "--name", name,
                   "--device", device]  # fmt: skip
        if threads is not None:
            command += ["--threads", str(threads)]
        if cpus:
            command += ["--cpus", format_cpu_list(cpus)]
        process = subprocess.Popen(command, pass_fds=(theirs.fileno(),))
        theirs.close()
        conn = Connection(ours.detach())
        if not conn.poll(START_TIMEOUT_S):
            process.kill()
            process.wait()
            raise RuntimeError(f"the text encoder process did not start in {START_TIMEOUT_S:.0f} s")
        try:
            message = conn.recv()
        except EOFError:
            raise RuntimeError(f"the text encoder process exited (code {process.wait()})") from None
        if message[0] == "error":
            process.wait()
            _raise(*message[1:])
        self._process, self._conn = process, conn
        return message[1], message[2]

    def encode(self, texts: list[str]) -> np.ndarray:
        """``[len(texts), D]`` float32, from the worker."""
        texts = [str(text) for text in texts]
        with self._lock:
            for attempt in (0, 1):
                try:
                    self._conn.send(texts)
                    message = self._conn.recv()
                    break
                except (EOFError, OSError):
                    if attempt:
                        raise RuntimeError("the text encoder process exited twice in one call") from None
                    self._stop()
                    self._start()
        if message[0] == "error":
            _raise(*message[1:])
        return message[1]

    def _stop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):  # BrokenPipeError is one
                self._conn.send(None)
            self._conn.close()
        if self._process is not None:
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = self._conn = None

    def close(self) -> None:
        """Stop the worker (idempotent)."""
        with self._lock:
            self._stop()

    @property
    def pid(self) -> int | None:
        """The worker's process id (None when stopped)."""
        return None if self._process is None else self._process.pid


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="rotmem serve's text encoder worker (internal)")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--cpus", type=parse_cpu_list, default=None)
    args = parser.parse_args(argv)
    _worker(Connection(args.fd), args.name, args.device, args.threads, args.cpus)


if __name__ == "__main__":
    main()
