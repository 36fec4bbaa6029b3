"""The store defects of issue 23, each reproduced and checked fixed: bad days refused at write time,
readers that never write or wait for the write lock, a race-free new file, read commands that
refuse a missing or foreign file without creating or changing anything, huge session indexes and
directories given as ``--db``."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

import pytest

from rotmem.cli import main
from rotmem.memory import HashingEncoder, TemporalMemory, TEMStore
from rotmem.memory.records import ExtractedFact
from rotmem.memory.storage.database import MemoryDatabaseError
from rotmem.memory.storage.schema import SCHEMA_VERSION
from rotmem.memory.storage.sqlite import SQLiteDatabase


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_memory(path: Path) -> None:
    with TEMStore(str(path), encoder=HashingEncoder(32)) as store:
        store.add_session("s1", [("Ann", "lives in", "Rome")], text="Ann lives in Rome")


@pytest.mark.parametrize(
    "fact, date, message",
    [
        (
            ExtractedFact("A", "moved to", "Rome", t_happen=20240101),
            "2024-01-05",
            "fact 0: t_happen 20240101",
        ),
        (
            ("A", "moved to", "Rome", -800000),
            "2024-01-05",
            "fact 0: t_happen -800000 is outside the calendar",
        ),
        (("A", "moved to", "Rome", float("inf")), "2024-01-05", "fact 0: t_happen must be finite"),
        (("A", "moved to", "Rome"), float("inf"), "session 's2': date must be finite"),
        (("A", "moved to", "Rome"), float("nan"), "session 's2': date must be finite"),
        (("A", "moved to", "Rome"), 10**7, "session 's2': date 10000000 is outside the calendar"),
        (("A", "moved to", "Rome"), "2024-13-01", "session 's2': bad date '2024-13-01'"),
    ],
)
def test_days_outside_the_calendar_are_refused_at_write_time(fact, date, message):
    with TemporalMemory(encoder=HashingEncoder(32)) as memory:
        memory.add_session("s1", [("A", "lives in", "Oslo")], date="2024-01-01", text="A lives in Oslo")
        with pytest.raises(ValueError, match=message):
            memory.add_session("s2", [fact], date=date, text="A moved to Rome")
        assert len(memory.store) == 1 and len(memory.facts()) == 1  # nothing written
        evidence = memory.render(memory.retrieve("where does A live", k=5))
        assert evidence == "2024-01-01: A lives in Oslo"  # retrieval keeps working


def test_the_store_refuses_a_bad_t_happen_too():
    with TEMStore(encoder=HashingEncoder(32)) as store, pytest.raises(ValueError, match="t_happen 20240101"):
        store.add_session("s", [ExtractedFact("A", "moved to", "Rome", t_happen=20240101)])


def test_a_huge_session_index_is_refused_with_one_line(tmp_path, capsys):
    db = str(tmp_path / "mem.db")
    args = ["memory", "add", "--db", db, "--encoder", "hashing", "--session", "s1", "--fact", "a|b|c"]
    assert main([*args, "--session-index", "9223372036854775808"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "session_index must be in 0..9223372036854775806" in err
    assert main([*args, "--session-index", "-1"]) == 2
    assert "session_index must be in" in capsys.readouterr().err
    assert main([*args, "--session-index", "9223372036854775806"]) == 0  # the largest accepted
    with TEMStore(db, read_only=True) as store:
        assert store.sessions()[0][1] == 9223372036854775806


@pytest.mark.parametrize("command", ["add", "search", "show"])
def test_a_directory_as_db_gives_one_line(tmp_path, capsys, command):
    tail = {"add": ["--session", "s", "--fact", "a|b|c"], "search": ["question"], "show": []}[command]
    assert main(["memory", command, "--db", str(tmp_path), *tail]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path}: is a directory" in err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("command", [["search", "question"], ["show"]])
def test_read_commands_refuse_a_missing_file_and_create_nothing(tmp_path, capsys, command):
    db = tmp_path / "typo.db"
    assert main(["memory", command[0], "--db", str(db), *command[1:]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{db}: no such memory database" in err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "command", [["search", "question"], ["show"], ["add", "--session", "s", "--fact", "a|b|c"]]
)
def test_a_foreign_database_is_refused_and_left_unchanged(tmp_path, capsys, command):
    db = tmp_path / "other.db"
    connection = sqlite3.connect(db)
    connection.execute("CREATE TABLE invoices(id INTEGER PRIMARY KEY, total REAL)")
    connection.execute("INSERT INTO invoices VALUES (1, 9.5)")
    connection.commit()
    connection.close()
    before = digest(db)
    assert main(["memory", command[0], "--db", str(db), *command[1:]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a rotmem memory database" in err and "invoices" in err
    assert digest(db) == before and os.listdir(tmp_path) == ["other.db"]
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_read_commands_do_not_change_the_database_file(tmp_path, capsys):
    db = tmp_path / "mem.db"
    make_memory(db)
    before = digest(db)
    assert main(["memory", "show", "--db", str(db)]) == 0
    assert main(["memory", "search", "--db", str(db), "where does Ann live"]) == 0
    assert "s0: Ann lives in Rome" in capsys.readouterr().out
    assert digest(db) == before


def test_a_store_opened_read_only_refuses_writes(tmp_path):
    db = tmp_path / "mem.db"
    make_memory(db)
    with TEMStore(str(db), read_only=True) as store:
        with pytest.raises(ValueError, match="opened read-only; nothing was written"):
            store.add_session("s2", [("Ann", "moved to", "Bari")])
        assert [r.object for r in store.records()] == ["Rome"]


def test_a_reader_does_not_wait_for_a_writer_holding_the_lock(tmp_path):
    db = tmp_path / "mem.db"
    make_memory(db)
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
    writer.execute("INSERT INTO meta VALUES ('held', 'yes')")
    try:
        start = time.monotonic()
        for read_only in (True, False):  # a writable store opens without the write lock too
            with TEMStore(str(db), read_only=read_only) as store:
                assert [r.object for r in store.retrieve("Ann", k=3)] == ["Rome"]
        assert time.monotonic() - start < 5.0  # the busy timeout is 30 s: no wait happened
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def _read_as_nobody(path: str, outcomes) -> None:
    """Runs in a forked child: drop to an unprivileged user when root, then read the file."""
    try:
        if os.geteuid() == 0:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
        with TEMStore(path, read_only=True) as store:
            outcomes.put([r.object for r in store.retrieve("Ann", k=3)])
    except Exception as error:  # reported to the parent, which fails the test with it
        outcomes.put(repr(error))


def test_a_read_only_file_in_a_read_only_directory_can_be_read():
    """As an unprivileged user (root may write anything): file 0444 in a directory 0555."""
    folder = Path(tempfile.mkdtemp(prefix="rotmem-ro-", dir="/tmp"))
    try:
        db = folder / "mem.db"
        make_memory(db)
        os.chmod(db, 0o444)
        os.chmod(folder, 0o555)
        context = multiprocessing.get_context("fork")
        outcomes = context.Queue()
        child = context.Process(target=_read_as_nobody, args=(str(db), outcomes))
        child.start()
        assert outcomes.get(timeout=120) == ["Rome"]
        child.join(timeout=60)
        assert sorted(os.listdir(folder)) == ["mem.db"]
    finally:
        os.chmod(folder, 0o755)
        shutil.rmtree(folder)


def _open_new_file(path: str, barrier, outcomes) -> None:
    """Runs in a forked child: wait for all the others, then open the (new) file."""
    barrier.wait()
    try:
        SQLiteDatabase(path).close()
        outcomes.put("ok")
    except Exception as error:  # reported to the parent, which fails the test with it
        outcomes.put(repr(error))


@pytest.mark.slow
def test_many_processes_opening_one_new_file_at_once_all_succeed(tmp_path):
    context = multiprocessing.get_context("fork")  # cheap children: nothing to import again
    for round_ in range(1):
        db = str(tmp_path / f"new{round_}.db")
        barrier, outcomes = context.Barrier(40), context.Queue()
        children = [context.Process(target=_open_new_file, args=(db, barrier, outcomes)) for _ in range(40)]
        for child in children:
            child.start()
        results = [outcomes.get(timeout=120) for _ in children]
        for child in children:
            child.join(timeout=60)
        assert [r for r in results if r != "ok"] == []
        with TEMStore(db, read_only=True) as store:
            assert store.db.get_meta("schema_version") == SCHEMA_VERSION and store.sessions() == []
        assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _hold_the_new_file(path: str, barrier, hold_s: float) -> None:
    """Runs in a forked child: take the write lock of the new (rollback-journal) file, release the
    openers, keep the lock ``hold_s`` seconds. This is the moment a first opener holds the file
    while it switches it to WAL or creates the schema, made long enough for every opener to meet it."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("BEGIN IMMEDIATE")
    barrier.wait()
    time.sleep(hold_s)
    connection.execute("COMMIT")
    connection.close()


