"""Dev-set tuning of the RoMem memory for temporal QA (dev seed 1 only; the test set is never read).

ROTMEM_DATA_DIR=../shared/data python -m benchmarks.temporal_qa.tune --gate gate.pt
"""

import argparse
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.memory_common import main as run_main
from benchmarks.runner import Benchmark, Row
from benchmarks.temporal_qa import memories
from benchmarks.temporal_qa.run import evaluate, ingest, load_setup, summarise
from rotmem.memory import CachedEncoder, FitConfig, SentenceEncoder, TemporalMemory


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gate", required=True, help="a Semantic Speed Gate file")
    parser.add_argument("--epochs", type=int, nargs="+", default=[10, 20])
    parser.add_argument("--alpha-g", type=float, nargs="+", default=[0.3, 1.0, 3.0])
    parser.add_argument("--beta", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--questions", type=int, help="every n-th dev question, this many")
    parser.add_argument("--data-dir")


def measure(args: argparse.Namespace) -> Iterator[Row]:
    window = dict(split="dev", start="2012-01-01", end="2012-12-31", scale=0.5, quick=False)
    setup = load_setup(argparse.Namespace(**window, data_dir=args.data_dir, questions=args.questions))
    encoder = CachedEncoder(SentenceEncoder())
    memory = TemporalMemory(encoder=encoder, verify=False, synchronous="OFF")
    print(
        ingest(memory, [f for f in setup.facts if setup.window[0] <= f[3] <= setup.window[1]], 1), flush=True
    )
    encoder.encode([q.text for q in setup.questions])
    by_id = {f.record_id: f for f in memory.facts()}
    rankers = {"dense": memories.dense(memory), "hybrid": memories.hybrid(memory),
               "symbolic": memories.symbolic(memory)}  # fmt: skip
    fits = [(f"gate e{e}", Path(args.gate), e) for e in args.epochs]
    fits.append((f"no-gate e{args.epochs[0]}", None, args.epochs[0]))
    for label, speeds, epochs in fits:
        variant = TemporalMemory(store=memory.store, speeds=speeds)
        t0 = time.perf_counter()
        variant.fit(FitConfig(epochs=epochs, batch_size=1024, dim=64, threads=2))
        print(f"fitted {label} in {time.perf_counter() - t0:.0f} s", flush=True)
        for alpha_g in args.alpha_g:
            tuned = TemporalMemory(store=memory.store, alpha_g=alpha_g)
            tuned.use_model(variant.model)
            rankers[f"romem {label} alpha_g={alpha_g:g}"] = memories.temporal(tuned)
        for beta in args.beta:
            rankers[f"romem-hybrid {label} beta={beta:g}"] = memories.best(variant, beta, constrain=False)
    rows = []
    for name, rank in rankers.items():
        rows += evaluate(name, rank, setup.questions, by_id, encoder)
        print(f"evaluated {name}", flush=True)
    yield from summarise(rows)


CSV = "temporal_qa/temporal_qa_dev_tuning"
SPEC = Benchmark("temporal_qa.tune", __doc__, measure, add_arguments, csv_name=CSV)

if __name__ == "__main__":
    raise SystemExit(run_main(SPEC))
