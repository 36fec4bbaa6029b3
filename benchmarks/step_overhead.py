"""The fixed cost of one Lightning training step: the demo config's family (RoMemComplEx with the
history term and the rule counts) at tiny shapes (dim 8, N = 100, batch 500), where what is left is
Python, Lightning, logging, launches and the history's counting (on a GPU it sets the epoch's time).

    python -m benchmarks.step_overhead                    # ~1 minute on 2 cores
    python -m benchmarks.step_overhead --epochs 1 --facts 2000 --out-dir /tmp/s   # smoke test
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.step_overhead (from the checkout's root)")

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator

import pytorch_lightning as pl
import torch

from benchmarks.harness import demo_module, quiet_trainer
from benchmarks.runner import Benchmark, Row, add_threads, comma_list, machine, spread
from rotmem.data import TemporalKG
from rotmem.host_syncs import HostSyncCounter
from rotmem.losses import one_vs_all_loss

VARIANTS = ("counts-in-step", "counts-in-loader", "no-history")


def random_kg(facts: int, entities: int = 100, relations: int = 20, days: int = 4000) -> TemporalKG:
    """``facts`` facts drawn uniformly (seed 0) over ``days`` days (day numbers near ICEWS05-15's)."""
    g = torch.Generator().manual_seed(0)
    columns = [(0, entities), (0, relations), (0, entities), (16071, 16071 + days)]
    train = torch.stack([torch.randint(low, high, (facts,), generator=g) for low, high in columns], 1)
    names = [f"e{i}" for i in range(entities)], [f"r{i}" for i in range(relations)]
    return TemporalKG("random", *names, train, train[:100], train[:100])


class StepTimer(pl.Callback):
    """Milliseconds of each training step (batch start to batch end) and of each batch's making."""

    def __init__(self) -> None:
        self.steps: list[float] = []
        self._start = 0.0

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.steps.append((time.perf_counter() - self._start) * 1e3)


def run_epoch(variant: str, data, module, root: str) -> tuple[list[float], list[float]]:
    """One epoch through Lightning: the steps' and the batches' ms (the first step, which checks the days'
    range once, left out)."""
    timer = StepTimer()
    trainer = quiet_trainer(root, max_epochs=1, callbacks=[timer])
    make_batch = data.make_batch
    batch_ms: list[float] = []

    def timed_batch(indices):
        start = time.perf_counter()
        out = make_batch(indices)
        batch_ms.append((time.perf_counter() - start) * 1e3)
        return out

    data.make_batch = timed_batch
    setup = module.setup

    def setup_without_loader_counts(stage: str) -> None:
        setup(stage)
        data.history = None

    if variant == "counts-in-step":  # what every step did before the loader made the counts
        module.setup = setup_without_loader_counts
    trainer.fit(module, datamodule=data)
    return timer.steps[1:], batch_ms[1:]


def syncs_per_step(variant: str, data, module) -> int:
    facts = data.kg.train[: data.hparams.batch_size]
    model = module.model
    counts = model.training_history_counts(facts) if variant == "counts-in-loader" else None
    one_vs_all_loss(model, facts, counts).backward()  # the one-time day-range check
    with HostSyncCounter() as syncs:
        one_vs_all_loss(model, facts, counts).backward()
    return syncs.total


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--facts", type=int, default=20000, help="training facts (batches: facts/batch)")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=3, help="epochs per variant, interleaved")
    add_threads(parser)
    parser.add_argument("--variants", type=comma_list(VARIANTS), default=",".join(VARIANTS))


def measure(args: argparse.Namespace) -> Iterator[Row]:
    variants = args.variants
    kg = random_kg(args.facts)
    built = {v: demo_module(kg, args.batch, 8, v != "no-history", drop_last=True) for v in variants}
    steps: dict[str, list[float]] = {v: [] for v in variants}
    batches: dict[str, list[float]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as root:
        for _ in range(args.epochs):
            for v in variants:
                step_ms, batch_ms = run_epoch(v, *built[v], root)
                steps[v] += step_ms
                batches[v] += batch_ms
    for v in variants:
        yield {"variant": v, **spread(steps[v], prefix="step_ms", digits=3),
               "batch_ms_median": round(statistics.median(batches[v]), 3),
               "syncs_per_step": syncs_per_step(v, *built[v]), "steps": len(steps[v]),
               "threads": machine()["threads"]}  # fmt: skip


SPEC = Benchmark("step_overhead", __doc__, measure, add_arguments, out_dir=True)

if __name__ == "__main__":
    SPEC.main()
