"""``rotmem serve`` under load: throughput and latency with N concurrent clients, then crash safety.

python -m benchmarks.memory_service prepare          # preloads --records facts (random vectors)
python -m benchmarks.memory_service load crash       # the timed part (~7 minutes)
python -m benchmarks.memory_service encoder --device cuda   # the encoder's curve alone
python -m benchmarks.memory_service contention --reps 9     # the encoder beside work on the other core
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.memory_service (from the checkout's root)")

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from benchmarks.memory_common import p, parse, unit_vectors
from benchmarks.runner import ROOT, Benchmark, Row, command_line, commit_of, save, subplots, write_csv

RELATIONS = ("lives in", "works as", "works for", "drinks", "likes", "owns", "plays", "studies")
PERSONAS, PER_SESSION = 2000, 10
NAMESPACE, CRASH_NAMESPACE = "load", "crash"
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
RETRIEVERS = ("best", "temporal")  # rotmem serve --retriever: BestMemory (the default), or TemporalMemory
JSON = "application/json"
MIXED = 0.1  # the share of adds among the requests of the mixed load levels
NEAR_LARGEST, NEAR_REPS = 32, 5  # the encoder timed alone just before and after a level (module docs)
ENCODER_THREADS = 1  # the server's --encoder-threads: the 2 cores run the server, the encoder and the clients


def question(rng: random.Random) -> str:
    """A new search question, as the clients ask them."""
    persona, relation = rng.randrange(PERSONAS), rng.choice(RELATIONS)
    return f"What does persona{persona} {relation.split()[0]} now, question {rng.randrange(10**9)}?"


def new_fact(rng: random.Random) -> dict:
    """A new fact, as the clients add them (one per session) and as the encoder's curve times them: the
    same words, so the same token count (an object holding the session id was twice as long as the
    curve's, and each fact padded the questions batched with it)."""
    subject, relation = f"persona{rng.randrange(PERSONAS)}", rng.choice(RELATIONS)
    return {"subject": subject, "relation": relation, "object": f"new{rng.randrange(10**9)}"}


class EncoderTimer:
    """The service's encoder (``rotmem serve``'s class, device and threads) timed alone on new
    questions and new facts, as the clients send them (benchmarks/README.md)."""

    def __init__(self, device: str):
        import torch

        from rotmem.memory import SentenceEncoder
        from rotmem.memory.tem.store import fact_text

        torch.set_num_threads(ENCODER_THREADS)
        self.encoder = SentenceEncoder(device=device)
        rng = random.Random(1)
        self.makers = {"question": lambda: question(rng), "fact": lambda: fact_text(*new_fact(rng).values())}
        self.encoder.encode([self.makers["question"]() for _ in range(64)])  # loads the model, warms it

    def curve(self, texts: Sequence[str], sizes: Sequence[int], reps: int) -> list[Row]:
        """Rows ``encoder``: sentences/s at each of ``sizes`` on each kind of ``texts``, the median of
        ``reps`` rounds over every size (``runner.interleaved``: a drift in load hits all alike)."""
        from benchmarks.runner import interleaved

        def timer(make: Callable[[], str], size: int) -> Callable[[], float]:
            def ms() -> float:
                batch = [make() for _ in range(size)]
                start = time.perf_counter()
                self.encoder.encode(batch)
                return (time.perf_counter() - start) * 1e3

            return ms

        timers = {(kind, size): timer(self.makers[kind], size) for kind in texts for size in sizes}
        return [
            {
                "row": "encoder",
                "device": self.encoder.device,
                "texts": kind,
                "batch_size": size,
                "reps": reps,
                "sentences_per_s": round(size * 1e3 / float(np.median(ms)), 1),
            }
            for (kind, size), ms in interleaved(timers, reps).items()
        ]


def encoder_curve(args, timer: EncoderTimer) -> list[Row]:
    """The encoder's curve before the load: every ``--batch-sizes`` on questions and facts."""
    return timer.curve(("question", "fact"), args.batch_sizes, args.reps)


def encoder_bound(curve: Sequence[Row], texts: str, batch: float) -> float:
    """The encoder's sentences/s on ``texts`` at mean batch size ``batch`` (linear in log2 of the
    batch size between measured sizes, the end value beyond them)."""
    points = sorted((r["batch_size"], r["sentences_per_s"]) for r in curve if r["texts"] == texts)
    sizes, rates = zip(*points, strict=True)
    return float(np.interp(np.log2(max(batch, 1.0)), np.log2(sizes), rates))


def targets(load: list[Row], clients: int) -> list[Row]:
    """The rows ``target`` of one backend's load rows at ``clients`` (benchmarks/README.md)."""
    level = {share: r for r in load if r["clients"] == clients for share in [r["adds_share"]]}
    mixed, searching, adding = level[MIXED], level.get(0.0), level.get(1.0)
    checks = [("search p99 vs p50", mixed, mixed["search_p99_ms"], None, 3.0, "<=")]
    if searching is not None:
        rate, name = searching["searches_per_s"], "search-only searches/s vs encoder questions/s"
        checks.append((name, searching, rate, "question", 0.8, ">="))
        checks.append(("search-only p99 vs p50", searching, searching["search_p99_ms"], None, 3.0, "<="))
    if adding is not None:
        checks.append(
            ("add-only facts/s vs encoder facts/s", adding, adding["adds_per_s"], "fact", 0.8, ">=")
        )
    rows = []
    for name, level, measured, texts, needed, sense in checks:
        bound = level["search_p50_ms"] if texts is None else level["encoder_bound_per_s"]
        ratio = measured / bound if bound else float("nan")
        rows.append({"row": "target", "backend": mixed["backend"], "encoder": mixed["encoder"],
                     "retriever": mixed["retriever"], "encoder_max_batch": mixed.get("encoder_max_batch"),
                     "encoder_cpus": mixed.get("encoder_cpus"),
                     "records": mixed["records"], "clients": clients, "adds_share": level["adds_share"],
                     "mean_batch": level["mean_batch"],
                     "target": name, "measured": measured, "bound": round(bound, 1), "ratio": round(ratio, 3),
                     "needed": f"{sense} {needed}",
                     "passed": bool(ratio >= needed if sense == ">=" else ratio <= needed)})  # fmt: skip
    return rows


def fresh(store: str, backend: str, namespace: str) -> str:
    """The location of an empty ``namespace`` in ``store`` (its SQLite file, or the Postgres DSN)."""
    if backend == "postgres":
        from rotmem.memory.storage.postgres import drop_namespace

        drop_namespace(store, namespace)
        return store
    Path(store).mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}/{namespace}.db{suffix}").unlink(missing_ok=True)
    return f"{store}/{namespace}.db"


