"""Accuracy race: each model config trains for the same budget (training seconds or epochs), one seed
after another; the validation split is ranked after every epoch and the test split once per run, at
the end, for the last epoch and for the best-validation (monitored) epoch.

    ROTMEM_DATA_DIR=../shared/data python -m benchmarks.accuracy_race --budget-s 900 --seeds 0 1 2
    ROTMEM_DATA_DIR=../shared/data python -m benchmarks.accuracy_race --budget-epochs 1 --seeds 0 1 2
    python -m benchmarks.accuracy_race --paper-curve   # the paper-size curve beside the race's best
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.accuracy_race (from the checkout's root)")

import argparse
import copy
import math
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.harness import quiet_trainer
from benchmarks.runner import RESULTS, Benchmark, Row, command_line, commit_of, read_csv, write_csv

DEFAULT_CONFIGS = ["icews05-15-cpu.yaml", "icews05-15-tntcomplex.yaml"]
METRICS = ["mrr", "hits@1", "hits@3", "hits@10"]
GROUP = ("model", "history", "protocol", "checkpoint", "filter", "tie", "subset")
PAPER_STATIC_MRR = 0.726  # RoMem paper, ICEWS05-15, static filter
PAPER_CURVES = [  # the paper's settings for 90 minutes (docs/accuracy.md), and the race's best config
    f"{RESULTS}/paper_curve/accuracy_race.csv:icews05-15-chronor",
    f"{RESULTS}/accuracy_race/accuracy_race.csv:icews05-15-romem-complex-day",
]


def build(config: Path, overrides: list[str]):
    """The config's LightningModule and DataModule, as ``rotmem fit --config`` makes them."""
    from unittest import mock

    from lightning_modules.cli import RoMemCLI
    from lightning_modules.kg_data import TemporalKGDataModule
    from lightning_modules.phase2 import Phase2Module

    args = ["--config", str(config), *overrides]
    with mock.patch.object(sys, "argv", sys.argv[:1]):
        cli = RoMemCLI(Phase2Module, TemporalKGDataModule, args=args, run=False, save_config_callback=None)
    return cli.model, cli.datamodule, cli.config.get("trainer", {}).get("gradient_clip_val")


def race_clock(budget_s: float, budget_epochs: float, on_epoch):
    """A Lightning callback: counts training seconds (``spent``) and the last epoch's ``batches``, stops
    past the budget, hands each epoch to ``on_epoch(epoch, seconds, module)``."""
    import pytorch_lightning as pl

    class RaceClock(pl.Callback):
        spent, started, batches = 0.0, 0.0, 0

        def on_train_epoch_start(self, trainer, module):
            self.started = time.perf_counter()

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            done = trainer.current_epoch + (batch_idx + 1) / trainer.num_training_batches
            if self.spent + time.perf_counter() - self.started >= budget_s or done >= budget_epochs:
                trainer.should_stop = True
            self.batches = batch_idx + 1

        def on_train_epoch_end(self, trainer, module):
            self.spent += time.perf_counter() - self.started
            epoch = trainer.current_epoch + self.batches / trainer.num_training_batches
            on_epoch(round(epoch, 3), round(self.spent, 1), module)

    return RaceClock()


def race_one(config: Path, overrides: list[str], args: argparse.Namespace) -> tuple[bool, list[tuple]]:
    """Train ``config`` once (``args``: the budget and what is ranked): whether its model has a history
    term, and its evaluations ``(split, checkpoint, epoch, seconds, metrics)``: every epoch's
    validation, then the last and the best epochs' test."""
    import torch

    from rotmem.commands.demo import ensure_gate
    from rotmem.evaluation import data_poor_facts, evaluate_subsets, time_discrimination

    budget_s = math.inf if args.budget_epochs is not None else args.budget_s or 900.0
    budget_epochs = args.max_epochs if args.budget_epochs is None else args.budget_epochs
    module, data, clip = build(config, overrides)
    ensure_gate(config, data.hparams.dataset, data.hparams.data_dir)
    kg = data.kg
    best, evaluations = {"mrr": -math.inf}, []
    samples = {split: eval_sample(kg.split(split).shape[0], args.eval_facts) for split in ("valid", "test")}
    poor = data_poor_facts(kg, "test", args.data_poor_threshold)

    def on_epoch(epoch: float, seconds: float, module) -> None:
        with torch.no_grad():
            metrics = evaluate_subsets(module.model, kg, {}, "valid", rows=samples["valid"])
        evaluations.append(("valid", "epoch", epoch, seconds, metrics))
        mrr = metrics["all"]["time-aware/realistic"]["mrr"]
        if mrr > best["mrr"]:
            state = copy.deepcopy(module.model.state_dict())  # tensors and extra state
            best.update(mrr=mrr, epoch=epoch, seconds=seconds, state=state)

    def test(model) -> dict:
        with torch.no_grad():
            if samples["test"] is None:
                metrics = evaluate_subsets(model, kg, {"data-poor": poor}, "test")
            else:
                metrics = evaluate_subsets(model, kg, {}, "test", rows=samples["test"])
                if bool(poor.any()):
                    rows = poor.nonzero().squeeze(1)
                    metrics["data-poor"] = evaluate_subsets(model, kg, {}, "test", rows=rows)["all"]
            if not args.no_time_auc:
                metrics["all"]["time_auc"] = time_discrimination(model, kg, "test")["auc"]
        return metrics

    clock = race_clock(budget_s, budget_epochs, on_epoch)
    trainer = quiet_trainer(None, max_epochs=math.ceil(budget_epochs), num_sanity_val_steps=0,
                            gradient_clip_val=clip, callbacks=[clock])  # fmt: skip
    trainer.fit(module, datamodule=data)
    last_epoch = trainer.current_epoch - 1 + clock.batches / trainer.num_training_batches
    last = test(module.model)
    evaluations.append(("test", "last", round(last_epoch, 3), round(clock.spent, 1), last))
    if best["epoch"] == round(last_epoch, 3):
        best_metrics = last
    else:
        module.model.load_state_dict(best["state"])
        best_metrics = test(module.model)
    evaluations.append(("test", "best-valid", best["epoch"], best["seconds"], best_metrics))
    return getattr(module.model, "history", None) is not None, evaluations


