"""The memory on a real Postgres server: namespaces are schemas, isolated and droppable; a reopened
namespace restores everything; readers see other connections' commits; concurrent writers of one
namespace hand out ids in commit order; read-only opening never creates anything."""

from __future__ import annotations

import threading

import pytest

from rotmem.memory import HashingEncoder, TemporalMemory, TEMStore
from rotmem.memory.storage.database import MemoryDatabaseError
from rotmem.memory.storage.postgres import drop_namespace
from tests.postgres_server import new_namespace


def test_a_reopened_namespace_restores_records_status_and_index(postgres_dsn):
    namespace = new_namespace()
    with TEMStore(postgres_dsn, encoder=HashingEncoder(64), namespace=namespace) as store:
        store.add_session("s1", [("Alice", "lives in", "Paris")], text="I live in Paris", summaries=["moved"])
        store.add_session("s2", [("Alice", "moved to", "Berlin")])
        before = (store.records(), store.passages(), store.sessions(), store.retrieve("Alice lives", k=3))
    with TEMStore(postgres_dsn, namespace=namespace) as reopened:  # encoder rebuilt from its stored name
        assert (reopened.records(), reopened.passages(), reopened.sessions()) == before[:3]
        assert reopened.retrieve("Alice lives", k=3) == before[3]
        assert [r.historical for r in reopened.records("alice", "residence")] == [True, False]


def test_namespaces_are_isolated_and_a_dropped_one_is_gone(postgres_dsn):
    a, b = new_namespace(), new_namespace()
    with TEMStore(postgres_dsn, encoder=HashingEncoder(32), namespace=a) as store_a:
        store_a.add_session("s1", [("Ann", "lives in", "Rome")])
    with TEMStore(postgres_dsn, encoder=HashingEncoder(32), namespace=b) as store_b:
        store_b.add_session("s1", [("Bob", "lives in", "Oslo")])  # same session id: another namespace
        assert [r.object for r in store_b.retrieve("lives", k=10)] == ["Oslo"]
    assert drop_namespace(postgres_dsn, a) is True
    assert drop_namespace(postgres_dsn, a) is False
    with pytest.raises(MemoryDatabaseError, match="no such memory namespace"):
        TEMStore(postgres_dsn, namespace=a, read_only=True)
    with TEMStore(postgres_dsn, namespace=b, read_only=True) as store_b:
        assert [r.object for r in store_b.records()] == ["Oslo"]


def test_read_only_opening_creates_nothing_and_refuses_writes(postgres_dsn):
    namespace = new_namespace()
    with pytest.raises(MemoryDatabaseError, match="no such memory namespace"):
        TEMStore(postgres_dsn, namespace=namespace, read_only=True)
    with pytest.raises(MemoryDatabaseError, match="no such memory namespace"):  # still not created
        TEMStore(postgres_dsn, namespace=namespace, read_only=True)
    TEMStore(postgres_dsn, encoder=HashingEncoder(32), namespace=namespace).close()
    with (
        TEMStore(postgres_dsn, namespace=namespace, read_only=True, encoder=HashingEncoder(32)) as store,
        pytest.raises(ValueError, match="read-only"),
    ):
        store.add_session("s1", [("a", "b", "c")])


def test_a_long_lived_reader_sees_what_another_connection_commits(postgres_dsn):
    namespace = new_namespace()
    writer = TEMStore(postgres_dsn, encoder=HashingEncoder(64), namespace=namespace)
    writer.add_session("s1", [("cy", "lives in", "oslo")], turns=["cy: oslo"])
    reader = TEMStore(postgres_dsn, namespace=namespace, read_only=True)
    assert [r.object for r in reader.retrieve("where does cy live", k=5)] == ["oslo"]
    writer.add_session("s2", [("cy", "lives in", "lima")], turns=["cy: lima now"])
    found = {r.object: r.historical for r in reader.retrieve("where does cy live", k=5)}
    assert found == {"oslo": True, "lima": False} and len(reader) == 2
    assert reader.refresh() == 0
    reader.close()
    writer.close()


def test_concurrent_writers_of_one_namespace_lose_nothing(postgres_dsn):
    namespace = new_namespace()
    TEMStore(postgres_dsn, encoder=HashingEncoder(32), namespace=namespace).close()
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            with TEMStore(postgres_dsn, encoder=HashingEncoder(32), namespace=namespace) as store:
                for i in range(10):
                    store.add_session(f"w{worker}-{i}", [("user", "lives in", f"town{worker}-{i}")])
        except BaseException as error:  # re-raised in the test thread below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with TEMStore(postgres_dsn, namespace=namespace, read_only=True) as store:
        records = store.records("user", "residence")
        assert len(records) == 40 and sorted(r.id for r in records) == list(range(40))
        assert sorted(index for _, index, _ in store.sessions()) == list(range(40))
        assert [r.historical for r in records] == [True] * 39 + [False]


def test_temporal_memory_on_postgres_keeps_times_atomically(postgres_dsn):
    with TemporalMemory(postgres_dsn, encoder=HashingEncoder(64), namespace=new_namespace()) as memory:
        memory.add_session(
            "s1", [("Ana", "lives in", "Lisbon")], date="2019-01-01", text="Ana lives in Lisbon"
        )
        with pytest.raises(ValueError, match="t_happen 20240101"):
            memory.add_session(
                "s2", [("Ana", "moved to", "Porto", 20240101)], date="2020-01-01", text="Porto"
            )
        memory.add_session(
            "s2", [("Ana", "moved to", "Porto", "2019-06-01")], date="2020-01-01", text="Porto"
        )
        assert [(f.tail, f.t_happen) for f in memory.facts()] == [("Lisbon", 17897.0), ("Porto", 18048.0)]
        assert memory.render(memory.retrieve("where does Ana live", k=2)).splitlines() == [
            "2019-06-01: Ana moved to Porto",  # the current version first
            "2019-01-01: Ana lives in Lisbon [historical]",
        ]
