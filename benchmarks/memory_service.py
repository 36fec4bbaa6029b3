"""``rotmem serve`` under load: throughput and latency with N concurrent clients, then crash safety.

1. ``prepare``: 100,000 records (2,000 personas x 8 relations, sessions of 10 facts) preloaded by
   bulk batches into a SQLite file and into a Postgres namespace (a real server started from
   Debian's binaries, fsync on). ``--vectors random`` (default): the preloaded facts get random
   unit vectors of MiniLM's width (384) under MiniLM's encoder name, because embedding 100k facts
   with MiniLM on 2 cores takes minutes at best (305 sentences/s on quiet cores, hours under load);
   the search cost (index, fetch, re-rank) does not depend on the values, the retrieval
   quality does and is not measured here. ``--vectors minilm``: real MiniLM vectors, computed once
   and cached in ``--cache`` (.npy). Questions and new facts are always embedded by MiniLM.
2. ``load``: for each backend, ``rotmem serve`` on 127.0.0.1 (a subprocess, the MiniLM encoder),
   then N = 1, 4, 16, 64 concurrent clients (asyncio + httpx, another process) for ``--seconds``
   each, 90 % searches (a new question each time, k = 15; the question's embedding by MiniLM is
   inside the timed request) and 10 % adds (one session, one fact). Per N: searches/s, adds/s,
   p50/p95/p99 latency -> ``memory_service.csv``, ``memory_service.png``.
3. ``crash``: 5 cycles of: 16 clients adding (and searching) in a fresh namespace, the server
   killed with SIGKILL after ``--kill-after`` s, restarted; then a reader in another process opens
   the store read-only and checks that every add the server acknowledged is there, each session
   whole (its one fact, its times, its date) -> ``memory_service_crash.csv``.

    python -m benchmarks.memory_service prepare          # embeds once (--vectors minilm), preloads
    python -m benchmarks.memory_service load crash       # the timed part (~6 minutes)

The machine's 2 cores run the server, its encoder and the clients together.
"""

from __future__ import annotations

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.memory_service (from the checkout's root)")

import argparse
import asyncio
import csv
import hashlib
import json
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "memory_service"
RELATIONS = ("lives in", "works as", "works for", "drinks", "likes", "owns", "plays", "studies")
PERSONAS, PER_SESSION = 2000, 10
NAMESPACE, CRASH_NAMESPACE = "load", "crash"
LOAD_FIELDS = (
    "backend", "records", "clients", "seconds", "searches", "adds", "errors", "searches_per_s", "adds_per_s",
    "search_p50_ms", "search_p95_ms", "search_p99_ms", "add_p50_ms", "add_p95_ms", "add_p99_ms",
)  # fmt: skip
CRASH_FIELDS = ("backend", "cycle", "acknowledged", "found", "missing", "half_written", "sessions_on_disk")


def fact_rows(records: int) -> list[tuple[str, str, str]]:
    rng = random.Random(0)
    return [(f"persona{rng.randrange(PERSONAS)}", rng.choice(RELATIONS), f"value{i}") for i in range(records)]


def fact_texts(rows: list[tuple[str, str, str]]) -> list[str]:
    from rotmem.memory.tem_store import fact_text

    return [fact_text(*row) for row in rows]


class CachedEncoder:
    """The MiniLM vectors of the preload texts, looked up (same ``name`` as the real encoder)."""

    def __init__(self, name: str, table: dict[str, np.ndarray]):
        self.name, self.table = name, table

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts])