def eval_sample(size: int, count: int | None):
    """``count`` sorted positions of ``range(size)`` (seed 0), or None (every fact)."""
    import torch

    if count is None or count >= size:
        return None
    return torch.randperm(size, generator=torch.Generator().manual_seed(0))[:count].sort().values


def csv_rows(base: dict, split: str, checkpoint: str, epoch, seconds, metrics: dict) -> list[Row]:
    """The CSV rows of one evaluation: one per subset, filter and tie rule."""
    rows = []
    for subset, by_key in metrics.items():
        auc = by_key.get("time_auc")
        for key, values in by_key.items():
            if key != "time_auc":
                kind, tie = key.split("/")
                row = base | dict(split=split, checkpoint=checkpoint, epoch=epoch, train_seconds=seconds)
                row |= dict(filter=kind, tie=tie, subset=subset, queries=values["queries"])
                row |= {m: round(values[m], 4) for m in METRICS}
                rows.append(row | {"time_auc": "" if auc is None else round(auc, 4)})
    return rows


def mean_sd(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (NaN for one value; both NaN for none)."""
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else math.nan


def summarize(rows: list[dict]) -> list[dict]:
    """Mean and sd over seeds of every test figure, with the same runs' best validation MRR."""
    groups: dict[tuple, list[dict]] = {}
    best_valid: dict[tuple, float] = {}
    for r in rows:
        if r["split"] == "test":
            groups.setdefault(tuple(r[k] for k in GROUP), []).append(r)
        elif (r["filter"], r["tie"]) == ("time-aware", "realistic"):
            key = (r["model"], r["protocol"], r["seed"])
            best_valid[key] = max(best_valid.get(key, -math.inf), float(r["mrr"]))
    out = []
    for key, members in groups.items():
        row = dict(zip(GROUP, key, strict=True)) | {"seeds": len(members), "queries": members[0]["queries"]}
        row["epoch_mean"] = round(statistics.fmean(float(m["epoch"]) for m in members), 3)
        for metric in ("mrr", "hits@10", "time_auc"):
            mean, sd = mean_sd([float(m[metric]) for m in members if m[metric] not in ("", None)])
            row[f"{metric}_mean"], row[f"{metric}_sd"] = round(mean, 4), round(sd, 4)
        valid = [best_valid.get((key[0], key[2], m["seed"])) for m in members]
        mean, sd = mean_sd([v for v in valid if v is not None])
        out.append(row | {"valid_mrr_mean": round(mean, 4), "valid_mrr_sd": round(sd, 4)})
    return out


def pm(mean: float, sd: float) -> str:
    """``0.6123 ± 0.0021`` (no sd for one seed)."""
    if math.isnan(mean):
        return "—"
    return f"{mean:.4f}" if math.isnan(sd) else f"{mean:.4f} ± {sd:.4f}"


def markdown(summary: list[dict], commands: list[str]) -> str:
    """The race table (realistic ties), one row per model and protocol."""
    found = {(s["model"], s["protocol"], s["checkpoint"], s["filter"], s["subset"]): s
             for s in summary if s["tie"] == "realistic"}  # fmt: skip
    lines = [
        "Test MRR, realistic ties, mean ± sd over seeds; `last` is the last epoch, `best valid` the epoch "
        "with the highest time-aware validation MRR; data-poor: the test facts whose relation has fewer "
        "training facts than `--data-poor-threshold` (100 unless the command says otherwise).",
        "",
        "| model | history term | protocol | seeds | epochs | valid time-aware (best) "
        "| time-aware, last | static, last | time-aware, best valid (epoch) "
        "| data-poor time-aware, last (queries) | time-AUC, last |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model, protocol in dict.fromkeys((s["model"], s["protocol"]) for s in summary):
        ta, st = (found.get((model, protocol, "last", f, "all")) for f in ("time-aware", "static"))
        best = found.get((model, protocol, "best-valid", "time-aware", "all"))
        poor = found.get((model, protocol, "last", "time-aware", "data-poor"))
        if ta is None or st is None:
            continue
        cells = [model, ta["history"], protocol, str(ta["seeds"]), f"{ta['epoch_mean']:g}",
                 pm(ta["valid_mrr_mean"], ta["valid_mrr_sd"]), pm(ta["mrr_mean"], ta["mrr_sd"]),
                 pm(st["mrr_mean"], st["mrr_sd"]),
                 "—" if best is None else f"{pm(best['mrr_mean'], best['mrr_sd'])} ({best['epoch_mean']:g})",
                 "—" if poor is None else f"{pm(poor['mrr_mean'], poor['mrr_sd'])} ({poor['queries']})",
                 pm(ta["time_auc_mean"], ta["time_auc_sd"])]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", "Commands:", "", *(f"    {c}" for c in commands)]) + "\n"


def plot(rows: list[dict], summary: list[dict], path: Path) -> None:
    """Left: validation MRR per epoch (mean ± sd band); right: the last epoch's test MRR (mean ± sd)."""
    from benchmarks.runner import save, subplots

    fig, (left, right) = subplots(1, 2, figsize=(12, 4.6))
    runs = list(dict.fromkeys((r["model"], r["protocol"]) for r in rows))
    for model, protocol in runs:
        by_epoch: dict[float, list[float]] = {}
        for r in rows:
            key = (r["model"], r["protocol"], r["split"], r["filter"], r["tie"])
            if key == (model, protocol, "valid", "time-aware", "realistic"):
                by_epoch.setdefault(float(r["epoch"]), []).append(float(r["mrr"]))
        epochs = sorted(by_epoch)
        stats = [mean_sd(by_epoch[e]) for e in epochs]
        means, sds = [m for m, _ in stats], [0.0 if math.isnan(s) else s for _, s in stats]
        (line,) = left.plot(epochs, means, marker="o", label=f"{model} ({protocol})")
        low, high = ([m + sign * s for m, s in zip(means, sds, strict=True)] for sign in (-1, 1))
        left.fill_between(epochs, low, high, alpha=0.2, color=line.get_color())
    left.set(xlabel="epoch", ylabel="validation MRR, time-aware filter, realistic ties")
    found = {(s["model"], s["protocol"], s["filter"]): s for s in summary
             if (s["checkpoint"], s["tie"], s["subset"]) == ("last", "realistic", "all")}  # fmt: skip
    for i, (model, protocol) in enumerate(runs):
        for kind, marker, color in (("time-aware", "o", "C0"), ("static", "s", "C1")):
            if (s := found.get((model, protocol, kind))) is not None:
                sd = 0.0 if math.isnan(s["mrr_sd"]) else s["mrr_sd"]
                label = kind if i == 0 else None
                right.errorbar(s["mrr_mean"], i, xerr=sd, fmt=marker, capsize=3, color=color, label=label)
    right.set_yticks(range(len(runs)), [f"{m}\n({p})" for m, p in runs], fontsize=7)
    right.set_xlabel("test MRR, last epoch, realistic ties (mean ± sd over seeds)")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    save(fig, path)


def write_outputs(rows: list[dict], out: Path) -> None:
    """``accuracy_race_summary.csv``, ``accuracy_race.md`` and ``accuracy_race.png`` from ``rows``."""
    summary = summarize(rows)
    write_csv(out / "accuracy_race_summary.csv", summary, command_line("accuracy_race"), commit_of())
    commands = list(dict.fromkeys(f"{r['command']}  # commit {r['commit']}" for r in rows))
    table = markdown(summary, commands)
    (out / "accuracy_race.md").write_text(table)
    plot(rows, summary, out / "accuracy_race.png")
    print(f"\n{table}\nwrote accuracy_race_summary.csv, .md and .png in {out}")


def read_race(path: Path) -> list[dict[str, str]]:
    """The rows of the race CSV ``path`` (a missing file ends the run with one line)."""
    if not path.is_file():
        raise SystemExit(f"accuracy_race: no such CSV {path}")
    return read_csv(path)


def plot_paper_curve(curves: list[str]) -> None:
    """The test MRR (realistic ties) of each ``CSV:MODEL`` against its training minutes, under both
    filters, beside the paper's 0.726 (static): ``paper_curve.png`` beside the first CSV. Prints each
    curve's last row per filter."""
    from benchmarks.runner import save, subplots

    fig, ax = subplots(figsize=(8, 4.5))
    for i, curve in enumerate(curves):
        path, _, model = curve.rpartition(":")
        points: dict[str, list[tuple[float, float]]] = {}  # filter -> [(training minutes, MRR)]
        for row in read_race(Path(path)):
            if row["model"] == model and row["tie"] == "realistic":
                point = (float(row["train_seconds"]) / 60, float(row["mrr"]))
                points.setdefault(row["filter"], []).append(point)
        if not points:
            raise SystemExit(f"{path}: no realistic-tie rows of model {model!r}")
        for kind, style in (("static", "-"), ("time-aware", "--")):
            minutes, mrr = [p[0] for p in points.get(kind, [])], [p[1] for p in points.get(kind, [])]
            ax.plot(minutes, mrr, style, color=f"C{3 * i}", marker=".", label=f"{model}, {kind}")
        for kind, kind_points in points.items():
            minutes, mrr = kind_points[-1]
            print(f"{model} {kind}: {mrr:.4f} after {minutes:.1f} min ({len(kind_points)} evaluations)")
    ax.axhline(PAPER_STATIC_MRR, color="grey", linestyle=":", label=f"paper, static ({PAPER_STATIC_MRR})")
    ax.set(xlabel="training minutes (2-core CPU, this machine)", ylabel="ICEWS05-15 test MRR, realistic ties")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center right")
    out = Path(curves[0].rpartition(":")[0]).with_name("paper_curve.png")
    save(fig, out)
    print(f"wrote {out}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--budget-s", type=float, help="training seconds per run (default 900)")
    budget.add_argument("--budget-epochs", type=float, help="training epochs per run (fractional)")
    parser.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS, help="config files or names")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one run per seed and config")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the runner sets them)")
    parser.add_argument("--max-epochs", type=int, default=1000, help="stop a seconds budget earlier")
    split = parser.add_mutually_exclusive_group()
    split.add_argument("--time-split", nargs=2, metavar=("VALID_FROM", "TEST_FROM"), help="re-split by date")
    split.add_argument("--hold-out-weeks", type=int, metavar="N", help="hold every N-th week out of training")
    parser.add_argument("--data", help="override the configs' dataset (e.g. synthetic)")
    parser.add_argument("--data-poor-threshold", type=int, default=100, help="fewer training facts")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", help="rotmem fit overrides")
    parser.add_argument("--eval-facts", type=int, metavar="N", help="rank a sample of N valid/test facts")
    parser.add_argument("--no-time-auc", action="store_true", help="skip time discrimination")
    parser.add_argument("--summarize", nargs="+", default=None, metavar="CSV", help="only remake the summary")
    parser.add_argument("--paper-curve", nargs="*", metavar="CSV:MODEL", help="only draw the curves")


