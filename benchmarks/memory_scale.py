"""TEMStore at scale: ingestion rate and retrieval latency with N stored records.

python -m benchmarks.memory_scale                      # 100,000 records
python -m benchmarks.memory_scale --records 20000 --queries 50 --no-minilm   # quick
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.memory_scale (from the checkout's root)")

import argparse
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from benchmarks.memory_common import load_average, p, unit_vectors
from benchmarks.memory_common import main as run_main
from benchmarks.runner import Benchmark, Row
from rotmem.index import faiss_available
from rotmem.memory import CachedEncoder, HashingEncoder, SentenceEncoder, Session, TEMStore
from rotmem.memory.retrieval.hybrid import POOL
from rotmem.ops import native

RELATIONS = ("lives in", "works as", "works for", "drinks", "likes", "owns", "moved to", "plays")


def make_sessions(records: int, per_session: int, rng: np.random.Generator, encoder: CachedEncoder):
    """``records`` facts in sessions of ``per_session``; their sentences get random vectors in ``encoder``."""
    sessions, personas = [], max(1, records // 200)
    for s in range(records // per_session):
        facts = [(f"persona{rng.integers(personas)}", str(rng.choice(RELATIONS)), f"value{s}x{i}")
                 for i in range(per_session)]  # fmt: skip
        sessions.append(Session(f"s{s}", facts, text=" ".join(f"I {r} {o}." for _, r, o in facts), turns=()))
    texts = [f"{s} {r} {o}" for session in sessions for s, r, o in session.facts]
    encoder.put(texts, unit_vectors(rng, len(texts), encoder.encoder.dim))
    return sessions


def timed(run, samples: int) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU milliseconds (all threads of this process) of ``run(i)``, ``i < samples``;
    on a shared machine the wall clock includes waiting for a core, the CPU time is the work."""
    wall, cpu = [], []
    for i in range(samples):
        start, start_cpu = time.perf_counter(), time.process_time()
        run(i)
        wall.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.process_time() - start_cpu) * 1e3)
    return wall, cpu


def float32_scan_rows(store: TEMStore, queries: np.ndarray, row) -> Iterator[Row]:
    """``rotmem.ops.native.inner_products`` alone over the store's vectors: the exact float32 scan
    that the index's int8 copy replaces, without even selecting the top k (a lower bound of its cost)."""
    if not native.is_available("cpu"):
        return
    vectors = torch.from_numpy(np.ascontiguousarray(store.fact_vectors()[1], dtype=np.float32))
    for b in (1, 2, 4, 8, 16):
        scan = lambda i, b=b: native.inner_products(vectors, torch.from_numpy(queries[i * b : (i + 1) * b]))
        ms = p(timed(scan, len(queries) // b)[1], 50) / b
        note = f"the float32 scan alone (no top k) for {b} questions at once, CPU per question"
        yield row(f"scan_float32_batch{b}_cpu_p50_ms", ms, "ms", "inner_products", "1", note)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--per-session", type=int, default=10, help="facts per session")
    parser.add_argument("--batch-sessions", type=int, default=500, help="sessions per add_sessions call")
    parser.add_argument("--single-sessions", type=int, default=300, help="sessions timed one at a time")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("-k", type=int, default=15)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--no-minilm", action="store_true", help="skip timing the MiniLM question embedding")


def measure(args: argparse.Namespace) -> Iterator[Row]:
    def row(metric: str, value: float, unit: str, index: str = "", threads: str = "", note: str = "") -> Row:
        return dict(metric=metric, index=index, threads=threads, records=args.records, value=round(value, 4),
                    unit=unit, note=note)  # fmt: skip

    def percentiles(name: str, wall: list, cpu: list, index="", threads="", note="") -> Iterator[Row]:
        for clock, samples in (("", wall), ("_cpu", cpu)):
            for q in (50, 95):
                yield row(f"{name}{clock}_p{q}_ms", p(samples, q), "ms", index, threads, note)

    rng = np.random.default_rng(0)
    encoder = CachedEncoder(HashingEncoder(args.dim))  # serves only the vectors put in it
    sessions = make_sessions(args.records, args.per_session, rng, encoder)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "scale.db")
        with TEMStore(path, encoder=encoder) as store:
            start = time.perf_counter()
            for b in range(0, len(sessions), args.batch_sessions):
                store.add_sessions(sessions[b : b + args.batch_sessions])
            rate = len(store) / (time.perf_counter() - start)
        note = f"add_sessions of {args.batch_sessions} sessions; {load_average()}"
        yield row("ingest_batch_facts_per_s", rate, "facts/s", note=note)
        single = make_sessions(args.single_sessions * args.per_session, args.per_session, rng, encoder)
        for sync in ("FULL", "NORMAL"):
            with TEMStore(str(Path(tmp) / f"single-{sync}.db"), encoder=encoder, synchronous=sync) as store:
                start = time.perf_counter()
                for session in single:
                    store.add_session(session.session_id, session.facts, session.text, turns=())
                rate = len(store) / (time.perf_counter() - start)
            note = f"one add_session per session; synchronous={sync}; {load_average()}"
            yield row("ingest_per_session_facts_per_s", rate, "facts/s", note=note)
        start = time.perf_counter()
        with TEMStore(path, encoder=encoder) as store:
            seconds, n = time.perf_counter() - start, len(store)
        yield row("reopen_rebuild_index_s", seconds, "s", note=f"{n} vectors from SQLite")
        queries = unit_vectors(rng, args.queries, args.dim)
        # (backend, its options, its label): FAISS's own paths, rotmem's scan of small batches, torch
        faiss = [
            ("faiss", {"native_scan": False}, "1"),
            ("faiss", {}, "1, scan"),
            ("faiss", {"small_batch_threads": None, "native_scan": False}, "openmp"),
        ]
        for backend, options, threads in [*(faiss if faiss_available() else []), ("torch", {}, "")]:
            with TEMStore(path, encoder=encoder, index_backend=backend, index_options=options) as store:
                store.retrieve_vector(queries[0], args.k)  # warm-up
                search = lambda i, store=store: store.retrieve_vector(queries[i], args.k)
                wall, cpu = timed(search, len(queries))
                note = f"k={args.k}, embedding excluded; {load_average()}"
                yield from percentiles("retrieve", wall, cpu, backend, threads, note)
                index = store.index()
                for b in (1, 2, 4, 8, 16):  # the hybrid's dense pool for a server's batch of questions
                    search = lambda i, b=b, index=index: index.search(queries[i * b : (i + 1) * b], POOL)
                    ms = p(timed(search, len(queries) // b)[1], 50) / b
                    note = f"top {POOL} for {b} questions at once, CPU per question"
                    yield row(f"search_batch{b}_cpu_p50_ms", ms, "ms", backend, threads, note)
                if threads == "1, scan":  # what the int8 copy saves: reading the float32 vectors
                    yield from float32_scan_rows(store, queries, row)
    if not args.no_minilm:
        minilm = SentenceEncoder()
        minilm.encode(["warm-up question"])
        wall, cpu = timed(lambda i: minilm.encode([f"Where does persona{i} live now?"]), 30)
        note = f"all-MiniLM-L6-v2, one question, CPU; {load_average()}"
        yield from percentiles("question_embedding", wall, cpu, note=note)


SPEC = Benchmark("memory_scale", __doc__, measure, add_arguments)

if __name__ == "__main__":
    raise SystemExit(run_main(SPEC))  # --out: the CSV or its folder
