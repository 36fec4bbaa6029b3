"""Phase-2 ablation of the speed source: pretrained gate vs no gate (α = 1) vs learnable per-relation α.

    rotmem gate pretrain --data icews05-15                 # the default gate (once)
    ROTMEM_DATA_DIR=../shared/data python -m benchmarks.gate_ablation   # ~25 min per variant on 2 cores
    python -m benchmarks.gate_ablation --variants gate no-gate --config synthetic \\
        --gate ~/.cache/rotmem/gates/synthetic/gate.pt --out benchmarks/results/gate_ablation_synthetic.csv
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.gate_ablation (from the checkout's root)")

import argparse
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.runner import Benchmark, Row
from rotmem import configs

VARIANTS = {
    "gate": lambda gate, paper_gate: ["--model.family.speed", "gate", "--model.gate_path", gate],
    "no-gate": lambda gate, paper_gate: ["--config", str(configs.resolve("ablation-no-gate"))],
    "learned": lambda gate, paper_gate: ["--config", str(configs.resolve("ablation-learned-alpha"))],
    "gate-paper": lambda gate, paper_gate: ["--model.family.speed", "gate", "--model.gate_path", paper_gate],
}
METRICS = ("mrr", "hits@1", "hits@3", "hits@10")


def run_variant(config: str, variant: str, gate: str, paper_gate: str, log_dir: str) -> Row:
    from lightning_modules.cli import run_lightning_cli

    args = ["--config", str(configs.resolve(config)), *VARIANTS[variant](gate, paper_gate)]
    start = time.time()
    quiet = ["--trainer.enable_progress_bar", "false", "--trainer.logger.init_args.save_dir", log_dir]
    cli = run_lightning_cli(["fit", *args, *quiet])
    fit_seconds = time.time() - start
    result = cli.trainer.test(cli.model, datamodule=cli.datamodule, ckpt_path="best", verbose=False)[0]
    row = {"variant": variant, "config": Path(config).name, "epochs": cli.trainer.max_epochs}
    for kind in ("time-aware", "static"):
        row.update({f"{kind}/{m}": round(float(result[f"test/{kind}/{m}"]), 4) for m in METRICS})
    return row | {"fit_seconds": round(fit_seconds, 1)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=str(configs.resolve("icews05-15-cpu")))
    parser.add_argument(
        "--variants", nargs="+", default=["gate", "no-gate", "learned"], choices=list(VARIANTS)
    )
    parser.add_argument("--gate", default="~/.cache/rotmem/gates/icews05-15/gate.pt")
    parser.add_argument("--paper-gate", default="~/.cache/rotmem/gates/icews05-15-paper/gate.pt")


def measure(args: argparse.Namespace) -> Iterator[Row]:
    with tempfile.TemporaryDirectory() as logs:
        for variant in args.variants:
            yield run_variant(args.config, variant, args.gate, args.paper_gate, f"{logs}/{variant}")


SPEC = Benchmark("gate_ablation", __doc__, measure, add_arguments, csv_name="gate_ablation_icews05-15-cpu",
                 env=("OMP_NUM_THREADS", "ROTMEM_DATA_DIR"))  # fmt: skip

if __name__ == "__main__":
    SPEC.main()
