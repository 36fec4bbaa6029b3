"""TEMStore at scale: ingestion rate and retrieval latency with N stored records.

Embedding is excluded from both: fact vectors are precomputed (random unit vectors of the MiniLM
width, 384, looked up by text), so ingestion times the store's write path (validation, the text
check, SQLite rows, status recomputation, index add) and retrieval times ``retrieve_vector`` (index
search, SQLite fetch of the top k, records in source order). The embedding of one question by
all-MiniLM-L6-v2 is timed on its own. Writes ``benchmarks/results/memory_scale.csv`` (``--out``), each
row with the command.

    python -m benchmarks.memory_scale                      # 100,000 records
    python -m benchmarks.memory_scale --records 20000 --queries 50 --no-minilm   # quick
"""

from __future__ import annotations

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.memory_scale (from the checkout's root)")

import argparse
import csv
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rotmem.index import faiss_available
from rotmem.memory import Session, TEMStore

RELATIONS = ("lives in", "works as", "works for", "drinks", "likes", "owns", "moved to", "plays")
FIELDS = ("metric", "index", "threads", "records", "value", "unit", "note")


class LookupEncoder:
    """Precomputed unit vectors by text: embedding costs one dict lookup per text."""

    name = "precomputed"

    def __init__(self, dim: int):
        self.dim, self.table = dim, {}

    def add(self, texts: list[str], rng: np.random.Generator) -> None:
        vectors = rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        self.table.update(zip(texts, vectors, strict=True))

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts])


def make_sessions(records: int, per_session: int, rng: np.random.Generator) -> list[Session]:
    """``records`` facts in sessions of ``per_session``; each object occurs in the session text."""
    sessions, personas = [], max(1, records // 200)
    for s in range(records // per_session):
        facts = [
            (f"persona{rng.integers(personas)}", str(rng.choice(RELATIONS)), f"value{s}x{i}")
            for i in range(per_session)
        ]
        text = " ".join(f"I {rel} {obj}." for _, rel, obj in facts)
        sessions.append(Session(f"s{s}", facts, text=text, turns=()))
    return sessions


def load() -> str:
    """The machine's 1-minute load average (this CPU is shared: read latencies beside it)."""
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


def time_retrieval(store: TEMStore, queries: np.ndarray, k: int) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU milliseconds (all threads of this process) per ``retrieve_vector``.

    On a shared machine the wall clock includes waiting for a core; the CPU time is the work.
    """
    store.retrieve_vector(queries[0], k)  # warm-up
    wall, cpu = [], []
    for q in queries:
        start, start_cpu = time.perf_counter(), time.process_time()
        store.retrieve_vector(q, k)
        wall.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.process_time() - start_cpu) * 1e3)
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--per-session", type=int, default=10, help="facts per session")
    p.add_argument("--batch-sessions", type=int, default=500, help="sessions per add_sessions call")
    p.add_argument("--single-sessions", type=int, default=300, help="sessions timed one add_session each")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("-k", type=int, default=15)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--no-minilm", action="store_true", help="skip timing the MiniLM question embedding")
    p.add_argument("--out", default="benchmarks/results/memory_scale.csv")
    args = p.parse_args(argv)
    command = shlex.join(
        ["python", "-m", "benchmarks.memory_scale", *(sys.argv[1:] if argv is None else argv)]
    )
    print("command:", command)

    rng = np.random.default_rng(0)
    sessions = make_sessions(args.records, args.per_session, rng)
    encoder = LookupEncoder(args.dim)
    encoder.add([f"{s} {r} {o}" for session in sessions for s, r, o in session.facts], rng)
    rows: list[dict] = []

    def row(metric: str, value: float, unit: str, index: str = "", threads: str = "", note: str = "") -> None:
        values = (metric, index, threads, args.records, round(value, 4), unit, note)
        rows.append(dict(zip(FIELDS, values, strict=True)))
        print(f"{metric:34s} {index:6s} {threads:8s} {value:12.2f} {unit:10s} {note}")

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "scale.db")
        with TEMStore(path, encoder=encoder) as store:
            start = time.perf_counter()
            for b in range(0, len(sessions), args.batch_sessions):
                store.add_sessions(sessions[b : b + args.batch_sessions])
            seconds = time.perf_counter() - start
            n = len(store)
        note = f"add_sessions of {args.batch_sessions} sessions; {load()}"
        row("ingest_batch_facts_per_s", n / seconds, "facts/s", note=note)

        single = make_sessions(args.single_sessions * args.per_session, args.per_session, rng)
        encoder.add([f"{s} {r} {o}" for session in single for s, r, o in session.facts], rng)
        for sync in ("FULL", "NORMAL"):
            with TEMStore(str(Path(tmp) / f"single-{sync}.db"), encoder=encoder, synchronous=sync) as store:
                start = time.perf_counter()
                for session in single:
                    store.add_session(session.session_id, session.facts, session.text, turns=())
                seconds = time.perf_counter() - start
                n = len(store)
            note = f"one add_session per session; synchronous={sync}; {load()}"
            row("ingest_per_session_facts_per_s", n / seconds, "facts/s", note=note)

        start = time.perf_counter()
        store = TEMStore(path, encoder=encoder)
        row(
            "reopen_rebuild_index_s",
            time.perf_counter() - start,
            "s",
            note=f"{len(store)} vectors from SQLite",
        )
        store.close()

        queries = rng.standard_normal((args.queries, args.dim)).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        setups = [("torch", {})]
        if faiss_available():
            setups = [("faiss", {}), ("faiss", {"small_batch_threads": None}), *setups]
        for backend, options in setups:
            with TEMStore(path, encoder=encoder, index_backend=backend, index_options=options) as store:
                wall, cpu = time_retrieval(store, queries, args.k)
            threads = "" if backend == "torch" else ("openmp" if options else "1")
            note = f"k={args.k}, embedding excluded; {load()}"
            for clock, samples in (("", wall), ("_cpu", cpu)):
                p50, p95 = percentiles(samples)
                row(f"retrieve{clock}_p50_ms", p50, "ms", backend, threads, note)
                row(f"retrieve{clock}_p95_ms", p95, "ms", backend, threads, note)

    if not args.no_minilm:
        from rotmem.memory import SentenceEncoder

        minilm = SentenceEncoder()
        minilm.encode(["warm-up question"])
        wall, cpu = [], []
        for i in range(30):
            start, start_cpu = time.perf_counter(), time.process_time()
            minilm.encode([f"Where does persona{i} live now?"])
            wall.append((time.perf_counter() - start) * 1e3)
            cpu.append((time.process_time() - start_cpu) * 1e3)
        note = f"all-MiniLM-L6-v2, one question, CPU; {load()}"
        for clock, samples in (("", wall), ("_cpu", cpu)):
            p50, p95 = percentiles(samples)
            row(f"question_embedding{clock}_p50_ms", p50, "ms", note=note)
            row(f"question_embedding{clock}_p95_ms", p95, "ms", note=note)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*FIELDS, "command"])
        writer.writeheader()
        writer.writerows({**r, "command": command} for r in rows)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
