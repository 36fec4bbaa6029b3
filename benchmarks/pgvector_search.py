"""pgvector against the in-memory index, for the Postgres backend's vectors: one search at 100k.

The issue asks "pgvector for the vectors or the existing index: measure and choose". Debian 12's
apt has no ``postgresql-15-pgvector``; the ``pgserver`` wheel (``pip install pgserver``) bundles
PostgreSQL 16.2 with pgvector 0.6.2, so this script runs there: ``--records`` random unit vectors of
MiniLM's width (the memory-service benchmark's vectors) in a ``vector(384)`` column, then per
question the top 50 by inner product (what ``TemporalMemory`` asks the index for):

- ``pgvector exact``: ``ORDER BY embedding <#> q LIMIT 50`` without an index (a parallel seq scan);
- ``pgvector hnsw``: the same with an HNSW index (``vector_ip_ops``, default m / ef_construction,
  ``ef_search`` = 100), approximate: its recall@50 against the exact answer is reported;
- ``faiss flat``: ``rotmem.index`` FAISS flat (exact), one question, and a batch of 16 (per question).

    python -m benchmarks.pgvector_search      # -> benchmarks/results/memory_service/pgvector.csv

Random vectors have no cluster structure, so HNSW's recall here is a lower bound of what MiniLM
vectors give; the timings do not depend on the values.
"""

from __future__ import annotations

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.pgvector_search (from the checkout's root)")

import argparse
import csv
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "results" / "memory_service" / "pgvector.csv"
DIM, TOP = 384, 50


def literal(vector: np.ndarray) -> str:
    return "[" + ",".join(map(str, vector.tolist())) + "]"


def timed_queries(run, queries: np.ndarray) -> list[float]:
    out = []
    for q in queries:
        start = time.perf_counter()
        run(q)
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    command = "python -m benchmarks.pgvector_search " + shlex.join(sys.argv[1:])
    try:
        import pgserver
    except ImportError:
        raise SystemExit(
            "pgserver is not installed: pip install pgserver (PostgreSQL 16 with pgvector)"
        ) from None
    import psycopg

    from rotmem.index import make_index

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((args.records, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = rng.standard_normal((args.queries, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        server = pgserver.get_server(folder, cleanup_mode="stop")
        with psycopg.connect(server.get_uri(), autocommit=True) as db:
            version = db.execute("SELECT version()").fetchone()[0].split(",")[0]
            db.execute("CREATE EXTENSION IF NOT EXISTS vector")
            extension = db.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[
                0
            ]
            db.execute(f"CREATE TABLE facts (id BIGINT PRIMARY KEY, embedding vector({DIM}))")
            start = time.perf_counter()
            with db.cursor().copy("COPY facts (id, embedding) FROM STDIN") as copy:
                for i, v in enumerate(vectors):
                    copy.write_row((i, literal(v)))
            load_s = time.perf_counter() - start
            db.execute("ANALYZE facts")
            sql = "SELECT id FROM facts ORDER BY embedding <#> %s::vector LIMIT %s"

            def pg(q: np.ndarray) -> list[int]:
                return [r[0] for r in db.execute(sql, (literal(q), TOP)).fetchall()]

            exact = [pg(q) for q in queries[:3]]  # warm
            exact = [pg(q) for q in queries]
            times = timed_queries(pg, queries)
            rows.append(("pgvector exact (seq scan)", times, 1.0, f"load {load_s:.1f} s"))
            start = time.perf_counter()
            db.execute("SET maintenance_work_mem = '1GB'")  # the graph is built in memory
            db.execute("CREATE INDEX ON facts USING hnsw (embedding vector_ip_ops)")
            build_s = time.perf_counter() - start
            db.execute("SET hnsw.ef_search = 100")
            approx = [pg(q) for q in queries]
            recall = np.mean([len(set(a) & set(e)) / TOP for a, e in zip(approx, exact, strict=True)])
            rows.append(
                (
                    "pgvector hnsw (ef_search 100)",
                    timed_queries(pg, queries),
                    recall,
                    f"build {build_s:.1f} s",
                )
            )
        server.cleanup()
    index = make_index(DIM, backend="faiss")
    index.add(np.arange(args.records), vectors)
    _, ids = index.search(queries, TOP)
    recall = np.mean([len(set(i.tolist()) & set(e)) / TOP for i, e in zip(ids, exact, strict=True)])
    rows.append(
        ("faiss flat, one question", timed_queries(lambda q: index.search(q[None], TOP), queries), recall, "")
    )
    batches = queries[: (len(queries) // 16) * 16].reshape(-1, 16, DIM)
    per_batch = timed_queries(lambda b: index.search(b, TOP), batches)
    rows.append(("faiss flat, batch of 16 (per question)", [t / 16 for t in per_batch], recall, ""))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", newline="") as f:
        f.write(
            f"# {command}  ({version}, pgvector {extension}; {args.records} random unit vectors, top {TOP})\n"
        )
        writer = csv.writer(f)
        writer.writerow(["method", "records", "queries", "p50_ms", "p95_ms", f"recall_at_{TOP}", "note"])
        for name, times, rec, note in rows:
            ms = np.asarray(times) * 1000
            line = [name, args.records, len(times), round(float(np.percentile(ms, 50)), 2),
                    round(float(np.percentile(ms, 95)), 2), round(float(rec), 3), note]  # fmt: skip
            writer.writerow(line)
            print(line, flush=True)


if __name__ == "__main__":
    main()
