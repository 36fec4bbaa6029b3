"""Ingestion speed of ``TemporalMemory`` as an agent sees it: ICEWS05-15 facts in date order, one
``add_sessions`` call per day (a snapshot), embedding included; where the time goes.

    ROTMEM_DATA_DIR=../shared/data python -m benchmarks.temporal_qa.ingest_speed

Variants, side by side in one run over the same facts, each into a fresh in-memory store:

- ``minilm, no cache``: every fact sentence embedded as it arrives (``embedding_cache=0``; repeats
  inside one call are still embedded once), the store before the cache;
- ``minilm, cache``: the store's ``EmbeddingCache`` (default) keeps what it has embedded, so a
  sentence told again on a later day is not embedded again;
- ``hashing, no cache``: a model-free encoder: what the store itself costs (validation, SQLite
  writes, status, index appends) without MiniLM.

Per variant: facts/s over the whole window, the texts the encoder embedded, the seconds inside the
encoder, the rest (store), and the encoder's sentences/s. Writes ``ingest_speed.csv`` (with the
command) under ``--out``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.harness import write_rows
from rotmem.data import date_of, day_of, load_dataset
from rotmem.memory import HashingEncoder, SentenceEncoder
from rotmem.memory.tem.store import fact_text
from rotmem.memory.temporal.memory import TemporalMemory

RESULTS = Path(__file__).resolve().parents[1] / "results" / "temporal_qa"


class TimedEncoder:
    """An encoder that adds up the seconds and texts of its ``encode`` calls."""

    def __init__(self, encoder):
        self.encoder, self.name = encoder, encoder.name
        self.seconds, self.texts = 0.0, 0

    def encode(self, texts: list[str]):
        t0 = time.perf_counter()
        out = self.encoder.encode(texts)
        self.seconds += time.perf_counter() - t0
        self.texts += len(texts)
        return out


def ingest(days: dict[int, list], encoder, cache: int) -> dict:
    """All days, one ``add_sessions`` call each, into a fresh memory; timings in seconds."""
    timed = TimedEncoder(encoder)
    memory = TemporalMemory(encoder=timed, verify=False, synchronous="OFF", embedding_cache=cache)
    t0 = time.perf_counter()
    for day, facts in days.items():
        memory.add_sessions([dict(session_id=date_of(day), facts=facts, date=day)])
    seconds = time.perf_counter() - t0
    facts = sum(len(f) for f in days.values())
    assert len(memory.store) == facts, "every fact must be stored"
    memory.close()
    return dict(
        facts=facts, sessions=len(days), seconds=round(seconds, 2), facts_per_s=round(facts / seconds, 1),
        texts_embedded=timed.texts, encoder_s=round(timed.seconds, 2),
        store_s=round(seconds - timed.seconds, 2),
        encoder_sentences_per_s=round(timed.texts / timed.seconds, 1) if timed.seconds else None,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--start", default="2012-01-01")
    parser.add_argument("--end", default="2012-03-31")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    command = " ".join(["python -m benchmarks.temporal_qa.ingest_speed", *given])

    kg = load_dataset("icews05-15", args.data_dir)
    low, high = day_of(args.start), day_of(args.end)
    E, R = kg.entities, kg.relations
    days: dict[int, list] = defaultdict(list)
    for h, r, t, d in sorted(kg.all_facts.tolist(), key=lambda f: f[3]):
        if low <= d <= high:
            days[d].append((E[h], R[r], E[t], d))
    distinct = len({fact_text(*f[:3]) for facts in days.values() for f in facts})
    minilm = SentenceEncoder()
    minilm.encode(["load the model before the clock starts"])
    variants = (("minilm, no cache", minilm, 0), ("minilm, cache", minilm, 50_000),
                ("hashing, no cache", HashingEncoder(384), 0))  # fmt: skip
    rows = []
    for name, encoder, cache in variants:
        row = dict(variant=name, window=f"{args.start}..{args.end}", distinct_sentences=distinct,
                   **ingest(days, encoder, cache))  # fmt: skip
        print(row, flush=True)
        rows.append(row)
    write_rows(args.out / "ingest_speed.csv", rows, command)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
