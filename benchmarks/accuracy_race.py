"""Accuracy race: each model config trains for the same wall-clock budget on this machine, one after
another, and the test split is evaluated after every epoch under both filters and all tie rules.

    ROTMEM_DATA_DIR=../shared/data python benchmarks/accuracy_race.py --budget-s 900

The clock counts training only: it stops while the test split is evaluated (evaluation is the
measurement, not part of the race) and a model stops at the first batch that ends past the budget,
so its last epoch may be partial (the ``epoch`` column is then fractional). Each config is built
exactly as ``rotmem fit --config`` builds it (its model, data and ``gradient_clip_val``); its own
epoch limit, validation and checkpoints are not used. Writes ``<out>/accuracy_race.csv`` (one row
per model, epoch, filter and tie rule, with the command), ``accuracy_race.png`` (time-aware MRR,
realistic ties, against training seconds) and prints the final table.
"""

from __future__ import annotations

import argparse
import csv
import os
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIGS = ["icews05-15-cpu.yaml", "icews05-15-tntcomplex.yaml"]
FIELDS = [
    "model",
    "config",
    "epoch",
    "train_seconds",
    "filter",
    "tie",
    "mrr",
    "hits@1",
    "hits@3",
    "hits@10",
    "time_auc",
    "split",
    "threads",
    "command",
]


def config_path(name: str) -> Path:
    """A config file: a path, or a file name in the repository's ``configs/``."""
    path = Path(name)
    return path if path.is_file() else ROOT / "configs" / name


def build(config: Path, overrides: list[str]):
    """The config's LightningModule and DataModule, as ``rotmem fit --config`` makes them."""
    from unittest import mock

    from lightning_modules.cli import RoMemCLI
    from lightning_modules.kg_data import TemporalKGDataModule
    from lightning_modules.phase2 import Phase2Module

    with mock.patch.object(sys, "argv", sys.argv[:1]):
        cli = RoMemCLI(
            Phase2Module,
            TemporalKGDataModule,
            args=["--config", str(config), *overrides],
            run=False,
            save_config_callback=None,
        )
    return cli.model, cli.datamodule, cli.config.get("trainer", {}).get("gradient_clip_val")


class RaceClock:
    """A Lightning callback: counts training seconds, stops past the budget, evaluates after each
    epoch with the clock stopped, and hands the rows to ``record``."""

    def __init__(self, budget_s: float, evaluate, record):
        import pytorch_lightning as pl

        class Callback(pl.Callback):
            def on_train_epoch_start(cb, trainer, module):
                self.started = time.perf_counter()

            def on_train_batch_end(cb, trainer, module, outputs, batch, batch_idx):
                if self.spent + time.perf_counter() - self.started >= budget_s:
                    trainer.should_stop = True
                self.batches = batch_idx + 1

            def on_train_epoch_end(cb, trainer, module):
                self.spent += time.perf_counter() - self.started
                epoch = trainer.current_epoch + self.batches / trainer.num_training_batches
                record(round(epoch, 3), round(self.spent, 1), evaluate(module.model))

        self.spent, self.started, self.batches = 0.0, 0.0, 0
        self.callback = Callback()


