"""``rotmem serve``'s text encoder in a worker process (``rotmem.server.encoder_process``): the same
vectors as in the server's process, errors that name their cause, a worker that is restarted after it
dies and never outlives the server; and a real server that embeds through it."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from rotmem.memory import HashingEncoder
from rotmem.server.encoder_process import ProcessEncoder

TEXTS = ["Alice lives in Paris", "Bob works for Acme", "where does Alice live now?"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) is not alive
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pid: int, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


@pytest.fixture
def encoder():
    worker = ProcessEncoder("hashing", "cpu")
    yield worker
    worker.close()


def test_same_vectors_and_name_as_the_encoder_in_process(encoder):
    inner = HashingEncoder()
    assert encoder.name == inner.name and encoder.device == "cpu"
    got = encoder.encode(TEXTS)
    assert got.dtype == np.float32 and got.shape == (3, inner.dim)
    np.testing.assert_array_equal(got, inner.encode(TEXTS))  # the same code on the same input: exact
    assert encoder.pid != os.getpid()


def test_a_worker_that_died_is_started_again(encoder):
    first = encoder.pid
    os.kill(first, 9)
    assert wait_gone(first)
    np.testing.assert_array_equal(encoder.encode(TEXTS[:1]), HashingEncoder().encode(TEXTS[:1]))
    assert encoder.pid not in (None, first)


def test_close_stops_the_worker():
    worker = ProcessEncoder("hashing", "cpu")
    pid = worker.pid
    worker.close()
    worker.close()  # idempotent
    assert worker.pid is None and wait_gone(pid)


def test_an_unknown_encoder_is_refused_with_its_name():
    with pytest.raises(ValueError, match="'nosuch'"):
        ProcessEncoder("nosuch", "cpu")


def test_the_worker_leaves_when_the_server_is_killed(tmp_path):
    """SIGKILL of the server (no close, no atexit): the worker sees its pipe close and exits."""
    script = "import sys, time\nfrom rotmem.server.encoder_process import ProcessEncoder\n" + (
        "e = ProcessEncoder('hashing', 'cpu'); print(e.pid, flush=True); time.sleep(600)"
    )
    server = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        worker = int(server.stdout.readline())
        assert alive(worker)
    finally:
        server.kill()
        server.wait()
    assert wait_gone(worker)


def test_serve_builds_the_pool_on_a_worker_process_unless_asked_not_to(tmp_path):
    """``rotmem serve``'s ``build_pool``: the encoder in a worker by default, closed with the pool;
    ``--encoder-in-process`` (and ``rotmem mcp``, which has no such flag) keep it in the server."""
    from rotmem.commands.serve import build_pool

    common = {"store": str(tmp_path), "encoder": "hashing", "device": "cpu", "extractor": None}
    common |= {"synchronous": "FULL", "retriever": "temporal", "encoder_threads": 1}
    pool = build_pool(argparse.Namespace(**common, encoder_in_process=False, encoder_batch=5))
    worker = pool.encoder.inner
    assert isinstance(worker, ProcessEncoder) and alive(worker.pid) and pool.encoder.max_batch == 5
    np.testing.assert_array_equal(pool.encoder.encode(TEXTS), HashingEncoder().encode(TEXTS))
    pid = worker.pid
    pool.close()
    assert wait_gone(pid)
    for args in (argparse.Namespace(**common, encoder_in_process=True), argparse.Namespace(**common)):
        pool = build_pool(args)
        assert isinstance(pool.encoder.inner, HashingEncoder)
        pool.close()


def test_a_real_server_embeds_through_the_worker(tmp_path):
    """Adds and searches over HTTP (uvicorn on 127.0.0.1, httpx) with the encoder in its worker."""
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("uvicorn")
    from rotmem.server.keys import KeyRing
    from rotmem.server.pool import MemoryPool
    from tests.test_memory_server import run_server

    ring = KeyRing()
    token = ring.add("alice")
    pool = MemoryPool(str(tmp_path), ProcessEncoder("hashing", "cpu"))
    server, thread, url = run_server(pool, ring, max_body=64 * 1024)
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            for n, city in enumerate(("Paris", "Berlin")):
                body = {"session_id": f"s{n}", "date": f"2023-0{n + 1}-01",
                        "facts": [{"subject": "Alice", "relation": "lives in", "object": city}]}  # fmt: skip
                assert client.post("/v1/sessions", json=body).status_code == 200
            found = client.post("/v1/search", json={"question": "where does Alice live?", "k": 5})
            assert found.status_code == 200, found.text
            objects = {record["object"] for record in found.json()["records"]}
            assert objects == {"Paris", "Berlin"}
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        pool.close()
