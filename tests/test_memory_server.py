"""``rotmem serve`` on a real uvicorn server on 127.0.0.1 (a random port) with a real HTTP client:
the API, its one-line JSON errors and limits, and tenants (key A can neither read, search, count
nor delete B's records) on SQLite files and on a real Postgres server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

httpx = pytest.importorskip("httpx", reason='the server tests need httpx: pip install "rotmem[server]"')
uvicorn = pytest.importorskip("uvicorn", reason='the server tests need uvicorn: pip install "rotmem[server]"')

from rotmem.cli import main  # noqa: E402
from rotmem.memory import HashingEncoder  # noqa: E402
from rotmem.server.app import create_app  # noqa: E402
from rotmem.server.keys import KeyRing, token_hash  # noqa: E402
from rotmem.server.pool import MemoryPool  # noqa: E402
from tests.postgres_server import new_namespace  # noqa: E402


@dataclass
class Service:
    url: str
    keys: dict[str, str]  # namespace -> token
    pool: MemoryPool

    def client(self, namespace: str | None) -> httpx.Client:
        headers = {} if namespace is None else {"Authorization": f"Bearer {self.keys[namespace]}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


def run_server(
    pool: MemoryPool, keys: KeyRing, max_body: int
) -> tuple[uvicorn.Server, threading.Thread, str]:
    config = uvicorn.Config(
        create_app(pool, keys, max_body=max_body), host="127.0.0.1", port=0, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, thread, f"http://127.0.0.1:{port}"


@pytest.fixture(params=["sqlite", "postgres"])
def service(request, tmp_path) -> Iterator[Service]:
    store = request.getfixturevalue("postgres_dsn") if request.param == "postgres" else str(tmp_path)
    names = {"a": new_namespace(), "b": new_namespace()}
    ring = KeyRing()
    tokens = {names[who]: ring.add(names[who]) for who in ("a", "b")}
    pool = MemoryPool(store, HashingEncoder(64))
    server, thread, url = run_server(pool, ring, max_body=64 * 1024)
    try:
        yield Service(url, {who: tokens[names[who]] for who in ("a", "b")}, pool)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        pool.close()


def add(client: httpx.Client, session_id: str, date: str, facts: list[dict], text: str | None = None) -> dict:
    response = client.post(
        "/v1/sessions", json={"session_id": session_id, "date": date, "facts": facts, "text": text}
    )
    assert response.status_code == 200, response.text
    return response.json()


def fact(subject: str, relation: str, obj: str, **extra) -> dict:
    return {"subject": subject, "relation": relation, "object": obj, **extra}


def test_add_search_history_record_stats(service):
    with service.client("a") as a:
        first = add(
            a, "s1", "2020-01-05", [fact("Ann", "lives in", "Oslo"), fact("Ann", "likes", "tea")], "Ann: Oslo"
        )
        assert first["fact_ids"] == [0, None] and first["dropped"][0]["fact"] == ["Ann", "likes", "tea"]
        add(a, "s2", "2021-03-01", [fact("Ann", "moved to", "Lima", t_happen="2021-02-01")])
        found = a.post("/v1/search", json={"question": "Where does Ann live?", "k": 5}).json()
        assert found["evidence"].splitlines() == [
            "2020-01-05: Ann lives in Oslo [historical]",
            "2021-02-01: Ann moved to Lima",
        ]
        assert [r["object"] for r in found["records"]] == ["Oslo", "Lima"] and found[
            "mode"
        ] == "time-agnostic"
        history = a.get("/v1/subjects/ann/history", params={"relation": "residence"}).json()
        assert [(r["object"], r["historical"]) for r in history["records"]] == [
            ("Oslo", True),
            ("Lima", False),
        ]
        record = a.get("/v1/records/1").json()
        assert (record["object"], record["t_happen"], record["t_obs"]) == ("Lima", "2021-02-01", "2021-03-01")
        stats = a.get("/v1/stats").json()
        assert {k: stats[k] for k in ("sessions", "facts", "historical", "latest")} == {
            "sessions": 2, "facts": 2, "historical": 1, "latest": "2021-03-01"
        }  # fmt: skip


def test_key_a_can_neither_read_search_count_nor_delete_b(service):
    with service.client("b") as b:
        add(b, "s1", "2020-01-01", [fact("Bob", "lives in", "Rome"), fact("Bob", "works as", "chef")])
        bob_ids = [r["id"] for r in b.get("/v1/subjects/Bob/history").json()["records"]]
    with service.client("a") as a:
        for record_id in bob_ids:
            response = a.get(f"/v1/records/{record_id}")
            assert response.status_code == 404 and "no record" in response.json()["error"]
        found = a.post("/v1/search", json={"question": "Where does Bob live? Rome chef", "k": 50}).json()
        assert found["records"] == [] and found["evidence"] == ""
        assert a.get("/v1/subjects/Bob/history").json()["records"] == []
        assert a.get("/v1/stats").json()["facts"] == 0
        assert a.delete("/v1/namespace").json()["deleted"] is False
        add(a, "s1", "2020-01-01", [fact("Ann", "lives in", "Oslo")])  # same session id: no clash
        found = a.post("/v1/search", json={"question": "Rome chef Bob Oslo", "k": 50}).json()
        assert [r["object"] for r in found["records"]] == ["Oslo"]
    with service.client("b") as b:
        stats = b.get("/v1/stats").json()
        assert stats["facts"] == 2 and stats["sessions"] == 1
        assert b.delete("/v1/namespace").json()["deleted"] is True
        assert b.get("/v1/stats").json()["facts"] == 0
        assert b.post("/v1/search", json={"question": "Rome"}).json()["records"] == []
    with service.client("a") as a:
        assert a.get("/v1/stats").json()["facts"] == 1  # deleting B left A alone


def test_concurrent_searches_are_batched_and_each_gets_its_own_answer(service):
    with service.client("a") as client:
        facts = [
            fact(f"p{i % 20}", ("lives in", "likes", "works as")[i % 3], f"thing{i}") for i in range(120)
        ]
        add(client, "s1", "2023-01-01", facts[:60])
        add(client, "s2", "2023-02-01", facts[60:])
        questions = [f"what does p{i} like" for i in range(20)] + [f"where does p{i} live" for i in range(20)]
        alone = {q: client.post("/v1/search", json={"question": q, "k": 4}).json() for q in questions}
    answers: dict[str, dict] = {}

    def ask(question: str) -> None:
        with service.client("a") as own:
            answers[question] = own.post("/v1/search", json={"question": question, "k": 4}).json()

    threads = [threading.Thread(target=ask, args=(q,)) for q in questions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    # A batch is scored by one BLAS product, a lone question by FAISS's scan: the same float32 dot
    # products of 64-d unit vectors, summed in another order (at most 64 roundings of 2^-24 each).
    tolerance = 64 * float(np.finfo(np.float32).eps)
    for question in questions:
        got, want = answers[question], alone[question]
        assert (got["evidence"], got["mode"]) == (want["evidence"], want["mode"])
        assert [r["id"] for r in got["records"]] == [r["id"] for r in want["records"]]
        assert [r["score"] for r in got["records"]] == pytest.approx(
            [r["score"] for r in want["records"]], abs=tolerance
        )
        assert len(got["records"]) == 4


def test_missing_and_unknown_keys_are_refused(service):
    with service.client(None) as anonymous:
        for method, path in (("GET", "/v1/stats"), ("POST", "/v1/search"), ("DELETE", "/v1/namespace")):
            response = anonymous.request(method, path, json={"question": "x"})
            assert response.status_code == 401 and response.json() == {
                "error": "missing API key: send 'Authorization: Bearer <key>'"
            }
        response = anonymous.get("/v1/stats", headers={"Authorization": "Bearer not-a-key"})
        assert response.status_code == 401 and response.json() == {"error": "unknown API key"}


def test_errors_are_one_line_json_with_the_cli_messages(service):
    with service.client("a") as a:
        bad_day = a.post(
            "/v1/sessions",
            json={
                "session_id": "s1",
                "date": "2024-01-05",
                "facts": [fact("A", "moved to", "Rome", t_happen=20240101)],
            },
        )
        assert bad_day.status_code == 400
        assert bad_day.json()["error"].startswith(
            "session 's1', fact 0: t_happen 20240101 is outside the calendar"
        )
        far = a.post("/v1/sessions", json={"session_id": "s1", "date": 1e9, "facts": []})
        assert far.status_code == 400 and "session 's1': date 1000000000.0 is outside" in far.json()["error"]
        add(a, "s1", "2024-01-05", [fact("A", "lives in", "Rome")])
        duplicate = a.post("/v1/sessions", json={"session_id": "s1", "date": "2024-01-06", "facts": []})
        assert duplicate.status_code == 409 and "already stored: ['s1']" in duplicate.json()["error"]
        schema = a.post("/v1/search", json={"question": "x", "k": 0})
        assert schema.status_code == 422 and schema.json()["error"].startswith("body.k:")
        too_big = a.post(
            "/v1/search",
            content=json.dumps({"question": "x" * 70_000}),
            headers={"content-type": "application/json"},
        )
        assert too_big.status_code == 413 and too_big.json() == {"error": "request body over 65536 bytes"}
        no_text = a.post(
            "/v1/sessions", json={"session_id": "s9", "date": "2024-01-06", "facts": None, "text": "A moved"}
        )
        assert no_text.status_code == 400 and "needs an extractor" in no_text.json()["error"]
        bad_now = a.post("/v1/search", json={"question": "where", "now": "yesterday"})
        assert bad_now.status_code == 400 and bad_now.json() == {
            "error": "search: bad now 'yesterday', expected YYYY-MM-DD"
        }
        for response in (bad_day, far, duplicate, schema, too_big, no_text, bad_now):
            assert "\n" not in response.json()["error"]


def test_health_readiness_and_openapi(service):
    with service.client(None) as anonymous:
        assert anonymous.get("/healthz").json() == {"status": "ok"}
        assert anonymous.get("/readyz").json() == {"status": "ready"}
        assert anonymous.get("/docs").status_code == 200
        paths = anonymous.get("/openapi.json").json()["paths"]
        assert {"/v1/sessions", "/v1/search", "/v1/stats", "/v1/namespace", "/v1/records/{record_id}"} <= set(
            paths
        )


def test_keys_are_stored_hashed_and_added_from_the_cli(tmp_path, capsys):
    keys = tmp_path / "keys.json"
    assert main(["serve", "--keys", str(keys), "--add-key", "alice"]) == 0
    token = capsys.readouterr().out.strip()
    assert len(token) >= 40 and token not in keys.read_text()
    assert json.loads(keys.read_text()) == {"keys": [{"namespace": "alice", "sha256": token_hash(token)}]}
    assert oct(keys.stat().st_mode & 0o777) == "0o600"
    ring = KeyRing.load(keys)
    assert (
        ring.namespace_of(token) == "alice"
        and ring.namespace_of(token + "x") is None
        and ring.namespace_of("") is None
    )
    assert main(["serve", "--keys", str(keys), "--add-key", "Bad Name"]) == 2
    assert "namespace must be" in capsys.readouterr().err
    assert main(["serve", "--keys", str(tmp_path / "missing.json"), "--store", str(tmp_path)]) == 2
    assert "no such key file" in capsys.readouterr().err
    assert (
        main(["serve", "--keys", str(keys), "--store", str(tmp_path / "nope"), "--encoder", "hashing"]) == 2
    )
    assert "store directory does not exist" in capsys.readouterr().err
    bad_threads = ["serve", "--keys", str(keys), "--store", str(tmp_path), "--encoder-threads", "0"]
    assert main(bad_threads) == 2
    assert "--encoder-threads must be at least 1, got 0" in capsys.readouterr().err


def test_deleting_a_sqlite_namespace_removes_its_file(tmp_path):
    pool = MemoryPool(str(tmp_path), HashingEncoder(16))
    with pool.use("alice", create=True) as memory:
        memory.add_session("s1", [("a", "b", "c")], date="2020-01-01")
    assert (tmp_path / "alice.db").exists()
    with pool.use("bob", create=False) as memory:
        assert memory is None
    assert sorted(p.name for p in Path(tmp_path).iterdir() if p.suffix == ".db") == [
        "alice.db"
    ]  # reads create nothing
    assert pool.delete("alice") is True
    assert [p.name for p in Path(tmp_path).iterdir()] == []
    pool.close()