def random_vectors(texts: list[str]) -> tuple[np.ndarray, str, float]:
    """Random unit vectors of MiniLM's width, stored under MiniLM's encoder name (module docs)."""
    from rotmem.memory.encoder import DEFAULT_MODEL

    vectors = np.random.default_rng(0).standard_normal((len(texts), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors, f"sentence-transformers:{DEFAULT_MODEL}", 0.0


def embed_once(texts: list[str], cache: Path) -> tuple[np.ndarray, str, float]:
    """MiniLM vectors of ``texts`` from ``cache`` or computed (and cached); returns seconds spent."""
    from rotmem.memory import SentenceEncoder

    encoder = SentenceEncoder()
    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    file = cache / f"minilm-{len(texts)}-{key}.npy"
    if file.exists():
        return np.load(file), encoder.name, 0.0
    start = time.perf_counter()
    vectors = encoder.encode(texts)
    seconds = time.perf_counter() - start
    cache.mkdir(parents=True, exist_ok=True)
    np.save(file, vectors)
    return vectors, encoder.name, seconds


def preload(location: str, namespace: str | None, rows, vectors, encoder_name: str) -> float:
    from rotmem.memory import TemporalMemory

    texts = fact_texts(rows)
    encoder = CachedEncoder(encoder_name, dict(zip(texts, vectors, strict=True)))
    options = {"namespace": namespace} if namespace else {"synchronous": "OFF"}
    start = time.perf_counter()
    with TemporalMemory(location, encoder=encoder, **options) as memory:
        sessions = [
            dict(
                session_id=f"p{s}",
                facts=rows[s * PER_SESSION : (s + 1) * PER_SESSION],
                date=18000 + s // 50,
                turns=(),
            )
            for s in range(len(rows) // PER_SESSION)
        ]
        for start_batch in range(0, len(sessions), 1000):
            memory.add_sessions(sessions[start_batch : start_batch + 1000])
    return time.perf_counter() - start


def postgres(folder: Path) -> str:
    from tests.postgres_server import postgres_bin, start_server

    binaries = postgres_bin()
    if binaries is None:
        raise SystemExit("no Postgres binaries: apt-get install postgresql")
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o755)
    return start_server(folder, binaries, fsync=True)  # a server from an earlier prepare starts again


def stop_postgres(folder: Path) -> None:
    from tests.postgres_server import postgres_bin, stop_server

    stop_server(folder, postgres_bin())


def run_prepare(args) -> None:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = fact_rows(args.records)
    if args.vectors == "minilm":
        vectors, name, seconds = embed_once(fact_texts(rows), Path(args.cache))
        print(f"embedded {len(rows)} facts with MiniLM in {seconds:.1f} s (0 = cached)", flush=True)
    else:
        vectors, name, seconds = random_vectors(fact_texts(rows))
    if "sqlite" in args.backends:
        sqlite_dir = work / "sqlite"
        sqlite_dir.mkdir(exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{sqlite_dir / NAMESPACE}.db{suffix}").unlink(missing_ok=True)
        seconds = preload(str(sqlite_dir / f"{NAMESPACE}.db"), None, rows, vectors, name)
        print(f"sqlite preload: {seconds:.1f} s", flush=True)
    if "postgres" in args.backends:
        dsn = postgres(work / "postgres")
        try:
            from rotmem.memory.postgres import drop_namespace

            drop_namespace(dsn, NAMESPACE)
            print(f"postgres preload: {preload(dsn, NAMESPACE, rows, vectors, name):.1f} s", flush=True)
        finally:
            stop_postgres(work / "postgres")
    (work / "prepared.json").write_text(json.dumps({"records": args.records, "vectors": args.vectors}))


# --- the server ------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``rotmem serve`` in a subprocess, one key per namespace."""

    def __init__(self, store: str, keys: Path, log: Path):
        self.port, self.log = free_port(), log
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "rotmem.cli", "serve", "--store", store, "--keys", str(keys),
                   "--port", str(self.port), "--encoder", "minilm", "--encoder-threads", "1"]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with log.open("a") as stderr:
            self.process = subprocess.Popen(command, env=env, cwd=REPO, stderr=stderr)

    def wait_ready(self, timeout: float = 300) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"rotmem serve exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise SystemExit("rotmem serve did not become ready")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()


def make_keys(folder: Path) -> tuple[Path, dict[str, str]]:
    from rotmem.server.keys import KeyRing

    ring = KeyRing()
    tokens = {ns: ring.add(ns) for ns in (NAMESPACE, CRASH_NAMESPACE)}
    ring.save(folder / "keys.json")
    return folder / "keys.json", tokens


# --- the clients -----------------------------------------------------------------------------
async def client_loop(
    client, stop_at: float, rng: random.Random, seq: list[int], out: dict, prefix: str
) -> None:
    while time.perf_counter() < stop_at:
        if rng.random() < 0.1:
            seq[0] += 1
            sid = f"{prefix}{seq[0]}"
            new = {
                "subject": f"persona{rng.randrange(PERSONAS)}",
                "relation": rng.choice(RELATIONS),
                "object": f"new{sid}",
            }
            body = {"session_id": sid, "date": "2024-06-01", "facts": [new]}
            kind, start = "add", time.perf_counter()
            try:
                response = await client.post("/v1/sessions", json=body)
            except Exception:  # the server was killed: not acknowledged
                out["errors"] += 1
                await asyncio.sleep(0.05)
                continue
            if response.status_code == 200:
                out["acknowledged"].append((sid, body["facts"][0]["object"]))
        else:
            persona, relation = rng.randrange(PERSONAS), rng.choice(RELATIONS)
            question = (
                f"What does persona{persona} {relation.split()[0]} now, question {rng.randrange(10**9)}?"
            )
            kind, start = "search", time.perf_counter()
            try:
                response = await client.post("/v1/search", json={"question": question, "k": 15})
            except Exception:
                out["errors"] += 1
                await asyncio.sleep(0.05)
                continue
        elapsed = time.perf_counter() - start
        if response.status_code == 200:
            out[kind].append(elapsed)
        else:
            out["errors"] += 1


async def run_clients(url: str, token: str, clients: int, seconds: float, prefix: str) -> dict:
    import httpx

    out = {"search": [], "add": [], "errors": 0, "acknowledged": []}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=60) as client:
        stop_at = time.perf_counter() + seconds
        seq = [0]
        await asyncio.gather(
            *(
                client_loop(client, stop_at, random.Random(i), seq, out, f"{prefix}c{i}-")
                for i in range(clients)
            )
        )
    return out


def percentile_ms(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, q)) if values else float("nan")