def race_one(config: Path, budget_s: float, max_epochs: int, overrides: list[str], record) -> None:
    import pytorch_lightning as pl
    import torch

    from rotmem.commands.demo import ensure_gate
    from rotmem.evaluation import evaluate_all, time_discrimination

    module, data, clip = build(config, overrides)
    ensure_gate(config, data.hparams.dataset, data.hparams.data_dir)
    kg = data.kg

    def evaluate(model) -> dict:
        with torch.no_grad():
            metrics = evaluate_all(model, kg, "test")
            metrics["time_auc"] = time_discrimination(model, kg, "test")["auc"]
        return metrics

    clock = RaceClock(budget_s, evaluate, record)
    trainer = pl.Trainer(
        max_epochs=max_epochs,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        gradient_clip_val=clip,
        callbacks=[clock.callback],
    )
    trainer.fit(module, datamodule=data)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, kind in zip(axes, ("time-aware", "static"), strict=True):
        for model in dict.fromkeys(r["model"] for r in rows):
            points = [
                r for r in rows if r["model"] == model and r["filter"] == kind and r["tie"] == "realistic"
            ]
            ax.plot([p["train_seconds"] for p in points], [p["mrr"] for p in points], marker="o", label=model)
        ax.set_xlabel("training seconds (this machine)")
        ax.set_ylabel(f"test MRR, {kind} filter, realistic ties")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget-s", type=float, default=900.0, help="training seconds per model")
    parser.add_argument(
        "--configs", nargs="+", default=DEFAULT_CONFIGS, help="config files or names in configs/"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-epochs", type=int, default=1000, help="stop earlier than the budget")
    parser.add_argument(
        "--time-split",
        nargs=2,
        metavar=("VALID_FROM", "TEST_FROM"),
        default=None,
        help="temporal extrapolation: re-split the data by date (rotmem.data.split_by_time)",
    )
    parser.add_argument("--data", default=None, help="override the configs' dataset (e.g. synthetic)")
    parser.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="more overrides for every config, as rotmem fit takes them (e.g. data.batch_size=4000)",
    )
    parser.add_argument("--out-dir", default=str(ROOT / "benchmarks/results/accuracy_race"))
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    command = "python " + shlex.join(["benchmarks/accuracy_race.py", *sys.argv[1:]])
    if os.environ.get("ROTMEM_DATA_DIR"):
        command = f"ROTMEM_DATA_DIR={os.environ['ROTMEM_DATA_DIR']} {command}"
    print(f"command: {command}", flush=True)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "accuracy_race.csv"
    rows: list[dict] = []
    overrides = ["--data.time_split", str(list(args.time_split))] if args.time_split else []
    if args.data:
        overrides += ["--data.dataset", args.data]
    for item in args.set:
        key, _, value = item.partition("=")
        overrides += [f"--{key}", value]

    with open(csv_path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        for name in args.configs:
            config = config_path(name)
            model = config.stem

            def record(epoch: float, seconds: float, metrics: dict, model=model, config=config) -> None:
                print(
                    f"{model:32s} epoch {epoch:6.2f} {seconds:7.1f} s  "
                    f"time-aware {metrics['time-aware/realistic']['mrr']:.4f}  "
                    f"static {metrics['static/realistic']['mrr']:.4f}  time-AUC {metrics['time_auc']:.4f}",
                    flush=True,
                )
                for key, values in metrics.items():
                    if key == "time_auc":
                        continue
                    kind, tie = key.split("/")
                    row = dict(
                        model=model,
                        config=config.name,
                        epoch=epoch,
                        train_seconds=seconds,
                        filter=kind,
                        tie=tie,
                        time_auc=round(metrics["time_auc"], 4),
                        split="time" if args.time_split else "standard",
                        threads=args.threads,
                        command=command,
                    )
                    row.update({m: round(v, 4) for m, v in values.items()})
                    rows.append(row)
                    writer.writerow(row)
                handle.flush()

            race_one(config, args.budget_s, args.max_epochs, overrides, record)
    if rows:
        plot(rows, out / "accuracy_race.png")
    print(
        f"\n{'model':32s} {'epochs':>7s} {'seconds':>8s} {'time-aware':>10s} {'static':>7s} {'time-AUC':>8s}"
    )
    for model in dict.fromkeys(r["model"] for r in rows):
        last = [r for r in rows if r["model"] == model and r["tie"] == "realistic"][-2:]
        ta = next(r for r in last if r["filter"] == "time-aware")
        st = next(r for r in last if r["filter"] == "static")
        print(
            f"{model:32s} {ta['epoch']:7.2f} {ta['train_seconds']:8.1f} {ta['mrr']:10.4f} {st['mrr']:7.4f} "
            f"{ta['time_auc']:8.4f}"
        )
    print(f"wrote {csv_path} and {out / 'accuracy_race.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
