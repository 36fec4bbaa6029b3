"""A long-lived reader sees what other processes commit; unreadable files fail with one clear line;
a schema-1 file is upgraded in place."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from rotmem.memory import HashingEncoder, TemporalMemory, TEMStore
from rotmem.memory.storage.database import MemoryDatabaseError
from rotmem.memory.storage.schema import SCHEMA_VERSION

REPO = Path(__file__).resolve().parents[1]


def _write_session(path: str, session_id: str, fact: tuple[str, str, str], turn: str) -> None:
    """Runs in another process: one session written through its own store."""
    with TEMStore(path, encoder=HashingEncoder(64)) as store:
        store.add_session(session_id, [fact], turns=[turn])


def _in_another_process(*args) -> None:
    process = multiprocessing.get_context("spawn").Process(target=_write_session, args=args)
    process.start()
    process.join(timeout=120)
    assert process.exitcode == 0


@pytest.mark.slow
def test_a_reader_opened_before_another_process_writes_sees_the_new_version(tmp_path):
    path = str(tmp_path / "mem.db")
    with TEMStore(path, encoder=HashingEncoder(64)) as writer:
        writer.add_session("s1", [("alice", "lives in", "paris")], turns=["alice: I live in paris"])
    reader = TEMStore(path)  # opened now, kept open, as an agent's server would
    assert [r.object for r in reader.retrieve("where does alice live", k=5)] == ["paris"]

    _in_another_process(path, "s2", ("alice", "lives in", "rome"), "alice: I moved to rome")

    found = {r.object: r.historical for r in reader.retrieve("where does alice live", k=5)}
    assert found == {"paris": True, "rome": False}
    assert len(reader) == 2
    assert "alice: I moved to rome" in [p.text for p in reader.retrieve_turns("rome", k=2)]
    assert reader.refresh() == 0  # nothing new since: one PRAGMA


def test_a_reader_that_writes_indexes_rows_committed_before_its_write(tmp_path):
    path = str(tmp_path / "mem.db")
    reader = TEMStore(path, encoder=HashingEncoder(64))
    reader.add_session("s1", [("bob", "works at", "acme")], turns=["bob: acme"])
    other = TEMStore(path)  # another connection (same process: no new interpreter needed)
    other.add_session("s2", [("bob", "works at", "globex")], turns=["bob: globex now"])
    other.close()
    reader.add_session("s3", [("bob", "likes", "tea")], turns=["bob: tea"])  # before any read: no refresh yet
    assert reader.indexes.indexed_upto == {"facts": 2, "passages": 2}
    assert sorted(r.object for r in reader.retrieve("bob", k=10)) == ["acme", "globex", "tea"]
    assert [r.historical for r in reader.records("bob", "works at")] == [True, False]
    reader.close()


def test_a_temporal_memory_sees_new_facts_and_dates(tmp_path):
    path = str(tmp_path / "mem.db")
    memory = TemporalMemory(path, encoder=HashingEncoder(64))
    memory.add_session("s1", [("cy", "lives in", "oslo")], date="2020-01-01")
    other = TemporalMemory(path)
    other.add_session("s2", [("cy", "moved to", "lima")], date="2021-06-01")
    other.close()
    records = memory.retrieve("where does cy live", k=5)
    assert {r.record.object: r.record.historical for r in records} == {"oslo": True, "lima": False}
    assert memory.latest_observation() == memory.session_dates()["s2"]
    memory.close()


def _make_store(path: Path) -> None:
    with TEMStore(str(path), encoder=HashingEncoder(64), synchronous="OFF") as store:
        store.add_sessions(
            dict(session_id=f"s{i}", facts=[("u", "lives in", f"town{i}")], turns=[f"turn {i} " * 20])
            for i in range(200)
        )


@pytest.mark.parametrize("damage", ["garbage", "truncated", "bad header"])
def test_an_unreadable_file_raises_one_line_naming_it(tmp_path, damage):
    path = tmp_path / "mem.db"
    if damage == "garbage":
        path.write_bytes(b"these are not the bytes of a database\n" * 100)
    else:
        _make_store(path)
        data = path.read_bytes()
        assert len(data) > 8192
        path.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"\0" * 100 + data[100:])
    with pytest.raises(MemoryDatabaseError) as caught:
        TEMStore(str(path)).close()
    message = str(caught.value)
    assert str(path) in message and "\n" not in message and "not a readable rotmem memory database" in message


@pytest.mark.slow
def test_the_cli_reports_a_corrupt_file_without_a_traceback(tmp_path):
    path = tmp_path / "mem.db"
    path.write_bytes(b"\x00garbage" * 1000)
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run(
        [sys.executable, "-m", "rotmem.cli", "memory", "show", "--db", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "not a readable" in lines[0]


def test_a_schema_1_file_is_upgraded_in_place(tmp_path):
    path = str(tmp_path / "mem.db")
    with TemporalMemory(path, encoder=HashingEncoder(64)) as memory:
        memory.add_session("s1", [("ann", "lives in", "rome")], date="2020-03-01", turns=["ann: rome"])
    # Make it what rotmem wrote before source ids and session dates (schema 1).
    connection = sqlite3.connect(path)
    connection.executescript(
        "ALTER TABLE facts DROP COLUMN source; ALTER TABLE passages DROP COLUMN source; "
        "DROP TABLE session_dates; UPDATE meta SET value = '1' WHERE key = 'schema_version';"
    )
    connection.close()
    with TemporalMemory(path) as memory:
        assert memory.store.db.get_meta("schema_version") == SCHEMA_VERSION
        [record] = memory.store.records()
        assert (record.object, record.sources) == ("rome", ())
        assert memory.session_dates() == {"s1": memory.facts()[0].t_obs}
        memory.add_session("s2", [("ann", "moved to", "bari")], date="2021-03-01")
        assert [r.historical for r in memory.store.records("ann", "residence")] == [True, False]


def test_a_newer_schema_is_refused(tmp_path):
    path = str(tmp_path / "mem.db")
    TEMStore(path, encoder=HashingEncoder(8)).close()
    connection = sqlite3.connect(path)
    connection.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    connection.commit()
    connection.close()
    with pytest.raises(MemoryDatabaseError, match="schema version 99"):
        TEMStore(path)
