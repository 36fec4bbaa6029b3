"""``rotmem gate``: pretrain the Semantic Speed Gate (Phase 1) and query it.

``rotmem gate pretrain --data icews05-15 [--data-dir D] [--config FILE] [--out DIR]`` mines
transitions from the training split, fits the gate and writes ``DIR/gate.pt``, ``DIR/alpha.csv``
(relation, alpha, change_rate, pairs) and ``DIR/transitions.json`` (mining summary and fit).
``DIR`` defaults to ``~/.cache/rotmem/gates/<dataset>/``, where Phase-2 configs look for it.
Without ``--config`` the settings are those of the packaged config ``gate-icews05-15`` (the paper's filters
and loss; Adam 1e-2 for 200 epochs instead of the paper's 5e-4 x 100, which underfits MiniLM; each
relation embedded as the sentence "They <relation>.").

``rotmem gate alpha --gate DIR/gate.pt "Make a visit" "pay a visit to"`` prints speeds of any strings.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import warnings
from pathlib import Path

import torch

from rotmem.data.registry import cache_root


def default_gate_dir(dataset: str) -> Path:
    """``~/.cache/rotmem/gates/<dataset>/``: where ``rotmem gate pretrain`` writes by default."""
    return cache_root() / "gates" / Path(dataset).name


def register(subparsers) -> None:
    parser = subparsers.add_parser("gate", help="pretrain or query the Semantic Speed Gate")
    sub = parser.add_subparsers(dest="gate_command", required=True, metavar="ACTION")

    pretrain = sub.add_parser("pretrain", help="Phase 1: fit the gate to transitions of a training split")
    pretrain.add_argument("--config", help="a YAML file or a packaged config name (e.g. gate-icews05-15)")
    pretrain.add_argument("--data", help="dataset name or directory (default: the config's, else icews05-15)")
    pretrain.add_argument(
        "--data-dir", help="folder that holds the dataset (default: $ROTMEM_DATA_DIR, cache)"
    )
    pretrain.add_argument("--out", help="output folder (default: ~/.cache/rotmem/gates/<dataset>/)")
    pretrain.add_argument("--encoder", help="sentence-transformers model name or local folder")
    pretrain.add_argument("--epochs", type=int, help="full-batch epochs (default 200)")
    pretrain.add_argument("--lr", type=float, help="Adam learning rate (default 1e-2; the paper's 5e-4)")
    pretrain.add_argument(
        "--template",
        help='sentence each relation is embedded in (default "They {relation}."; bare text: "{relation}")',
    )
    pretrain.add_argument("--seed", type=int, help="random seed (default 0)")
    pretrain.set_defaults(run=run_pretrain)

    alpha = sub.add_parser("alpha", help="print the speed alpha of relation strings")
    alpha.add_argument("--gate", required=True, help="a gate.pt written by `rotmem gate pretrain`")
    alpha.add_argument("texts", nargs="+", help="relation strings")
    alpha.set_defaults(run=run_alpha)


def lightning_args(args: argparse.Namespace) -> list[str]:
    """The command's options as GateCLI arguments (explicit options override the config)."""
    from rotmem import configs

    argv = ["--config", str(configs.resolve(args.config))] if args.config else []
    overrides = {
        "--data.dataset": args.data,
        "--data.data_dir": args.data_dir,
        "--data.encoder": args.encoder,
        "--data.template": args.template,
        "--trainer.max_epochs": args.epochs,
        "--model.lr": args.lr,
        "--seed_everything": args.seed,
    }
    for flag, value in overrides.items():
        if value is not None:
            argv += [flag, str(value)]
    if args.seed is not None:
        argv += ["--data.seed", str(args.seed)]
    return argv


def run_pretrain(args: argparse.Namespace) -> int:
    from rotmem.extras import require, require_training

    require_training("rotmem gate pretrain")
    require("sentence_transformers", "rotmem gate pretrain (the relation encoder)")
    from lightning_modules.phase1_gate import (
        TRAINER_DEFAULTS,
        GateCLI,
        GatePretrainModule,
        GateTransitionData,
    )

    with warnings.catch_warnings():
        # our own argv is the `rotmem gate ...` line; the LightningCLI arguments are built from it
        warnings.filterwarnings("ignore", message="LightningCLI's args parameter")
        cli = GateCLI(
            GatePretrainModule,
            GateTransitionData,
            args=lightning_args(args),
            run=False,
            trainer_defaults=TRAINER_DEFAULTS,
            seed_everything_default=0,
            save_config_callback=None,
        )
    data = cli.datamodule
    out = Path(args.out) if args.out else default_gate_dir(data.kg.name)
    print(f"mined from {data.kg.name} (train split only): {json.dumps(data.transitions.summary())}")
    cli.trainer.fit(cli.model, datamodule=data)
    report = write_outputs(out, cli.model, data)
    print(f"loss {report['loss_initial']:.4f} -> {report['loss_final']:.4f}, s_pre {report['s_pre']:.5f}/day")
    rows = sorted(alpha_rows(cli.model.gate, data), key=lambda row: row["alpha"])
    for label, part in (("most static", rows[:5]), ("most dynamic", rows[::-1][:5])):
        print(f"{label}: " + "; ".join(f"{row['relation']} {row['alpha']:.3f}" for row in part))
    print(f"wrote {out / 'gate.pt'}, {out / 'alpha.csv'}, {out / 'transitions.json'}")
    return 0


def alpha_rows(gate, data) -> list[dict]:
    """One row per relation of ``data.kg``: alpha, and the observed change rate and pair count on train."""
    with torch.no_grad():
        alpha = gate(data.embeddings.to(next(gate.parameters()).device)).cpu()
    pairs, rate = data.all_transitions.per_relation()
    return [
        {
            "relation": name,
            "alpha": float(alpha[i]),
            "change_rate": None if math.isnan(float(rate[i])) else float(rate[i]),
            "pairs": int(pairs[i]),
        }
        for i, name in enumerate(data.kg.relations)
    ]


def write_outputs(out: Path, module, data) -> dict:
    """Write ``gate.pt``, ``alpha.csv`` and ``transitions.json`` into ``out``; return the fit report."""
    out.mkdir(parents=True, exist_ok=True)
    report = {
        "dataset": data.kg.name,
        "encoder": data.encoder,
        "template": data.template,
        "mining": data.transitions.summary(),
        "epochs": len(module.losses),
        "lr": float(module.hparams.lr),
        "loss_initial": module.losses[0] if module.losses else float("nan"),
        "loss_final": module.losses[-1] if module.losses else float("nan"),
        "s_pre": float(module.scale.detach()),
    }
    module.gate.cpu().save(out / "gate.pt", **report)
    with open(out / "alpha.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["relation", "alpha", "change_rate", "pairs"])
        writer.writeheader()
        for row in alpha_rows(module.gate, data):
            writer.writerow({**row, "change_rate": "" if row["change_rate"] is None else row["change_rate"]})
    (out / "transitions.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def run_alpha(args: argparse.Namespace) -> int:
    from rotmem.gate import SemanticSpeedGate

    gate = SemanticSpeedGate.load(args.gate)
    with torch.no_grad():
        alpha = gate.alpha(args.texts)
    for text, value in zip(args.texts, alpha.tolist(), strict=True):
        print(f"{value:.4f}\t{text}")
    return 0
