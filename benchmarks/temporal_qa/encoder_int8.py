"""Would an int8 MiniLM lift ingestion? The offline MiniLM in float32 against the same model with its
linear layers quantized to int8 (``torch.ao.quantization.quantize_dynamic``), on ICEWS05-15 fact
sentences of 2012 (``fact_text``, each sentence once), interleaved round by round.

    ROTMEM_DATA_DIR=../shared/data python -m benchmarks.temporal_qa.encoder_int8
"""

import argparse
import statistics
import time
from collections.abc import Iterator

import numpy as np
import torch

from benchmarks.memory_common import main as run_main
from benchmarks.runner import Benchmark, Row
from rotmem.data import load_dataset
from rotmem.gate.encoder import RelationEncoder
from rotmem.memory.encoder import normalise_rows
from rotmem.memory.tem.store import fact_text


def sentences(count: int) -> list[str]:
    """The first ``count`` distinct fact sentences of 2012's training facts."""
    kg = load_dataset("icews05-15")
    texts = {}
    for h, r, t, day in kg.train.tolist():
        if kg.date_of(day).startswith("2012-"):
            texts.setdefault(fact_text(kg.entities[h], kg.relations[r], kg.entities[t]), None)
            if len(texts) == count:
                break
    return list(texts)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sentences", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)


def measure(args: argparse.Namespace) -> Iterator[Row]:
    texts = sentences(args.sentences)
    model = RelationEncoder(cache_dir=False)._load()
    models = {"float32": model, "int8": torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear})}
    rates: dict[str, list[float]] = {name: [] for name in models}
    embeddings = {}
    for round_ in range(args.rounds + 1):  # round 0 warms up
        for name, m in models.items():
            start = time.perf_counter()
            out = m.encode(texts, batch_size=256, convert_to_numpy=True)
            if round_:
                rates[name].append(len(texts) / (time.perf_counter() - start))
            embeddings[name] = normalise_rows(np.asarray(out, dtype=np.float32))
    a, b = embeddings["float32"], embeddings["int8"]
    cos = (a * b).sum(axis=1)
    near_a, near_b = (np.argsort(-(x[:300] @ x.T), axis=1)[:, :10] for x in (a, b))
    overlap = float(np.mean([len(set(x) & set(y)) / 10 for x, y in zip(near_a, near_b, strict=True)]))
    for name in models:
        same = name == "float32"
        yield dict(encoder=name, sentences=len(texts), threads=args.threads,
                   sentences_per_s=round(statistics.median(rates[name]), 1),
                   rounds=" ".join(f"{r:.0f}" for r in rates[name]),
                   cos_min=1.0 if same else round(float(cos.min()), 4),
                   cos_median=1.0 if same else round(float(np.median(cos)), 4),
                   top10_overlap=1.0 if same else round(overlap, 3))  # fmt: skip


SPEC = Benchmark("temporal_qa.encoder_int8", __doc__, measure, add_arguments)


def main(argv: list[str] | None = None) -> int:
    return run_main(SPEC, argv)


if __name__ == "__main__":
    raise SystemExit(main())