def stores(args) -> Iterator[tuple[str, str]]:
    """``(backend, store)`` for each of ``--backends``: a folder of SQLite files, or the DSN of a Postgres
    server from Debian's binaries (fsync on) running in ``--work`` while the caller uses it."""
    for backend in args.backends:
        if backend != "postgres":
            yield backend, str(Path(args.work) / "sqlite")
            continue
        from tests.postgres_server import postgres_bin, start_server, stop_server

        if (binaries := postgres_bin()) is None:
            raise SystemExit("no Postgres binaries: apt-get install postgresql")
        folder = Path(args.work) / "postgres"
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o755)
        dsn = start_server(folder, binaries, fsync=True)  # an earlier prepare's starts again
        try:
            yield backend, dsn
        finally:
            stop_server(folder, binaries)


def run_prepare(args) -> None:
    """Phase ``prepare``: ``--records`` facts in sessions of ``PER_SESSION`` into each backend's
    namespace ``load``, their vectors random (README)."""
    from rotmem.memory import CachedEncoder, SentenceEncoder, TemporalMemory
    from rotmem.memory.tem.store import fact_text

    rng = random.Random(0)
    rows = [
        (f"persona{rng.randrange(PERSONAS)}", rng.choice(RELATIONS), f"value{i}") for i in range(args.records)
    ]
    vectors = unit_vectors(np.random.default_rng(0), len(rows), 384)  # MiniLM's width (README)
    sessions = [dict(session_id=f"p{s}", facts=rows[s * PER_SESSION : (s + 1) * PER_SESSION],
                     date=18000 + s // 50, turns=()) for s in range(len(rows) // PER_SESSION)]  # fmt: skip
    for backend, store in stores(args):
        encoder = CachedEncoder(SentenceEncoder())  # the preload's vectors under MiniLM's name (README)
        encoder.put([fact_text(*row) for row in rows], vectors)
        options = {"namespace": NAMESPACE} if backend == "postgres" else {"synchronous": "OFF"}
        start = time.perf_counter()
        with TemporalMemory(fresh(store, backend, NAMESPACE), encoder=encoder, **options) as memory:
            for first in range(0, len(sessions), 1000):
                memory.add_sessions(sessions[first : first + 1000])
        print(f"{backend} preload: {time.perf_counter() - start:.1f} s", flush=True)


# --- the server and its clients ------------------------------------------------------------------
@contextlib.contextmanager
def clients_beside_the_server(encoder_cpus: str | None) -> Iterator[None]:
    """With ``encoder_cpus`` (the server's ``--encoder-cpus``), this process (the clients) on the
    server's CPUs while the block runs, leaving the encoder's to the encoder; else nothing."""
    if encoder_cpus is None:
        yield
        return
    from rotmem.server.cpus import parse_cpu_list, pin_process, split_cpus

    saved = os.sched_getaffinity(0)
    pin_process(split_cpus(parse_cpu_list(encoder_cpus)))
    try:
        yield
    finally:
        pin_process(saved)


class Server:
    """``rotmem serve`` in a subprocess, one key per namespace."""

    def __init__(
        self,
        store: str,
        keys: Path,
        log: Path,
        device: str = "auto",
        retriever: str = "best",
        encoder_batch: int | None = None,
        encoder_cpus: str | None = None,
    ):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url, self.log = f"http://127.0.0.1:{port}", log
        command = [sys.executable, "-m", "rotmem.cli", "serve", "--store", store, "--keys", str(keys),
                   "--port", str(port), "--encoder", "minilm", "--encoder-threads", str(ENCODER_THREADS),
                   "--device", device, "--retriever", retriever]  # fmt: skip
        if encoder_batch is not None:
            command += ["--encoder-batch", str(encoder_batch)]
        if encoder_cpus is not None:
            command += ["--encoder-cpus", encoder_cpus]
        with log.open("a") as stderr:
            self.process = subprocess.Popen(
                command, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, stderr=stderr
            )

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

    def metrics(self) -> dict[str, float]:
        """The server's ``GET /metrics`` values of unlabelled series, by name."""
        import httpx

        text = httpx.get(f"{self.url}/metrics", timeout=30).text
        pairs = (line.split() for line in text.splitlines() if line.startswith("rotmem_") and "{" not in line)
        return {name: float(value) for name, value in pairs}

    def batches(self) -> tuple[float, float]:
        """The server's encoder calls so far and the texts they held (``GET /metrics``)."""
        values = self.metrics()
        return values["rotmem_encoder_batch_size_count"], values["rotmem_encoder_batch_size_sum"]

    def cpu(self) -> tuple[float, float]:
        """CPU seconds used so far by the server and by its child processes (the encoder's worker)."""
        tasks = Path(f"/proc/{self.process.pid}/task")
        files = [task / "children" for task in tasks.iterdir()] if tasks.is_dir() else []
        children = [int(pid) for file in files if file.is_file() for pid in file.read_text().split()]
        return cpu_seconds(self.process.pid), sum(cpu_seconds(pid) for pid in children)

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


class KeepAlive:
    """One client's keep-alive HTTP/1.1 connection, written on asyncio's streams: a request costs the
    shared machine about a tenth of httpx's CPU, which the server and its encoder then have
    (docs/memory.md). ``post`` returns the status; after an error the next call connects again."""

    def __init__(self, url: str, token: str):
        self.host, port = url.removeprefix("http://").split(":")
        self.port = int(port)
        self.head = f"Host: {self.host}\r\nAuthorization: Bearer {token}\r\nContent-Type: {JSON}\r\n"
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: dict, timeout: float = 60) -> int:
        try:
            async with asyncio.timeout(timeout):
                if self.writer is None:
                    self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
                data = json.dumps(body).encode()
                request = f"POST {path} HTTP/1.1\r\n{self.head}Content-Length: {len(data)}\r\n\r\n"
                self.writer.write(request.encode() + data)
                head = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
                length = head.partition("content-length:")[2].partition("\r\n")[0]
                if not length.strip():
                    raise ConnectionError(f"no Content-Length in the response to {path}")
                await self.reader.readexactly(int(length))
                return int(head[9:12])
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def client_loop(client: KeepAlive, stop_at: float, rng: random.Random, seq: list[int], out: dict,
                      prefix: str, adds: float) -> None:  # fmt: skip
    while time.perf_counter() < stop_at:
        if rng.random() < adds:
            seq[0] += 1
            sid = f"{prefix}{seq[0]}"
            kind, path = "add", "/v1/sessions"
            body = {"session_id": sid, "date": "2024-06-01", "facts": [new_fact(rng)]}
        else:
            kind, path, body = "search", "/v1/search", {"question": question(rng), "k": 15}
        start = time.perf_counter()
        try:
            status = await client.post(path, body)
        except Exception:  # the server was killed: not acknowledged
            out["errors"] += 1
            await asyncio.sleep(0.05)
            continue
        if status == 200:
            out[kind].append(time.perf_counter() - start)
            if kind == "add":
                out["acknowledged"].append((sid, body["facts"][0]["object"]))
        else:
            out["errors"] += 1


async def run_clients(
    url: str, token: str, clients: int, seconds: float, prefix: str, adds: float = MIXED
) -> dict:
    """``clients`` concurrent loops of requests (90 % searches, ``adds`` of them adds) for ``seconds``,
    each on its own connection: their latencies (s), errors and acknowledged adds."""
    out = {"search": [], "add": [], "errors": 0, "acknowledged": []}
    connections = [KeepAlive(url, token) for _ in range(clients)]
    stop_at, seq = time.perf_counter() + seconds, [0]
    loops = [client_loop(connection, stop_at, random.Random(i), seq, out, f"{prefix}c{i}-", adds)
             for i, connection in enumerate(connections)]  # fmt: skip
    try:
        await asyncio.gather(*loops)
    finally:
        for connection in connections:
            connection.close()
    return out


def cpu_seconds(pid: int) -> float:
    """The CPU seconds (user + system) process ``pid`` has used (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_load(
    args,
    store: str,
    backend: str,
    keys: Path,
    tokens: dict,
    timer: EncoderTimer,
    curve: list[Row],
    retriever: str,
    encoder_batch: int | None,
    encoder_cpus: str | None,
) -> list[Row]:
    log = keys.parent / f"serve-{backend}.log"
    server = Server(store, keys, log, args.device, retriever, encoder_batch, encoder_cpus)
    run = f"r{time.time_ns()}"  # session ids never repeat those of an earlier run on the same file
    at = 16 if 16 in args.clients else max(args.clients)  # the client count the targets are checked at
    near_sizes = [size for size in args.batch_sizes if size <= NEAR_LARGEST] or [min(args.batch_sizes)]
    near_reps = min(args.reps, NEAR_REPS)
    rows = []
    try:
        server.wait_ready()
        max_batch = int(server.metrics()["rotmem_encoder_max_batch"])
        asyncio.run(run_clients(server.url, tokens[NAMESPACE], 4, 5.0, f"{backend}-{run}-warm-"))  # warm
        for clients, adds in [(clients, MIXED) for clients in args.clients] + [(at, 0.0), (at, 1.0)]:
            asked = "fact" if adds >= 1 else "question"  # what the level's encoder calls mostly hold
            alone = [timer.curve([asked], near_sizes, near_reps)] if clients == at else []
            calls, texts = server.batches()
            prefix = f"{backend}-{run}-n{clients}-{adds}-"
            cpu_before = (*server.cpu(), time.process_time())  # server, encoder worker, clients
            with clients_beside_the_server(encoder_cpus):
                out = asyncio.run(
                    run_clients(server.url, tokens[NAMESPACE], clients, args.seconds, prefix, adds)
                )
            cpu_used = np.subtract((*server.cpu(), time.process_time()), cpu_before)
            calls_after, texts_after = server.batches()
            alone += [timer.curve([asked], near_sizes, near_reps)] if clients == at else []
            mean_batch = (texts_after - texts) / max(calls_after - calls, 1)
            near = [encoder_bound(rates, asked, mean_batch) for rates in alone]  # before, after
            bound = float(np.mean(near)) if near else encoder_bound(curve, asked, mean_batch)
            ms = {kind: np.asarray(out[kind]) * 1000 for kind in ("search", "add")}
            rows.append({
                "row": "load", "backend": backend, "encoder": "process", "retriever": retriever,
                "records": args.records,
                "clients": clients, "adds_share": adds, "seconds": args.seconds,
                "searches": len(out["search"]), "adds": len(out["add"]), "errors": out["errors"],
                "searches_per_s": round(len(out["search"]) / args.seconds, 1),
                "adds_per_s": round(len(out["add"]) / args.seconds, 1),
                **{f"{k}_p{q}_ms": round(p(ms[k], q), 1) for k in ("search", "add") for q in (50, 95, 99)},
                "encoder_max_batch": max_batch, "encoder_cpus": encoder_cpus,
                "encoder_calls": int(calls_after - calls),
                "mean_batch": round(mean_batch, 2),
                "encoder_curve_bound_per_s": round(encoder_bound(curve, asked, mean_batch), 1),
                "encoder_before_per_s": round(near[0], 1) if near else None,
                "encoder_after_per_s": round(near[1], 1) if near else None,
                "encoder_bound_per_s": round(bound, 1),
                "server_cpu_cores": round(cpu_used[0] / args.seconds, 2),
                "worker_cpu_cores": round(cpu_used[1] / args.seconds, 2),
                "clients_cpu_cores": round(cpu_used[2] / args.seconds, 2),
            })  # fmt: skip
            print(rows[-1], flush=True)
    finally:
        server.stop()
    return rows + targets(rows, at)


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


def crash(args) -> Iterator[Row]:
    """Phase ``crash`` on each backend (README): ``--cycles`` times 16 clients and a SIGKILL, then what
    a reader finds of the sessions acknowledged so far."""
    keys, tokens = make_keys(Path(args.work))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for backend, store in stores(args):
        location = fresh(store, backend, CRASH_NAMESPACE)
        reader = [sys.executable, "-c", READER, location, CRASH_NAMESPACE]
        acknowledged: list[tuple[str, str]] = []
        for cycle in range(1, args.cycles + 1):
            server = Server(store, keys, keys.parent / f"serve-{backend}-crash.log")
            server.wait_ready()
            kill = load_then_kill(server, tokens[CRASH_NAMESPACE], args.kill_after, f"{backend}-k{cycle}-")
            acknowledged += asyncio.run(kill)["acknowledged"]
            seen = subprocess.run(reader, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
            if seen.returncode != 0:
                raise SystemExit(f"the reader failed: {seen.stderr[-2000:]}")
            state = json.loads(seen.stdout)
            found = [sid for sid, obj in acknowledged if obj in state["objects"].get(sid, [])]
            yield {"backend": backend, "cycle": cycle, "acknowledged": len(acknowledged),
                   "found": len(found), "missing": len(acknowledged) - len(found),
                   "half_written": len(state["sessions"]) - len(state["whole"]) + len(state["untimed"]),
                   "sessions_on_disk": len(state["sessions"])}  # fmt: skip


def _spin(stop) -> None:
    """Integer work on one core until ``stop`` is set."""
    count = 0
    while not stop.is_set():
        for _ in range(100_000):
            count += 1


def _stream(stop) -> None:
    """Reads of a 150 MB array (more than the last-level cache) until ``stop`` is set."""
    values = np.ones(150_000_000 // 4, np.float32)
    while not stop.is_set():
        values.sum()


def contention(args) -> Iterator[Row]:
    """Phase ``contention``: the encoder alone on one core (questions at batch 8), with the other
    core idle, running a busy loop, or reading a 150 MB array; ``--reps`` rounds, the three in turn
    (Linux: the cores are pinned with ``sched_setaffinity``)."""
    import multiprocessing

    os.sched_setaffinity(0, {0})
    timer = EncoderTimer(args.device)
    rates: dict[str, list[float]] = {"idle": [], "busy loop": [], "memory stream": []}
    for _ in range(args.reps):
        for beside, work in (("idle", None), ("busy loop", _spin), ("memory stream", _stream)):
            stop = multiprocessing.Event()
            other = None if work is None else multiprocessing.Process(target=work, args=(stop,))
            if other is not None:
                other.start()
                os.sched_setaffinity(other.pid, {1})
                time.sleep(0.5)
            rates[beside].append(timer.curve(["question"], [8], 8)[0]["sentences_per_s"])
            stop.set()
            if other is not None:
                other.join()
    for beside, values in rates.items():
        yield {"row": "contention", "device": timer.encoder.device, "texts": "question", "batch_size": 8,
               "reps": args.reps, "other_core": beside, "sentences_per_s": round(float(np.median(values)), 1),
               "vs_idle": round(float(np.median(values) / np.median(rates["idle"])), 3)}  # fmt: skip


def measure(args: argparse.Namespace) -> Iterator[Row]:
    """The encoder's curve, then (phase ``load``) every backend's load levels and targets."""
    timer = EncoderTimer(args.device)
    curve = encoder_curve(args, timer)
    yield from curve
    if "load" in args.phases:
        keys, tokens = make_keys(Path(args.work))
        for backend, store in stores(args):
            for retriever in args.retrievers:
                for server in itertools.product(args.encoder_batch, args.encoder_cpus):
                    yield from run_load(args, store, backend, keys, tokens, timer, curve, retriever, *server)


def plot(rows: list[Row], path: Path) -> None:
    rows = [r for r in rows if r["row"] == "load" and r["adds_share"] == MIXED]
    if not rows:
        return
    fig, (left, right) = subplots(1, 2, figsize=(10, 4))
    keys = ("backend", "encoder", "retriever", "encoder_max_batch", "encoder_cpus")
    for setup in sorted({tuple(str(r[key]) for key in keys) for r in rows}):
        mine = [r for r in rows if tuple(str(r[key]) for key in keys) == setup]
        server = "/".join(setup[:3]) + f" (batch <= {setup[3]}, encoder CPUs {setup[4]})"
        n = [r["clients"] for r in mine]
        left.plot(n, [r["searches_per_s"] for r in mine], "o-", label=server)
        bound = [0.8 * r["encoder_bound_per_s"] for r in mine]
        left.plot(n, bound, "x:", label=f"{server}: 0.8 x encoder alone")
        right.plot(n, [r["search_p99_ms"] for r in mine], "o-", label=f"{server} p99")
        right.plot(n, [r["search_p50_ms"] for r in mine], "x--", label=f"{server} p50")
    for axis, label in ((left, "searches/s"), (right, "search latency, ms (MiniLM embedding included)")):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("concurrent clients (90 % search, 10 % add)")
        axis.set_ylabel(label)
        axis.legend(fontsize=7)
    fig.suptitle(f"rotmem serve, {rows[0]['records']} records, 2-core CPU, server and clients on one machine")
    save(fig, path)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("phases", nargs="+", choices=("prepare", "encoder", "load", "crash", "contention"))
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--seconds", type=float, default=15.0, help="load time per client count")
    parser.add_argument("--cycles", type=int, default=5, help="kill-and-restart cycles")
    parser.add_argument("--kill-after", type=float, default=4.0, help="seconds of load before SIGKILL")
    parser.add_argument(
        "--backends", nargs="+", default=["sqlite", "postgres"], choices=("sqlite", "postgres")
    )
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "rotmem-memory-service"))
    parser.add_argument("--device", default="auto", help="the encoder's device: auto, cpu, cuda")
    parser.add_argument(
        "--retrievers", nargs="+", default=list(RETRIEVERS), choices=RETRIEVERS,
        help="rotmem serve --retriever: best (BestMemory, its default) and/or temporal (TemporalMemory)",
    )  # fmt: skip
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=list(BATCH_SIZES), help="encoder curve")
    parser.add_argument(
        "--encoder-batch",
        type=int,
        nargs="+",
        default=[None],
        help="rotmem serve --encoder-batch: a server and its load levels per value (default: the server's)",
    )
    parser.add_argument(
        "--encoder-cpus",
        nargs="+",
        type=lambda text: None if text == "none" else text,
        default=[None],
        help="rotmem serve --encoder-cpus (none: not given): a server and its load levels per value; with "
        "one, the clients run on the server's CPUs",
    )
    parser.add_argument("--reps", type=int, default=15, help="rounds over the sizes (medians kept)")


SPEC = Benchmark(
    "memory_service", __doc__, measure, add_arguments, plot=plot, csv_name="memory_service/memory_service"
)


def main(argv: list[str] | None = None) -> int:
    """The phases in order; ``--out``: ``memory_service.csv`` (or its folder), the crash table beside it."""
    args = parse(SPEC, argv)
    command = command_line(SPEC.name, argv)
    Path(args.work).mkdir(parents=True, exist_ok=True)
    if "prepare" in args.phases:
        run_prepare(args)
    if {"encoder", "load"} & set(args.phases):
        SPEC.run(args, command)
    if "contention" in args.phases:
        rows = list(contention(args))
        print(*rows, sep="\n")
        write_csv(args.out.with_name("memory_service_contention.csv"), rows, command, commit_of())
    if "crash" in args.phases:
        rows = list(crash(args))
        print(*rows, sep="\n")
        write_csv(args.out.with_name("memory_service_crash.csv"), rows, command, commit_of())
    return 0


if __name__ == "__main__":
    sys.exit(main())
