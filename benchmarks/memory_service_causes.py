"""Where a search of ``rotmem serve`` spends its time, each cause before and after its fix, in one run.

python -m benchmarks.memory_service_causes --work /tmp/rotmem-memory-service
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.memory_service_causes (from the checkout's root)")

import argparse
import shutil
import statistics
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from benchmarks.memory_common import main as run_main
from benchmarks.memory_common import timed_ms
from benchmarks.runner import Benchmark, Row

BATCH, K = 16, 15


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "rotmem-memory-service"))
    parser.add_argument("--repeats", type=int, default=20)


def measure(args: argparse.Namespace) -> Iterator[Row]:
    import torch

    from rotmem.memory import SentenceEncoder, TemporalMemory
    from rotmem.memory.temporal.records import Query

    torch.set_num_threads(1)
    source = Path(args.work) / "sqlite" / "load.db"
    if not source.is_file():
        raise SystemExit(f"{source}: no prepared file; run: python -m benchmarks.memory_service prepare")
    encoder = SentenceEncoder()
    rng = np.random.default_rng(0)
    questions = [f"What does persona{rng.integers(2000)} like now, question {i}?" for i in range(BATCH)]
    vectors = encoder.encode(questions)

    def row(cause: str, way: str, run, repeats: int = args.repeats, per: int = 1) -> Row:
        ms = statistics.median(timed_ms(run, repeats, per))
        return {"cause": cause, "way": way, "ms_per_question": round(ms, 3),
                "records": records, "repeats": repeats}  # fmt: skip

    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "load.db"
        shutil.copy(source, copy)  # the measured file is opened for writing (it gets the indexes)
        if Path(f"{source}-wal").exists():  # committed sessions not yet checkpointed
            shutil.copy(f"{source}-wal", f"{copy}-wal")
        with TemporalMemory(str(copy), encoder=encoder) as memory:
            db, store = memory.store.db, memory.store
            records = len(store)
            scan = "SELECT MAX(t) FROM (SELECT MAX(t_obs) AS t FROM temporal_facts NOT INDEXED UNION ALL "
            scan += "SELECT MAX(t_obs) FROM session_dates NOT INDEXED)"
            yield row("latest date", "scan (before)", lambda: db.execute(scan).fetchone(), 5)
            yield row("latest date", "index (after)", memory.latest_observation)
            index = store.index()
            yield row("index search", "1 question (before)", lambda: index.search(vectors[:1], 50))
            yield row("index search", "batch of 16 (after)", lambda: index.search(vectors, 50), per=BATCH)
            [hits] = store.search_vectors(vectors[:1], 50)
            for found, way in (
                (hits, "candidates (before)"),
                (memory._reachable(hits, K), "reachable (after)"),
            ):
                fetch = lambda found=found: store.records_by_id(i for i, _ in found)  # noqa: E731
                yield row("record fetch", f"{len(found)} {way}", fetch)
            queries = [Query(q, K) for q in questions]
            alone = lambda: memory.retrieve_many(queries[:1], vectors[:1])  # noqa: E731
            yield row("store path", "1 question (after, unbatched)", alone)
            yield row("store path", "batch of 16", lambda: memory.retrieve_many(queries, vectors), per=BATCH)
        yield row("MiniLM", "1 question", lambda: encoder.encode(questions[:1]))
        yield row("MiniLM", "batch of 16", lambda: encoder.encode(questions), per=BATCH)


CSV = "memory_service/memory_service_causes"
SPEC = Benchmark("memory_service_causes", __doc__, measure, add_arguments, csv_name=CSV)

if __name__ == "__main__":
    raise SystemExit(run_main(SPEC))  # --out: the CSV or its folder
