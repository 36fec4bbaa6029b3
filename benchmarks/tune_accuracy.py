"""Tune a packaged config's training settings on validation with Optuna (TPE, median pruning).

    ROTMEM_DATA_DIR=../shared/data python -m benchmarks.tune_accuracy \\
        --config icews05-15-romem-complex-rules --trials 12 --epochs 4 --threads 1
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.tune_accuracy (from the checkout's root)")

import argparse
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import yaml

from benchmarks.runner import Benchmark, Row
from rotmem import configs, load_dataset
from rotmem.evaluation import evaluate_all
from rotmem.losses import Objective
from rotmem.models import HistorySpec
from rotmem.training import TrainConfig, build_family, fit

SPACE = (
    "lr (log 0.02-0.3), regularizer_weight (log 1e-4-1e-2), dim {128, 256, 512}, batch_size {500, 1000}; "
    "the config's own settings as trial 0"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", default="icews05-15-romem-complex-rules", help="a packaged config or a file"
    )
    parser.add_argument("--data", help="override the config's dataset (e.g. synthetic)")
    parser.add_argument("--trials", type=int, default=12, help="new trials to run (0: only write the CSV)")
    parser.add_argument("--epochs", type=int, default=4, help="most epochs a trial trains")
    parser.add_argument("--threads", type=int, help="torch CPU threads while training")
    parser.add_argument("--seed", type=int, default=0, help="the sampler's and the trials' seed")


def train_trial(trial, args: argparse.Namespace, settings: dict) -> float:
    """Train one trial with the settings Optuna suggests around the config's (``SPACE``); its best
    validation time-aware MRR (realistic ties). Each epoch's figures go to the trial's user attributes,
    so the CSV has the curve of pruned trials too."""
    import optuna

    model_settings, data = settings["model"], settings["data"]
    kg = load_dataset(args.data or data["dataset"])
    family = {**model_settings["family"], "init_args": dict(model_settings["family"].get("init_args") or {})}
    family["init_args"]["dim"] = trial.suggest_categorical("dim", [128, 256, 512])
    regularizer_weight = trial.suggest_float("regularizer_weight", 1e-4, 1e-2, log=True)
    lr = trial.suggest_float("lr", 0.02, 0.3, log=True)
    batch_size = trial.suggest_categorical("batch_size", [500, 1000])
    history = model_settings.get("history")
    config = TrainConfig(
        family=family,
        history=HistorySpec(**history) if history else None,
        objective=Objective(
            regularizer=model_settings.get("regularizer", "l4"),
            regularizer_weight=regularizer_weight,
            time_weight=model_settings.get("time_weight", 0.0),
            smoothness_weight=model_settings.get("smoothness_weight", 0.0),
        ),
        optimizer=model_settings.get("optimizer", "adagrad"),
        lr=lr,
        epochs=args.epochs,
        batch_size=batch_size,
        seed=args.seed,
        sigma_years=model_settings.get("sigma_years", 0.5),
        num_negative_times=data.get("num_negative_times", 0),
        clip_norm=settings.get("trainer", {}).get("gradient_clip_val"),
        threads=args.threads,
    )
    torch.manual_seed(args.seed)
    model = build_family(config.family, kg, config.history)
    best, start, ranking = 0.0, time.perf_counter(), 0.0

    def on_epoch(epoch: int, loss: float) -> bool:
        nonlocal best, ranking
        train_seconds = time.perf_counter() - start - ranking  # training only
        ranked = time.perf_counter()
        metrics = evaluate_all(model, kg, "valid")
        ranking += time.perf_counter() - ranked
        mrr = metrics["time-aware/realistic"]["mrr"]
        trial.set_user_attr(
            f"epoch_{epoch}",
            {"loss": loss, "valid_mrr": mrr, "valid_static_mrr": metrics["static/realistic"]["mrr"],
             "seconds": round(train_seconds, 1)},
        )  # fmt: skip
        best = max(best, mrr)
        trial.report(mrr, epoch)
        print(
            f"trial {trial.number} epoch {epoch}: loss {loss:.4f}, valid time-aware MRR {mrr:.4f}", flush=True
        )
        return trial.should_prune()

    fit(model, kg, config, on_epoch)
    if trial.should_prune():
        raise optuna.TrialPruned()
    return best


def study_rows(study) -> Iterator[Row]:
    """One row per trial and epoch, in trial order."""
    for trial in study.trials:
        attrs = trial.user_attrs.items()
        epochs = sorted((int(k.removeprefix("epoch_")), v) for k, v in attrs if k.startswith("epoch_"))
        params = {
            name: trial.params.get(name, "") for name in ("lr", "regularizer_weight", "dim", "batch_size")
        }
        for epoch, figures in epochs:
            yield {"trial": trial.number, "baseline": bool(trial.user_attrs.get("baseline")),
                   "state": trial.state.name.lower(), **params, "epoch": epoch, **figures,
                   "best_valid_mrr": trial.value if trial.value is not None else ""}  # fmt: skip


def measure(args: argparse.Namespace) -> Iterator[Row]:
    try:
        import optuna
    except ImportError:
        raise SystemExit("tune_accuracy needs Optuna: pip install optuna (or rotmem[dev])") from None
    settings = yaml.safe_load(configs.resolve(args.config).read_text())
    if settings["model"].get("gate_path"):
        raise SystemExit(
            f"benchmarks.tune_accuracy: {args.config} loads a pretrained gate (gate_path); "
            "tune a config without one"
        )
    journal = args.out.with_suffix(".journal")
    journal.parent.mkdir(parents=True, exist_ok=True)
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))
    study = optuna.create_study(
        study_name=Path(str(args.config)).stem,
        storage=storage,
        load_if_exists=True,
        direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=args.seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1),
    )
    if not study.trials:  # the config's own settings first: the baseline, measured in the same study
        family = settings["model"]["family"].get("init_args") or {}
        study.enqueue_trial(
            {"dim": family.get("dim"), "regularizer_weight": settings["model"].get("regularizer_weight"),
             "lr": settings["model"].get("lr"), "batch_size": settings["data"].get("batch_size")},
            user_attrs={"baseline": True},
        )  # fmt: skip
    study.optimize(lambda trial: train_trial(trial, args, settings), n_trials=args.trials)
    yield from study_rows(study)


def summarize(rows: list[Row]) -> list[str]:
    """The best trial and its settings, the search space, how many trials were pruned."""
    done = [r for r in rows if r["best_valid_mrr"] != ""]
    trials = {r["trial"]: r for r in rows}
    pruned = sum(r["state"] == "pruned" for r in trials.values())
    lines = [f"search space: {SPACE}", f"{len(trials)} trials, {pruned} pruned"]
    if done:
        best = max(done, key=lambda r: float(r["best_valid_mrr"]))
        lines.append(
            f"best: trial {best['trial']}, valid time-aware MRR {float(best['best_valid_mrr']):.4f} "
            f"(best epoch), lr {float(best['lr']):.4g}, N3 {float(best['regularizer_weight']):.3g}, "
            f"dim {best['dim']}, batch {best['batch_size']}"
        )
    return lines


SPEC = Benchmark(
    "tune_accuracy", __doc__, measure, add_arguments, summarize, csv_name="accuracy_tuning/study"
)

if __name__ == "__main__":
    SPEC.main()
