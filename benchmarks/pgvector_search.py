"""pgvector against the in-memory index, for the Postgres backend's vectors: one search at 100k.

python -m benchmarks.pgvector_search      # -> benchmarks/results/memory_service/pgvector.csv
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.pgvector_search (from the checkout's root)")

import argparse
import tempfile
import time
from collections.abc import Iterator

import numpy as np

from benchmarks.memory_common import main as run_main
from benchmarks.memory_common import p, unit_vectors
from benchmarks.runner import Benchmark, Row, timed

DIM, TOP = 384, 50


def literal(vector: np.ndarray) -> str:
    return "[" + ",".join(map(str, vector.tolist())) + "]"


def ms_each(run, items) -> list[float]:
    """Milliseconds of ``run(item)`` for each of ``items``."""
    return [timed(lambda item=item: run(item)) for item in items]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)


def measure(args: argparse.Namespace) -> Iterator[Row]:
    try:
        import pgserver
    except ImportError:
        raise SystemExit(
            "pgserver is not installed: pip install pgserver (PostgreSQL 16 with pgvector)"
        ) from None
    import psycopg

    from rotmem.index import make_index

    rng = np.random.default_rng(0)
    vectors, queries = unit_vectors(rng, args.records, DIM), unit_vectors(rng, args.queries, DIM)

    def row(method: str, ms: list[float], recall: float, note: str) -> Row:
        return dict(method=method, records=args.records, queries=len(ms), p50_ms=round(p(ms, 50), 2),
                    p95_ms=round(p(ms, 95), 2), **{f"recall_at_{TOP}": round(float(recall), 3)},
                    note=note, server=server_version)  # fmt: skip

    with tempfile.TemporaryDirectory() as folder:
        server = pgserver.get_server(folder, cleanup_mode="stop")
        with psycopg.connect(server.get_uri(), autocommit=True) as db:
            db.execute("CREATE EXTENSION IF NOT EXISTS vector")
            version = db.execute("SELECT version()").fetchone()[0].split(",")[0]
            (extension,) = db.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
            server_version = f"{version}, pgvector {extension}"
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
            yield row("pgvector exact (seq scan)", ms_each(pg, queries), 1.0, f"load {load_s:.1f} s")
            start = time.perf_counter()
            db.execute("SET maintenance_work_mem = '1GB'")  # the graph is built in memory
            db.execute("CREATE INDEX ON facts USING hnsw (embedding vector_ip_ops)")
            build_s = time.perf_counter() - start
            db.execute("SET hnsw.ef_search = 100")
            recall = np.mean([len(set(pg(q)) & set(e)) / TOP for q, e in zip(queries, exact, strict=True)])
            hnsw = ms_each(pg, queries)
            yield row("pgvector hnsw (ef_search 100)", hnsw, recall, f"build {build_s:.1f} s")
        server.cleanup()
    index = make_index(DIM, backend="faiss")
    index.add(np.arange(args.records), vectors)
    _, ids = index.search(queries, TOP)
    recall = np.mean([len(set(i.tolist()) & set(e)) / TOP for i, e in zip(ids, exact, strict=True)])
    one = ms_each(lambda q: index.search(q[None], TOP), queries)
    yield row("faiss flat, one question", one, recall, "")
    batches = queries[: (len(queries) // 16) * 16].reshape(-1, 16, DIM)
    per_batch = ms_each(lambda b: index.search(b, TOP), batches)
    yield row("faiss flat, batch of 16 (per question)", [t / 16 for t in per_batch], recall, "")


SPEC = Benchmark("pgvector_search", __doc__, measure, add_arguments, csv_name="memory_service/pgvector")

if __name__ == "__main__":
    raise SystemExit(run_main(SPEC))  # --out: the CSV or its folder