def run_load(args, store: str, backend: str, keys: Path, tokens: dict, records: int) -> list[dict]:
    server = Server(store, keys, keys.parent / f"serve-{backend}.log")
    run = f"r{time.time_ns()}"  # session ids never repeat those of an earlier run on the same file
    rows = []
    try:
        server.wait_ready()
        asyncio.run(
            run_clients(server.url, tokens[NAMESPACE], 4, 5.0, f"{backend}-{run}-warm-")
        )  # index built, warm
        for clients in args.clients:
            out = asyncio.run(
                run_clients(
                    server.url, tokens[NAMESPACE], clients, args.seconds, f"{backend}-{run}-n{clients}-"
                )
            )
            row = {
                "backend": backend, "records": records, "clients": clients, "seconds": args.seconds,
                "searches": len(out["search"]), "adds": len(out["add"]), "errors": out["errors"],
                "searches_per_s": round(len(out["search"]) / args.seconds, 1),
                "adds_per_s": round(len(out["add"]) / args.seconds, 1),
                **{f"search_p{q}_ms": round(percentile_ms(out["search"], q), 1) for q in (50, 95, 99)},
                **{f"add_p{q}_ms": round(percentile_ms(out["add"], q), 1) for q in (50, 95, 99)},
            }  # fmt: skip
            print(row, flush=True)
            rows.append(row)
    finally:
        server.stop()
    return rows


READER = """
import json, sys
from rotmem.memory import TemporalMemory
location, namespace = sys.argv[1], sys.argv[2]
options = {"namespace": namespace} if location.startswith("postgresql://") else {}
with TemporalMemory(location, read_only=True, **options) as memory:
    store = memory.store
    objects = {r.session_id: [] for r in store.records()}
    for r in store.records():
        objects[r.session_id].append(r.object)
    timed = {f.record_id for f in memory.facts()}
    dates = memory.session_dates()
    sessions = [s for s, _, _ in store.sessions()]
    whole = [s for s in sessions if len(objects.get(s, [])) == 1 and s in dates]
    untimed = [r.id for r in store.records() if r.id not in timed]
    print(json.dumps({"objects": objects, "sessions": sessions, "whole": whole, "untimed": untimed}))
"""


async def load_then_kill(server: Server, token: str, kill_after: float, prefix: str) -> dict:
    """16 clients on ``server``; SIGKILL after ``kill_after`` s, in the middle of the load."""
    task = asyncio.create_task(run_clients(server.url, token, 16, kill_after + 2, prefix))
    await asyncio.sleep(kill_after)
    server.kill()
    return await task


