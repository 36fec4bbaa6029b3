"""``rotmem serve --encoder-cpus`` (``rotmem.server.cpus``): the list parsed or refused by name, the
server left the other CPUs, every thread of a process pinned, and a real worker process on its CPUs."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np
import pytest

from rotmem.memory import HashingEncoder
from rotmem.server.cpus import parse_cpu_list, pin_process, split_cpus
from rotmem.server.encoder_process import ProcessEncoder

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU pinning is Linux's")
USABLE = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()


def thread_cpus(pid: int) -> list[frozenset[int]]:
    """The CPU set of every thread of process ``pid``."""
    return [frozenset(os.sched_getaffinity(int(task))) for task in os.listdir(f"/proc/{pid}/task")]


@pytest.mark.parametrize(
    ("text", "cpus"), [("1", {1}), ("2-3", {2, 3}), ("0,2-3", {0, 2, 3}), (" 4 , 6-6 ", {4, 6}), ("5,5", {5})]
)
def test_a_cpu_list_is_read_as_linux_writes_it(text, cpus):
    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize("text", ["", "a", "1,", "3-1", "-1", "1-", "1.5", "0-x"])
def test_a_bad_cpu_list_is_refused_by_name(text):
    with pytest.raises(ValueError, match=rf"--encoder-cpus: {text!r} is not a CPU list"):
        parse_cpu_list(text)


def test_the_server_gets_the_cpus_the_encoder_does_not():
    last = max(USABLE)
    assert split_cpus({last}) == USABLE - {last}
    with pytest.raises(ValueError, match=f"CPU {last + 1000} is not one this process may use"):
        split_cpus({last + 1000})
    with pytest.raises(ValueError, match="leaves the server no CPU"):
        split_cpus(USABLE)


def test_pinning_sets_every_thread_of_the_process_and_those_it_starts_later():
    """In a child process (pinning this one would bind the rest of the suite): a thread started
    before the call and one started after both end up on the CPU asked for."""
    cpu = max(USABLE)
    script = f"""
import os, threading
from rotmem.server.cpus import pin_process
stop = threading.Event()
early = threading.Thread(target=stop.wait); early.start()
pin_process({{{cpu}}})
late = threading.Thread(target=stop.wait); late.start()
tasks = os.listdir("/proc/self/task")
print(len(tasks), sorted({{frozenset(os.sched_getaffinity(int(t))) for t in tasks}}, key=sorted))
stop.set()
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(" ", 1) == ["3", f"[frozenset({{{cpu}}})]\n"]


def test_the_encoder_worker_runs_on_its_cpus():
    cpu = max(USABLE)
    encoder = ProcessEncoder("hashing", "cpu", cpus={cpu})
    try:
        assert set(thread_cpus(encoder.pid)) == {frozenset({cpu})}
        np.testing.assert_array_equal(
            encoder.encode(["Alice lives in Paris"]), HashingEncoder().encode(["Alice lives in Paris"])
        )
    finally:
        encoder.close()


@pytest.mark.skipif(len(USABLE) < 2, reason="needs two CPUs: one for the encoder, one for the server")
def test_serve_pins_its_worker_and_itself_apart(tmp_path):
    """``build_pool`` with ``--encoder-cpus``: the worker on those CPUs, every thread of the server's
    process on the others (this process's pinning is undone afterwards)."""
    from rotmem.commands.serve import build_pool

    cpu = max(USABLE)
    args = argparse.Namespace(store=str(tmp_path), encoder="hashing", device="cpu", extractor=None,
                              synchronous="FULL", retriever="temporal", encoder_threads=None,
                              encoder_in_process=False, encoder_batch=None,
                              encoder_cpus=str(cpu))  # fmt: skip
    try:
        pool = build_pool(args)
        try:
            assert set(thread_cpus(pool.encoder.inner.pid)) == {frozenset({cpu})}
            assert set(thread_cpus(os.getpid())) == {USABLE - {cpu}}
        finally:
            pool.close()
    finally:  # every thread, those the pool started included, back on all the CPUs
        pin_process(USABLE)
    assert frozenset(os.sched_getaffinity(0)) == USABLE


def test_serve_refuses_encoder_cpus_it_cannot_use(tmp_path, capsys):
    from rotmem.cli import main
    from rotmem.server.keys import KeyRing

    keys = tmp_path / "keys.json"
    KeyRing().save(str(keys))
    base = ["serve", "--keys", str(keys), "--store", str(tmp_path), "--encoder", "hashing"]
    for extra, message in [
        (["--encoder-cpus", "1-x"], "--encoder-cpus: '1-x' is not a CPU list"),
        (
            ["--encoder-cpus", str(max(USABLE) + 1000)],
            f"CPU {max(USABLE) + 1000} is not one this process may use",
        ),
        (
            ["--encoder-cpus", "0", "--encoder-in-process"],
            "--encoder-cpus needs the encoder in its own process",
        ),
    ]:
        assert main(base + extra) == 2
        assert message in capsys.readouterr().err
