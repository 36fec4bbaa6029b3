"""``rotmem serve`` on a real uvicorn server on 127.0.0.1 (a random port) with a real HTTP client:
the API, its one-line JSON errors and limits, and tenants (key A can neither read, search, count
nor delete B's records) on SQLite files and on a real Postgres server."""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

httpx = pytest.importorskip("httpx", reason='the server tests need httpx: pip install "rotmem[server]"')
uvicorn = pytest.importorskip("uvicorn", reason='the server tests need uvicorn: pip install "rotmem[server]"')

from rotmem.cli import main  # noqa: E402
from rotmem.memory import HashingEncoder  # noqa: E402
from rotmem.memory.encoder import normalise_rows  # noqa: E402
from rotmem.server.app import create_app  # noqa: E402
from rotmem.server.keys import KeyRing, token_hash  # noqa: E402
from rotmem.server.pool import MemoryPool  # noqa: E402
from tests.postgres_server import new_namespace  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Service:
    url: str
    keys: dict[str, str]  # namespace -> token
    pool: MemoryPool

    def client(self, namespace: str | None) -> httpx.Client:
        headers = {} if namespace is None else {"Authorization": f"Bearer {self.keys[namespace]}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


def run_server(
    pool: MemoryPool, keys: KeyRing, max_body: int, http: str = "auto"
) -> tuple[uvicorn.Server, threading.Thread, str]:
    config = uvicorn.Config(
        create_app(pool, keys, max_body=max_body), host="127.0.0.1", port=0, log_level="warning", http=http
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
    with serving(store) as running:
        yield running


# uvicorn's HTTP parsers: the pure-Python h11, and httptools (C), which it picks when installed
HTTP_PARSERS = ["h11"] + (["httptools"] if importlib.util.find_spec("httptools") else [])


@pytest.fixture(params=HTTP_PARSERS)
def sqlite_service(request, tmp_path) -> Iterator[Service]:
    """The service on SQLite files only (for checks of the HTTP layer, which no backend touches),
    under each HTTP parser uvicorn can use here."""
    with serving(str(tmp_path), http=request.param) as running:
        yield running


@pytest.fixture
def best_service(tmp_path) -> Iterator[Service]:
    """The service with ``--retriever best`` (``BestMemory``, the default), on SQLite files."""
    with serving(str(tmp_path), retriever="best") as running:
        yield running


@contextmanager
def serving(store: str, retriever: str = "best", http: str = "auto") -> Iterator[Service]:
    names = {"a": new_namespace(), "b": new_namespace()}
    ring = KeyRing()
    tokens = {names[who]: ring.add(names[who]) for who in ("a", "b")}
    pool = MemoryPool(store, HashingEncoder(64), retriever=retriever)
    server, thread, url = run_server(pool, ring, max_body=64 * 1024, http=http)
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
        assert first["fact_ids"] == [0, 1] and first["verified"] == [True, False] and "dropped" not in first
        add(a, "s2", "2021-03-01", [fact("Ann", "moved to", "Lima", t_happen="2021-02-01")])
        found = a.post("/v1/search", json={"question": "Where does Ann live?", "k": 5}).json()
        assert found["evidence"].splitlines() == [
            "2021-02-01: Ann moved to Lima",  # the current version first
            "2020-01-05: Ann lives in Oslo [historical]",
            "2020-01-05: Ann likes tea",  # not in the text: stored, unverified
        ]
        assert [r["object"] for r in found["records"]] == ["Lima", "Oslo", "tea"]
        assert [r["verified"] for r in found["records"]] == [False, True, False] and found["mode"] == (
            "time-agnostic"
        )
        history = a.get("/v1/subjects/ann/history", params={"relation": "residence"}).json()
        assert [(r["object"], r["historical"]) for r in history["records"]] == [
            ("Oslo", True),
            ("Lima", False),
        ]
        record = a.get("/v1/records/2").json()
        assert (record["object"], record["t_happen"], record["t_obs"]) == ("Lima", "2021-02-01", "2021-03-01")
        stats = a.get("/v1/stats").json()
        assert {k: stats[k] for k in ("sessions", "facts", "historical", "latest")} == {
            "sessions": 2, "facts": 3, "historical": 1, "latest": "2021-03-01"
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


def test_concurrent_adds_are_written_together_and_a_repeated_id_fails_alone(service, monkeypatch):
    """Concurrent adds of a namespace share transactions (fewer ``add_sessions`` calls than adds);
    a session id that is already stored gets its 409 while the sessions batched with it are stored,
    each acknowledged add readable with its own fact."""
    from rotmem.memory.temporal.memory import TemporalMemory

    calls: list[int] = []
    add_sessions = TemporalMemory.add_sessions

    def counted(self, sessions):
        sessions = list(sessions)
        calls.append(len(sessions))
        time.sleep(0.01)  # a commit's latency, so that the next adds queue behind it
        return add_sessions(self, sessions)

    monkeypatch.setattr(TemporalMemory, "add_sessions", counted)
    with service.client("a") as client:
        add(client, "s0", "2023-01-01", [fact("p0", "likes", "tea")])
    answers: dict[int, httpx.Response] = {}

    def write(i: int) -> None:
        session_id = "s0" if i == 7 else f"s{i + 100}"  # one repeats the first session's id
        with service.client("a") as own:
            body = {
                "session_id": session_id,
                "date": "2023-02-01",
                "facts": [fact(f"p{i}", "likes", f"t{i}")],
            }
            answers[i] = own.post("/v1/sessions", json=body)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert answers[7].status_code == 409 and "s0" in answers[7].json()["error"]
    stored = {i: answers[i].json() for i in answers if i != 7}
    assert all(answers[i].status_code == 200 for i in stored)
    assert max(calls) > 1  # an add alone writes one session per transaction
    with service.client("a") as client:
        for i, result in stored.items():
            [record_id] = result["fact_ids"]
            record = client.get(f"/v1/records/{record_id}").json()
            assert (record["subject"], record["object"], record["session_id"]) == (
                f"p{i}",
                f"t{i}",
                f"s{i + 100}",
            )


def test_a_text_two_batched_adds_embedded_is_stored_with_the_first_adds_vector(tmp_path):
    """As when written one after the other (the later add reuses the first's vector from the
    store's embedding cache), even where the encoder gave the two adds different rows."""
    pool = MemoryPool(str(tmp_path), HashingEncoder(64))
    try:
        text = "Ann likes tea"
        first, second = HashingEncoder(64).encode([text, "other words"])
        tenant = pool._tenant("ns", create=True)
        sessions = [
            {"session_id": sid, "facts": [("Ann", "likes", "tea")], "date": 19000} for sid in ("s1", "s2")
        ]
        results = tenant._write_batch([(sessions[0], {text: first}), (sessions[1], {text: second})])
        assert [r.fact_ids for r in results] == [[0], [1]]
        _, _, stored = tenant.memory.store.db.vectors("facts", "relation", 64)
        np.testing.assert_array_equal(stored, normalise_rows(np.stack([first, first])))  # as stored
    finally:
        pool.close()


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
    bad_batch = ["serve", "--keys", str(keys), "--store", str(tmp_path), "--encoder-batch", "0"]
    assert main(bad_batch) == 2
    assert "--encoder-batch must be at least 1, got 0" in capsys.readouterr().err


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


def _sessions(prefix: str, count: int, date: int) -> list[dict]:
    return [
        {"session_id": f"{prefix}{i}", "facts": [(f"{prefix}{i}", "likes", "tea")], "date": date}
        for i in range(count)
    ]


def test_a_namespaces_tables_are_frozen_out_of_the_collector_as_they_double(tmp_path, monkeypatch):
    """``gc.freeze`` after the first search (the retriever's tables built) and again only once the
    namespace holds twice the facts: a full collection no longer walks them under load; closing the
    pool hands them back."""
    import gc

    freezes: list[int] = []
    freeze = gc.freeze
    monkeypatch.setattr(gc, "freeze", lambda: (freezes.append(1), freeze()))
    pool = MemoryPool(str(tmp_path), HashingEncoder(16))
    try:
        with pool.use("alice", create=True) as memory:
            memory.add_sessions(_sessions("s", 4, 19000))
        gc.unfreeze()
        pool.search("alice", "who likes tea", 3, None)
        assert len(freezes) == 1 and gc.get_freeze_count() > 0
        with pool.use("alice", create=False) as memory:
            memory.add_sessions(_sessions("t", 3, 19001))
        pool.search("alice", "who likes tea", 3, None)
        assert len(freezes) == 1  # 7 facts: not yet twice 4
        with pool.use("alice", create=False) as memory:
            memory.add_sessions(_sessions("u", 1, 19002))
        pool.search("alice", "who likes tea", 3, None)
        assert len(freezes) == 2 and pool._tenants["alice"].frozen_at == 8
        pool.close()
        assert gc.get_freeze_count() == 0  # handed back to the collector (at exit, too)
    finally:
        gc.unfreeze()
        pool.close()


def test_booleans_and_strings_are_not_numbers(sqlite_service):
    facts = [fact("A", "lives in", "Rome")]
    refused = {
        "body.date": ("/v1/sessions", {"session_id": "s1", "date": True, "facts": facts}),
        "body.facts.0.t_happen": (
            "/v1/sessions",
            {
                "session_id": "s1",
                "date": "2024-01-05",
                "facts": [fact("A", "lives in", "Rome", t_happen=False)],
            },
        ),
        "body.session_index": (
            "/v1/sessions",
            {"session_id": "s1", "date": "2024-01-05", "facts": facts, "session_index": "1"},
        ),
        "body.now": ("/v1/search", {"question": "where", "now": False}),
        "body.k": ("/v1/search", {"question": "where", "k": "5"}),
    }
    with sqlite_service.client("a") as a:
        for field, (path, body) in refused.items():
            response = a.post(path, json=body)
            assert response.status_code == 422 and response.json()["error"].startswith(f"{field}: "), field
        for k in (True, 2.0):
            assert a.post("/v1/search", json={"question": "where", "k": k}).status_code == 422
        assert "got true" in a.post("/v1/sessions", json=refused["body.date"][1]).json()["error"]
        assert a.get("/v1/stats").json()["sessions"] == 0  # nothing was stored as a 1970 day
        add(a, "s1", 19727, facts)  # days since 1970 as a number are still a day
        assert a.get("/v1/records/0").json()["t_obs"] == "2024-01-05"


def raw_request(url: str, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    """``(status, json)`` of a request sent as written (httpx would normalise ``..`` in a path)."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_every_refusal_uses_the_documented_error_shape(sqlite_service, monkeypatch):
    as_json = {"content-type": "application/json"}

    def chunks(size: int) -> Iterator[bytes]:  # no Content-Length: sent chunked
        for _ in range(size // 1024):
            yield b" " * 1024

    with sqlite_service.client("a") as a:
        auth = {"Authorization": a.headers["authorization"]}
        refusals = {
            "invalid UTF-8": (400, a.post("/v1/search", content=b'{"question": "\xff"}', headers=as_json)),
            "deep JSON": (400, a.post("/v1/search", content=b"[" * 30_000 + b"]" * 30_000, headers=as_json)),
            "malformed JSON": (422, a.post("/v1/search", content=b'{"question": ', headers=as_json)),
            "chunked over the limit": (413, a.post("/v1/search", content=chunks(70_000), headers=as_json)),
            "declared over the limit": (413, a.post("/v1/search", content=b" " * 70_000, headers=as_json)),
            "form body": (415, a.post("/v1/search", data={"question": "x"})),
            "no content type": (415, a.post("/v1/search", content=b'{"question": "x"}')),
            "unknown route": (404, a.get("/v1/nothing")),
            "wrong method": (405, a.put("/v1/search", json={"question": "x"})),
            "schema": (422, a.post("/v1/search", json={"k": 3})),
            "no record": (404, a.get("/v1/records/5")),
        }
        for name, (status, response) in refusals.items():
            assert response.status_code == status, (name, response.text)
            assert set(response.json()) == {"error"} and "\n" not in response.json()["error"], name
        assert "UTF-8" in refusals["invalid UTF-8"][1].json()["error"]
        assert "nested too deeply" in refusals["deep JSON"][1].json()["error"]
        assert (
            refusals["malformed JSON"][1].json()["error"].startswith("body: malformed JSON at character 13")
        )
        assert refusals["chunked over the limit"][1].json() == {"error": "request body over 65536 bytes"}
        assert "Content-Type: application/json" in refusals["form body"][1].json()["error"]
        assert "application/x-www-form-urlencoded" in refusals["form body"][1].json()["error"]
        assert refusals["wrong method"][1].headers["allow"] == "POST"
        for path in ("/v1/../v1/stats", "/v1/subjects/x/../../stats", "/v1/%2E%2E/stats"):
            status, body = raw_request(sqlite_service.url, "GET", path, headers=auth)
            assert status == 404 and set(body) == {"error"}, path
        with_charset = a.post(
            "/v1/search",
            content=b'{"question": "x"}',
            headers={"content-type": "application/json; charset=utf-8"},
        )
        assert with_charset.status_code == 200

        def broken(*args, **kwargs):
            raise RuntimeError("secret internal detail")

        monkeypatch.setattr(sqlite_service.pool, "search", broken)
        internal = a.post("/v1/search", json={"question": "x"})
        assert internal.status_code == 500 and internal.json() == {"error": "internal server error"}


def test_a_subject_with_a_slash_round_trips(sqlite_service):
    with sqlite_service.client("a") as a:
        add(a, "s1", "2020-01-01", [fact("AC/DC", "plays", "hard rock"), fact("AC", "plays", "jazz")])
        for path in (
            "/v1/subjects/AC%2FDC/history",
            "/v1/subjects/AC/DC/history",
            "/v1/subjects/ac%2Fdc/history",
        ):
            history = a.get(path, params={"relation": "plays"}).json()
            assert [(r["subject"], r["object"]) for r in history["records"]] == [("AC/DC", "hard rock")], path
        assert [r["object"] for r in a.get("/v1/subjects/AC/history").json()["records"]] == ["jazz"]


def test_a_fact_the_text_does_not_mention_is_stored_unverified_not_dropped(sqlite_service):
    with sqlite_service.client("a") as a:
        added = add(
            a,
            "s1",
            "2024-01-05",
            [fact("Bo", "lives in", "Oslo"), fact("Bo", "likes", "tea")],
            "Bo: I live in Oslo",
        )
        assert added["fact_ids"] == [0, 1] and added["verified"] == [True, False] and "dropped" not in added
        tea = a.get("/v1/records/1").json()
        assert (tea["object"], tea["verified"]) == ("tea", False)
        found = a.post("/v1/search", json={"question": "what does Bo like", "k": 5}).json()
        assert "2024-01-05: Bo likes tea" in found["evidence"].splitlines()
        assert a.get("/v1/stats").json()["facts"] == 2


def test_a_blank_question_is_refused_with_or_without_data(sqlite_service):
    with sqlite_service.client("a") as a:
        for question in ("", "   ", "\n\t"):
            response = a.post("/v1/search", json={"question": question})
            assert (
                response.status_code == 400
                and "question must be a non-empty string" in response.json()["error"]
            )
        add(a, "s1", "2024-01-05", [fact("Bo", "lives in", "Oslo")])
        for question in ("", "   "):
            assert a.post("/v1/search", json={"question": question}).status_code == 400


def test_the_current_version_first_unless_the_question_asks_about_the_past(sqlite_service):
    with sqlite_service.client("a") as a:
        add(a, "s1", "2023-01-20", [fact("Alice", "lives in", "Paris", t_happen="2023-01-10")])
        add(a, "s2", "2024-02-20", [fact("Alice", "lives in", "Berlin", t_happen="2024-02-01")])

        def objects(question: str) -> list[tuple[str, bool]]:
            found = a.post("/v1/search", json={"question": question, "k": 5}).json()
            return [(r["object"], r["historical"]) for r in found["records"]]

        assert objects("where does Alice live") == [("Berlin", False), ("Paris", True)]
        assert objects("where did Alice live in May 2023") == [("Paris", True), ("Berlin", False)]


def test_search_goes_through_best_memory_records_best_first_evidence_in_tem_order(best_service):
    """``--retriever best``: the search is ``BestMemory`` (hybrid + the question's time constraint):
    ``records`` best first, ``evidence`` the same records in TEM's presentation order."""
    service = best_service
    with service.client("a") as a:
        add(a, "s1", "2023-05-08", [fact("Alice", "lives in", "Paris")], "Alice: I live in Paris.")
        add(a, "s2", "2023-09-01", [fact("Alice", "lives in", "Berlin")], "Alice: I live in Berlin now.")
        add(a, "s3", "2023-09-02", [fact("Bob", "works at", "Acme")])
        past = a.post("/v1/search", json={"question": "where did Alice live in May 2023", "k": 3}).json()
        assert [r["object"] for r in past["records"]][:2] == ["Paris", "Berlin"]
        assert past["evidence"].splitlines()[0] == "2023-05-08: Alice lives in Paris [historical]"
        assert past["mode"] == "explicit"
        now = a.post("/v1/search", json={"question": "where does Alice live", "k": 3}).json()
        assert [(r["object"], r["historical"]) for r in now["records"]][:2] == [
            ("Berlin", False),
            ("Paris", True),
        ]
        assert now["evidence"].splitlines()[:2] == [
            "2023-09-01: Alice lives in Berlin",
            "2023-05-08: Alice lives in Paris [historical]",
        ]
        assert sorted(now["evidence"].splitlines()) == sorted(
            f"{r['t_happen']}: {r['subject']} {r['relation']} {r['object']}"
            + (" [historical]" if r["historical"] else "")
            for r in now["records"]
        )  # the evidence shows the same records as `records`
    tenants = list(service.pool._tenants.values())
    assert tenants and all(t.best.memory is t.memory and t.best.present for t in tenants)
    assert not any(t.best.rerank for t in tenants)  # no fit in the service


def curl_examples(text: str) -> list[str]:
    """The ``curl`` commands of a Markdown text, each joined across its lines (a line ending in a
    backslash, or a quote left open)."""
    commands, current = [], None
    for line in text.splitlines():
        if current is None and line.lstrip().startswith("curl "):
            current = line.strip()
        elif current is not None:
            current += " " + line.strip()
        if current is not None and current.endswith("\\"):
            current = current[:-1].rstrip()
        elif current is not None and current.count("'") % 2 == 0:
            commands.append(current)
            current = None
    return commands


def test_the_curl_examples_of_the_docs_work(sqlite_service):
    if shutil.which("curl") is None:
        pytest.skip("no curl on this machine")
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    examples = [command for page in docs for command in curl_examples(page.read_text())]
    assert len(examples) >= 2
    host = sqlite_service.url.removeprefix("http://")
    environment = {**os.environ, "KEY": sqlite_service.keys["a"]}
    for command in examples:
        assert "localhost:8077" in command and "Content-Type: application/json" in command, command
        ran = subprocess.run(
            ["bash", "-c", command.replace("localhost:8077", host)],
            env=environment,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert "error" not in json.loads(ran.stdout), (command, ran.stdout)
    with sqlite_service.client("a") as a:
        assert a.get("/v1/stats").json()["facts"] >= 1


def test_the_default_retriever_is_best_memory_and_a_bad_one_is_named(tmp_path):
    for retriever, best in ((None, True), ("temporal", False)):
        pool = MemoryPool(str(tmp_path), HashingEncoder(8), **({"retriever": retriever} if retriever else {}))
        try:
            with pool.use("n1", create=True):
                pass
            assert all((t.best is not None) == best for t in pool._tenants.values())
        finally:
            pool.close()
    with pytest.raises(ValueError, match="unknown retriever 'bm25'; expected one of"):
        MemoryPool(str(tmp_path), HashingEncoder(8), retriever="bm25")


def test_the_search_shortcut_answers_as_the_framework_route_does(sqlite_service, monkeypatch):
    import rotmem.server.app as app_module

    threads = []
    search_json = app_module.search_json

    def spy(*args):
        threads.append(threading.current_thread().name)
        return search_json(*args)

    monkeypatch.setattr(app_module, "search_json", spy)
    question = {"question": "Where does Ann live?", "k": 5}
    with sqlite_service.client("a") as a:
        add(a, "s1", "2020-01-05", [fact("Ann", "lives in", "Oslo")], "Ann: Oslo")
        add(a, "s2", "2021-03-01", [fact("Ann", "moved to", "Lima")], "Ann: Lima")
        shortcut = a.post("/v1/search", json=question)
        monkeypatch.setattr(app_module.SearchShortcut, "__call__", lambda *args: _not_taken())
        framework = a.post("/v1/search", json=question)
    assert threads[0].startswith("search") and not threads[1].startswith("search")  # the two paths
    assert shortcut.status_code == framework.status_code == 200
    assert shortcut.json() == framework.json() and shortcut.json()["records"]
    assert shortcut.headers["content-type"] == framework.headers["content-type"]


async def _not_taken() -> bool:
    return False
