"""TEMStore on a SQLite file: WAL, reopening restores everything, a killed writer loses nothing committed."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rotmem.memory import HashingEncoder, TEMStore

REPO = Path(__file__).resolve().parents[1]


def fill(store: TEMStore) -> None:
    store.add_session(
        "s1", [("Alice", "lives in", "Paris"), ("Alice", "likes", "tea")], text="I live in Paris, tea!"
    )
    store.add_session(
        "s2", [("Alice", "moved to", "Berlin")], text="We moved to Berlin", summaries=["the move"]
    )
    store.add_session("s3", [("Bob", "works for", "Acme")], session_index=7)


def snapshot(store: TEMStore) -> tuple:
    return (
        store.records(),
        store.passages(),
        store.sessions(),
        store.retrieve("where does Alice live", k=3),
        store.retrieve_turns("move", k=2),
    )


def test_reopening_restores_records_status_passages_and_index(tmp_path):
    path = str(tmp_path / "mem.db")
    with TEMStore(path, encoder=HashingEncoder(64)) as store:
        fill(store)
        before = snapshot(store)
    with TEMStore(path) as reopened:  # encoder=None: rebuilt from the stored name
        assert reopened.encoder.name == "hashing:64"
        assert snapshot(reopened) == before
        assert len(reopened) == 4 and reopened.dim == 64
        reopened.add_session("s4", [("Alice", "lives in", "Rome")])  # ids continue after reopening
        assert [r.historical for r in reopened.records("Alice", "residence")] == [True, True, False]


def test_the_file_uses_wal(tmp_path):
    path = str(tmp_path / "mem.db")
    TEMStore(path, encoder=HashingEncoder(8)).close()
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_the_next_session_index_is_an_index_lookup_and_old_files_get_the_index(tmp_path):
    path = str(tmp_path / "m.db")
    with TEMStore(path, encoder=HashingEncoder(64)) as store:
        fill(store)  # s3 at index 7, out of order
        store.add_session("s4", [("Bob", "likes", "jazz")])
    next_index = "SELECT COALESCE(MAX(session_index), -1) + 1 FROM sessions"
    with sqlite3.connect(path) as connection:
        plan = connection.execute(f"EXPLAIN QUERY PLAN {next_index}").fetchall()
        assert any("sessions_by_index" in str(row) for row in plan)
        connection.execute("DROP INDEX sessions_by_index")  # a file written before it
    with TEMStore(path, encoder=HashingEncoder(64)) as store:
        store.add_session("s5", [("Bob", "likes", "blues")])
        assert [(s, i) for s, i, _ in store.sessions()] == [
            ("s1", 0),
            ("s2", 1),
            ("s3", 7),
            ("s4", 8),
            ("s5", 9),
        ]
    with sqlite3.connect(path) as connection:
        names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "sessions_by_index" in names


def test_reopening_with_another_encoder_is_refused(tmp_path):
    path = str(tmp_path / "mem.db")
    with TEMStore(path, encoder=HashingEncoder(64)) as store:
        fill(store)
    with pytest.raises(ValueError, match="hashing:64"):
        TEMStore(path, encoder=HashingEncoder(32))
    with TEMStore(path, encoder=HashingEncoder(64)) as store:
        assert len(store) == 4


def test_new_weights_apply_when_reopened(tmp_path):
    path = str(tmp_path / "mem.db")
    with TEMStore(path, encoder=HashingEncoder(64)) as store:
        store.add_session("s1", [("Cy", "likes", "green tea"), ("Cy", "plays", "green tea")])
    for weights, winner in (({"likes": 0.1}, "plays"), ({"plays": 0.1}, "likes")):
        with TEMStore(path, relation_weights=weights) as store:
            assert max(store.retrieve("green tea", k=2), key=lambda r: r.score).relation == winner


def facts(i: int) -> list[tuple[str, str, str]]:
    return [("user", "lives in", f"town{i}"), ("user", "works as", f"job{i}"), ("pet", "named", f"n{i}")]


def run_writer(path: str, body: str) -> subprocess.Popen:
    """A child process that opens ``path`` and runs ``body`` (with ``store`` and ``facts``)."""
    header = f"""
        import os, signal, sys
        from rotmem.memory import HashingEncoder, TEMStore
        from tests.test_memory_store_persistence import facts
        store = TEMStore({path!r}, encoder=HashingEncoder(32))
        """
    script = textwrap.dedent(header) + textwrap.dedent(body)
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)


def check_consistent(path: str, at_least: int) -> int:
    """Every stored session is whole; sessions 0..n-1 are all there; returns n."""
    with TEMStore(path) as store:
        sessions = [s[0] for s in store.sessions()]
        n = len(sessions)
        assert n >= at_least and sessions == [f"s{i}" for i in range(n)]
        assert len(store) == 3 * n and len(store.passages()) == n
        residence = store.records("user", "residence")
        assert [r.object for r in residence] == [f"town{i}" for i in range(n)]
        assert [r.historical for r in residence] == [True] * (n - 1) + [False]
        if n:
            assert store.retrieve(f"town{n - 1}", k=1)[0].object == f"town{n - 1}"
        return n


@pytest.mark.slow
def test_a_writer_killed_inside_a_transaction_loses_only_that_session(tmp_path):
    path = str(tmp_path / "mem.db")
    writer = run_writer(
        path,
        """
        from rotmem.memory.tem import tables
        original = tables.recompute_status
        def die_on_s3(db, keys):
            if db.count("sessions", "WHERE session_id = 's3'"):
                os.kill(os.getpid(), signal.SIGKILL)  # rows of s3 are inserted, not committed
            return original(db, keys)
        tables.recompute_status = die_on_s3
        for i in range(10):
            store.add_session(f"s{i}", facts(i), text=f"town{i} job{i} n{i}", turns=[f"turn {i}"])
            print(i, flush=True)
        """,
    )
    printed = writer.stdout.read().split()
    assert writer.wait() == -signal.SIGKILL and printed == ["0", "1", "2"]
    assert check_consistent(path, at_least=3) == 3
    with TEMStore(path) as store:
        store.add_session("s3", facts(3), text="town3 job3 n3", turns=["turn 3"])
    assert check_consistent(path, at_least=4) == 4


@pytest.mark.slow
def test_a_writer_killed_at_a_random_moment_loses_nothing_committed(tmp_path):
    path = str(tmp_path / "mem.db")
    writer = run_writer(
        path,
        """
        for i in range(100000):
            store.add_session(f"s{i}", facts(i), text=f"town{i} job{i} n{i}", turns=[f"turn {i}"])
            print(i, flush=True)
        """,
    )
    committed = -1
    for line in writer.stdout:
        committed = int(line)
        if committed >= 25:
            break
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    writer.stdout.close()
    assert check_consistent(path, at_least=committed + 1) >= 26