def test_openers_of_a_new_file_wait_for_a_lock_held_during_the_wal_switch(tmp_path):
    """The WAL switch of a new file gets "database is locked" at once, without the busy timeout,
    while another process holds the file's lock (SQLite does not wait there). Twelve processes
    released by one barrier open the file while a thirteenth holds that lock: every opening must
    wait and succeed. Before the fix (no retry around ``PRAGMA journal_mode=WAL``) all twelve
    failed at once; without the holder, the same race hit only 1-3 of 40 rounds of 8 openers."""
    context = multiprocessing.get_context("fork")
    db = str(tmp_path / "new.db")
    openers = 12
    barrier, outcomes = context.Barrier(openers + 1), context.Queue()
    holder = context.Process(target=_hold_the_new_file, args=(db, barrier, 0.5))
    children = [context.Process(target=_open_new_file, args=(db, barrier, outcomes)) for _ in range(openers)]
    holder.start()
    for child in children:
        child.start()
    results = [outcomes.get(timeout=120) for _ in children]
    for process in (holder, *children):
        process.join(timeout=60)
    assert holder.exitcode == 0
    assert [r for r in results if r != "ok"] == []
    with TEMStore(db, read_only=True) as store:
        assert store.db.get_meta("schema_version") == SCHEMA_VERSION and store.sessions() == []
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_read_only_opening_of_a_memory_path_is_refused():
    with pytest.raises(MemoryDatabaseError, match="cannot be opened read-only"):
        TEMStore(":memory:", read_only=True)