def run_crash(args, store: str, backend: str, keys: Path, tokens: dict) -> list[dict]:
    from rotmem.memory.postgres import drop_namespace

    location = store if backend == "postgres" else str(Path(store) / f"{CRASH_NAMESPACE}.db")
    if backend == "postgres":
        drop_namespace(store, CRASH_NAMESPACE)
    for suffix in ("", "-wal", "-shm"):
        if backend == "sqlite":
            Path(location + suffix).unlink(missing_ok=True)
    acknowledged: list[tuple[str, str]] = []
    rows = []
    for cycle in range(1, args.cycles + 1):
        server = Server(store, keys, keys.parent / f"serve-{backend}-crash.log")
        server.wait_ready()

        out = asyncio.run(
            load_then_kill(server, tokens[CRASH_NAMESPACE], args.kill_after, f"{backend}-k{cycle}-")
        )
        acknowledged += out["acknowledged"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        seen = subprocess.run([sys.executable, "-c", READER, location, CRASH_NAMESPACE], capture_output=True,
                              text=True, env=env, cwd=REPO, timeout=300)  # fmt: skip
        if seen.returncode != 0:
            raise SystemExit(f"the reader failed: {seen.stderr[-2000:]}")
        state = json.loads(seen.stdout)
        found = [sid for sid, obj in acknowledged if obj in state["objects"].get(sid, [])]
        half = len(state["sessions"]) - len(state["whole"]) + len(state["untimed"])
        row = {"backend": backend, "cycle": cycle, "acknowledged": len(acknowledged), "found": len(found),
               "missing": len(acknowledged) - len(found), "half_written": half,
               "sessions_on_disk": len(state["sessions"])}  # fmt: skip
        print(row, flush=True)
        rows.append(row)
    return rows


def write_csv(path: Path, fields, rows, command: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        f.write(f"# {command}\n")
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for backend in sorted({r["backend"] for r in rows}):
        mine = [r for r in rows if r["backend"] == backend]
        n = [r["clients"] for r in mine]
        left.plot(n, [r["searches_per_s"] for r in mine], "o-", label=backend)
        right.plot(n, [r["search_p99_ms"] for r in mine], "o-", label=f"{backend} p99")
        right.plot(n, [r["search_p50_ms"] for r in mine], "x--", label=f"{backend} p50")
    left.axhline(300, color="grey", ls=":", label="target 300/s at 16")
    right.axhline(50, color="grey", ls=":", label="target p99 50 ms")
    for axis, label in ((left, "searches/s"), (right, "search latency, ms (MiniLM embedding included)")):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("concurrent clients (90 % search, 10 % add)")
        axis.set_ylabel(label)
        axis.legend(fontsize=7)
    fig.suptitle(f"rotmem serve, {rows[0]['records']} records, 2-core CPU, server and clients on one machine")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("phases", nargs="+", choices=("prepare", "load", "crash"))
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--vectors", default="random", choices=("random", "minilm"), help="preloaded vectors")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--seconds", type=float, default=15.0, help="load time per client count")
    parser.add_argument("--cycles", type=int, default=5, help="kill-and-restart cycles")
    parser.add_argument("--kill-after", type=float, default=4.0, help="seconds of load before SIGKILL")
    parser.add_argument(
        "--backends", nargs="+", default=["sqlite", "postgres"], choices=("sqlite", "postgres")
    )
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "rotmem-memory-service"))
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "rotmem-memory-service-cache"))
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder of the CSVs and the PNG")
    args = parser.parse_args()
    command = "python -m benchmarks.memory_service " + shlex.join(sys.argv[1:])
    if "prepare" in args.phases:
        run_prepare(args)
    work = Path(args.work)
    if not {"load", "crash"} & set(args.phases):
        return
    keys, tokens = make_keys(work)
    load_rows, crash_rows = [], []
    for backend in args.backends:
        store = str(work / "sqlite")
        if backend == "postgres":
            store = postgres(work / "postgres")
        try:
            if "load" in args.phases:
                load_rows += run_load(args, store, backend, keys, tokens, args.records)
            if "crash" in args.phases:
                crash_rows += run_crash(args, store, backend, keys, tokens)
        finally:
            if backend == "postgres":
                stop_postgres(work / "postgres")
    if load_rows:
        write_csv(args.out / "memory_service.csv", LOAD_FIELDS, load_rows, command)
        plot(load_rows, args.out / "memory_service.png")
    if crash_rows:
        write_csv(args.out / "memory_service_crash.csv", CRASH_FIELDS, crash_rows, command)


if __name__ == "__main__":
    main()
