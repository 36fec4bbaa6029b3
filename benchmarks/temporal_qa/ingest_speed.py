"""Ingestion speed of ``TemporalMemory`` as an agent sees it: ICEWS05-15 facts in date order, one
``add_sessions`` call per day (a snapshot), embedding included; where the time goes.

    ROTMEM_DATA_DIR=../shared/data python -m benchmarks.temporal_qa.ingest_speed
"""

import argparse
import time
from collections.abc import Iterator

from benchmarks.memory_common import icews_facts
from benchmarks.memory_common import main as run_main
from benchmarks.runner import Benchmark, Row
from benchmarks.temporal_qa.run import ingest
from rotmem.data import day_of
from rotmem.memory import HashingEncoder, SentenceEncoder, TemporalMemory
from rotmem.memory.tem.store import fact_text


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


def timed_ingest(facts: list, encoder, cache: int) -> dict:
    """The facts, one ``add_sessions`` call per day, into a fresh memory; timings in seconds."""
    timed = TimedEncoder(encoder)
    memory = TemporalMemory(encoder=timed, verify=False, synchronous="OFF", embedding_cache=cache)
    stats = ingest(memory, facts, days_per_batch=1)
    assert len(memory.store) == stats["facts"], "every fact must be stored"
    memory.close()
    seconds = stats["ingest_s"]
    return dict(
        facts=stats["facts"], sessions=stats["sessions"], seconds=round(seconds, 2),
        facts_per_s=round(stats["facts_per_s"], 1),
        texts_embedded=timed.texts, encoder_s=round(timed.seconds, 2),
        store_s=round(seconds - timed.seconds, 2),
        encoder_sentences_per_s=round(timed.texts / timed.seconds, 1) if timed.seconds else None,
    )  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--start", default="2012-01-01")
    parser.add_argument("--end", default="2012-03-31")
    parser.add_argument("--data-dir")


def measure(args: argparse.Namespace) -> Iterator[Row]:
    facts = icews_facts(args.data_dir, day_of(args.start), day_of(args.end))
    distinct = len({fact_text(*f[:3]) for f in facts})
    minilm = SentenceEncoder()
    minilm.encode(["load the model before the clock starts"])
    for name, encoder, cache in (("minilm, no cache", minilm, 0), ("minilm, cache", minilm, 50_000),
                                 ("hashing, no cache", HashingEncoder(384), 0)):  # fmt: skip
        yield dict(variant=name, window=f"{args.start}..{args.end}", distinct_sentences=distinct,
                   **timed_ingest(facts, encoder, cache))  # fmt: skip


SPEC = Benchmark("temporal_qa.ingest_speed", __doc__, measure, add_arguments)

if __name__ == "__main__":
    raise SystemExit(run_main(SPEC))