def measure(args: argparse.Namespace) -> Iterator[Row]:
    from rotmem import configs

    overrides, protocol, weeks = [], "standard", args.hold_out_weeks
    if args.time_split:
        overrides, protocol = ["--data.time_split", str(list(args.time_split))], "time-split"
    if weeks is not None:
        overrides, protocol = ["--data.hold_out_weeks", str(weeks)], f"hold-out-weeks-{weeks}"
    overrides += ["--data.dataset", args.data] if args.data else []
    for item in args.set:
        key, _, value = item.partition("=")
        overrides += [f"--{key}", value]
    for config in map(configs.resolve, args.configs):
        for seed in args.seeds:
            seeded = [*overrides, "--seed_everything", str(seed), "--data.seed", str(seed)]
            history, evaluations = race_one(config, seeded, args)
            run = dict(model=config.stem, config=config.name, seed=seed, history="yes" if history else "no")
            for evaluation in evaluations:
                rows = csv_rows(run | {"protocol": protocol}, *evaluation)
                yield from (row | {"threads": args.threads} for row in rows)


SPEC = Benchmark("accuracy_race", __doc__, measure, add_arguments, out_dir=RESULTS / "accuracy_race",
                 partial=True, env=("OMP_NUM_THREADS", "ROTMEM_DATA_DIR"))  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    args = SPEC.parser().parse_args(argv)
    if args.paper_curve is not None:
        plot_paper_curve(args.paper_curve or PAPER_CURVES)
    elif args.summarize:
        write_outputs([row for path in args.summarize for row in read_race(Path(path))], args.out_dir)
    else:
        SPEC.run(args, command_line("accuracy_race", argv, SPEC.env))
        write_outputs(read_csv(SPEC.out_path(args)), args.out_dir)


if __name__ == "__main__":
    main()
