"""The schema registry and the session writer: rows by column name, every layer's tables in one
ordered schema, the same columns on SQLite and Postgres; the memory baselines and the library's own
memories as rankers rank on their own."""

from __future__ import annotations

import pytest

from rotmem.memory import HashingEncoder, TemporalMemory
from rotmem.memory.records import DuplicateSessionError
from rotmem.memory.retrieval import baselines
from rotmem.memory.storage.schema import LAYERS, create_statements, register, table, tables
from rotmem.memory.storage.sqlite import SQLiteDatabase
from rotmem.memory.storage.writer import SessionWriter


def test_each_layer_owns_its_tables_in_schema_order():
    assert [t.name for t in tables()] == ["sessions", "facts", "passages", "temporal_facts", "session_dates"]
    with pytest.raises(ValueError, match="already registered"):
        register(LAYERS[1], table("facts"))
    with pytest.raises(KeyError, match="no memory table 'nope'"):
        table("nope")


def test_both_dialects_create_the_same_columns_but_postgres_keeps_arrival():
    sqlite, postgres = create_statements("sqlite"), create_statements("postgres")
    assert len(sqlite) == len(postgres)
    assert "arrival BIGSERIAL" in postgres[1] and "arrival" not in sqlite[1]
    assert 'group_key TEXT COLLATE "C" NOT NULL' in postgres[2] and "group_key TEXT NOT NULL" in sqlite[2]


def test_the_writer_takes_rows_by_name_and_writes_parents_first():
    db = SQLiteDatabase(":memory:")
    with db.transaction():
        writer = SessionWriter(db)
        writer.add("session_dates", session_id="s1", t_obs=3.0)  # order of adding does not matter
        writer.add("sessions", {"session_id": "s1", "session_index": 0, "text": None}, created_at=1.0)
        with pytest.raises(KeyError, match=r"missing \['t_obs'\], unknown \['day'\]"):
            writer.add("session_dates", session_id="s2", day=4.0)
        assert writer.pending("sessions") == 1
        writer.flush()
    assert db.execute("SELECT session_id, session_index FROM sessions").fetchall() == [("s1", 0)]
    with pytest.raises(DuplicateSessionError, match="session id already stored"), db.transaction():
        writer = SessionWriter(db)
        writer.add("sessions", session_id="s1", session_index=1, text=None, created_at=2.0)
        writer.flush()


def test_the_baselines_embed_the_question_when_no_vector_is_given():
    pytest.importorskip("bm25s")
    memory = TemporalMemory(encoder=HashingEncoder(64))
    memory.add_session("s1", [("Al", "lives in", "Rome")], date="2019-01-01")
    memory.add_session("s2", [("Al", "lives in", "Oslo")], date="2021-01-01")
    vector = memory.store.encode(["where does Al live now"])[0]
    for make in (baselines.dense, baselines.bm25, baselines.symbolic, baselines.tem):
        rank = make(memory)
        assert sorted(rank("where does Al live now", None, 20000)) == [0, 1]
        assert rank("where does Al live now", None, 20000) == rank("where does Al live now", vector, 20000)
    assert baselines.symbolic(memory)("where does Al live now", None, 20000) == [1, 0]  # latest first
    assert baselines.tem(memory)("where does Al live", None, 20000) == [1, 0]  # current first


def test_the_library_memories_as_rankers_give_record_ids_best_first_at_most_depth():
    pytest.importorskip("bm25s")
    memory = TemporalMemory(encoder=HashingEncoder(256))
    for year in range(2008, 2020):  # twelve facts about Al, one about Bo: more than a depth of 10
        memory.add_session(f"al{year}", [("Al", "lives in", f"City{year}")], date=f"{year}-01-01")
    memory.add_session("bo", [("Bo", "works at", "Acme")], date="2020-01-01")
    bo = next(r.id for r in memory.store.records() if r.subject == "Bo")
    rankers = {
        "hybrid": lambda depth: baselines.hybrid(memory, depth=depth),
        "temporal": lambda depth: baselines.temporal(memory, depth=depth),
        "best": lambda depth: baselines.best(memory, 0.0, constrain=True, depth=depth),
    }
    for name, make in rankers.items():
        for depth in (1, 3, baselines.DEPTH):
            ids = make(depth)("Where does Bo work at Acme?", None, 20000)
            assert 0 < len(ids) <= depth and len(set(ids)) == len(ids), (name, depth, ids)
            assert ids[0] == bo, (name, depth, ids)  # the one fact naming Bo is the best
        assert len(make(baselines.DEPTH)("Where does Al live?", None, 20000)) == baselines.DEPTH, name
