"""What training in bfloat16 costs in accuracy: the demo's family at a small rank on ICEWS05-15, the
same seed and batches, with Lightning's ``precision="32-true"`` and ``"bf16-mixed"`` (autocast: the
cross-entropy's products in bfloat16, ``rotmem.ops.autocast_inputs``; float32 master weights,
optimizer state and everything else), on the CPU.

    python -m benchmarks.precision_accuracy                 # rank 16, 2 epochs: ~10 minutes on 2 cores
    python -m benchmarks.precision_accuracy --epochs 1 --facts 20000 --out-dir /tmp/p   # smoke test
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.precision_accuracy (from the checkout's root)")

import argparse
import dataclasses
import tempfile
from collections.abc import Iterator

import pytorch_lightning as pl
import torch

from benchmarks.harness import demo_module, quiet_trainer
from benchmarks.runner import Benchmark, Row, comma_list
from rotmem import load_dataset
from rotmem.evaluation import evaluate_all

PRECISIONS = ("32-true", "tf32", "bf16-mixed")
# the demo config's family (icews05-15-romem-complex-rules) at a rank the CPU trains in minutes
FAMILY = dict(speed="constant", init_scale=0.01, init_s=1.0, init_base=10000.0)


def train_and_evaluate(kg, precision: str, rank: int, epochs: int, accelerator: str, root: str) -> dict:
    pl.seed_everything(0, verbose=False)
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    data, module = demo_module(kg, 500, 2 * rank, **FAMILY)
    lightning = "32-true" if precision == "tf32" else precision  # tf32: float32 with TF32 products
    trainer = quiet_trainer(root, max_epochs=epochs, precision=lightning, accelerator=accelerator)
    trainer.fit(module, datamodule=data)
    metrics = evaluate_all(module.model, kg, "test")
    aware, static = metrics["time-aware/realistic"], metrics["static/realistic"]
    return {"precision": precision, "rank": rank, "epochs": epochs, "train_facts": kg.train.shape[0],
            "time_aware_mrr": round(aware["mrr"], 4), "static_mrr": round(static["mrr"], 4),
            "time_aware_hits@1": round(aware["hits@1"], 4),
            "time_aware_hits@10": round(aware["hits@10"], 4)}  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--facts", type=int, help="train on the first FACTS facts only (smoke)")
    parser.add_argument("--precisions", type=comma_list(PRECISIONS), default="32-true,bf16-mixed")
    parser.add_argument("--accelerator", default="cpu")


def measure(args: argparse.Namespace) -> Iterator[Row]:
    kg = load_dataset("icews05-15")
    if args.facts:
        kg = dataclasses.replace(kg, train=kg.train[: args.facts])
    with tempfile.TemporaryDirectory() as root:
        for precision in args.precisions:
            yield train_and_evaluate(kg, precision, args.rank, args.epochs, args.accelerator, root)


SPEC = Benchmark("precision_accuracy", __doc__, measure, add_arguments, out_dir=True)

if __name__ == "__main__":
    SPEC.main()
