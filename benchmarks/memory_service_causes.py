"""Where a search of ``rotmem serve`` spends its time, each cause before and after its fix, in one run.

On the SQLite file ``memory_service.py prepare`` wrote (100,000 records), in one process, one
thread (no HTTP): per cause the old way and the new way side by side, ms per question (median of
``--repeats``):

- ``latest date``: the default "now" of a search, ``MAX(t_obs)`` over the timed facts: a scan
  (``NOT INDEXED``, as before the ``t_obs`` indexes) against the index lookup; the server asked for
  it twice per search.
- ``index search``: the flat FAISS scan for one question against a batch of 16 (per question).
- ``record fetch``: the 50 candidates fetched per question against the ones that can reach the top
  15 (``TemporalMemory._reachable``, no fitted model).
- ``store path``: ``TemporalMemory.retrieve`` one question at a time against ``retrieve_many`` over
  16 (question vectors given: the embedding is excluded here).
- ``MiniLM``: one question against a batch of 16 (per question).

    python -m benchmarks.memory_service_causes --work /tmp/rotmem-memory-service
    # -> benchmarks/results/memory_service/memory_service_causes.csv
"""

from __future__ import annotations

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.memory_service_causes (from the checkout's root)")

import argparse
import csv
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "results" / "memory_service" / "memory_service_causes.csv"
BATCH, K = 16, 15


def per_call_ms(run, repeats: int, per: int = 1) -> float:
    """Median wall time of ``run()`` over ``repeats`` calls, divided by ``per`` (ms)."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000 / per)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "rotmem-memory-service"))
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    command = "python -m benchmarks.memory_service_causes " + shlex.join(sys.argv[1:])
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
    rows = []
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
            rows.append(("latest date", "scan (before)", per_call_ms(lambda: db.execute(scan).fetchone(), 5)))
            rows.append(
                ("latest date", "index (after)", per_call_ms(memory.latest_observation, args.repeats))
            )
            index = store.index()
            one = per_call_ms(lambda: index.search(vectors[:1], 50), args.repeats)
            batch = per_call_ms(lambda: index.search(vectors, 50), args.repeats, BATCH)
            rows += [
                ("index search", "1 question (before)", one),
                ("index search", "batch of 16 (after)", batch),
            ]
            [hits] = store.search_vectors(vectors[:1], 50)
            kept = memory._reachable(hits, K)
            for found, way in ((hits, "candidates (before)"), (kept, "reachable (after)")):
                fetch = per_call_ms(
                    lambda found=found: store.records_by_id(i for i, _ in found), args.repeats
                )
                rows.append(("record fetch", f"{len(found)} {way}", fetch))
            queries = [Query(q, K) for q in questions]
            alone = per_call_ms(lambda: memory.retrieve_many(queries[:1], vectors[:1]), args.repeats)
            many = per_call_ms(lambda: memory.retrieve_many(queries, vectors), args.repeats, BATCH)
            rows += [
                ("store path", "1 question (after, unbatched)", alone),
                ("store path", "batch of 16", many),
            ]
        embed_one = per_call_ms(lambda: encoder.encode(questions[:1]), args.repeats)
        embed_many = per_call_ms(lambda: encoder.encode(questions), args.repeats, BATCH)
        rows += [("MiniLM", "1 question", embed_one), ("MiniLM", "batch of 16", embed_many)]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", newline="") as f:
        f.write(f"# {command}  ({records} records, one thread, ms per question, median of {args.repeats})\n")
        writer = csv.writer(f)
        writer.writerow(["cause", "way", "ms_per_question"])
        for cause, way, ms in rows:
            writer.writerow([cause, way, round(ms, 3)])
            print(f"{cause:14s} {way:32s} {ms:9.3f} ms", flush=True)


if __name__ == "__main__":
    main()
