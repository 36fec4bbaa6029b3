"""Would an int8 MiniLM lift ingestion? The offline MiniLM in float32 against the same model with its
linear layers quantized to int8 (``torch.ao.quantization.quantize_dynamic``), on ICEWS05-15 fact
sentences of 2012 (``fact_text``, each sentence once), interleaved round by round.

    ROTMEM_DATA_DIR=../shared/data python -m benchmarks.temporal_qa.encoder_int8

Per variant: sentences/s per round (median), and for int8 how close its embeddings stay to float32:
the cosine of each sentence's two embeddings (min, median) and the overlap of each of the first 300
sentences' 10 nearest neighbours among all of them (1.0: the same neighbours). Writes
``encoder_int8.csv`` (with the command) under ``--out``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.harness import write_rows
from rotmem.data import load_dataset
from rotmem.gate.encoder import RelationEncoder
from rotmem.memory.encoder import normalise_rows
from rotmem.memory.tem.store import fact_text

RESULTS = Path(__file__).resolve().parents[1] / "results" / "temporal_qa"


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
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
    near_a = np.argsort(-(a[:300] @ a.T), axis=1)[:, :10]
    near_b = np.argsort(-(b[:300] @ b.T), axis=1)[:, :10]
    overlap = float(np.mean([len(set(x) & set(y)) / 10 for x, y in zip(near_a, near_b, strict=True)]))
    rows = []
    for name in models:
        same = name == "float32"
        rows.append(
            dict(
                encoder=name,
                sentences=len(texts),
                threads=args.threads,
                sentences_per_s=round(statistics.median(rates[name]), 1),
                rounds=" ".join(f"{r:.0f}" for r in rates[name]),
                cos_min=1.0 if same else round(float(cos.min()), 4),
                cos_median=1.0 if same else round(float(np.median(cos)), 4),
                top10_overlap=1.0 if same else round(overlap, 3),
            )
        )
        print(rows[-1])
    given = " ".join(argv if argv is not None else sys.argv[1:])
    write_rows(
        args.out / "encoder_int8.csv", rows, f"python -m benchmarks.temporal_qa.encoder_int8 {given}".strip()
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
