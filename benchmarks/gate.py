"""The Semantic Speed Gate's benchmarks, one section per run, each with its own options and CSVs.

``report``: how the gate tracks how fast relations change; ``paraphrases``: its consistency with and
without anchors; ``ablation``: where Phase 2's speeds come from.

ROTMEM_DATA_DIR=../shared/data python -m benchmarks.gate report            # ~7 min on 2 cores
python -m benchmarks.gate report --seeds 3 --skip-paper                   # quick
ROTMEM_DATA_DIR=../shared/data python -m benchmarks.gate paraphrases [--gate gate.pt]
rotmem gate pretrain --data icews05-15                 # the default gate (once), then
ROTMEM_DATA_DIR=../shared/data python -m benchmarks.gate ablation   # ~25 min per variant on 2 cores
python -m benchmarks.gate ablation --variants gate no-gate --config synthetic \\
    --gate ~/.cache/rotmem/gates/synthetic/gate.pt --out benchmarks/results/gate_ablation_synthetic.csv
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.gate (from the checkout's root)")

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import yaml
from scipy.stats import spearmanr

from benchmarks.runner import Benchmark, Row, command_line, commit_of, save, subplots, write_csv
from benchmarks.temporal_qa.phrasings import PHRASINGS
from lightning_modules.phase1_gate import GateTransitionData, pretrain_gate
from rotmem import configs
from rotmem.data import load_dataset, synthetic_kg
from rotmem.gate import SemanticSpeedGate, mine_transitions
from rotmem.gate.anchors import AnchoredSpeeds, anchors_for, choose_temperature, read_paraphrases
from rotmem.gate.speed_gate import BARE_TEMPLATE, DEFAULT_TEMPLATE

MIN_PAIRS = 20


# --- report --- (ICEWS05-15 relation, a paraphrase written by hand)
PARAPHRASES = [
    ("Make a visit", "pay a visit to"),
    ("Host a visit", "receive a visiting delegation from"),
    ("Consult", "hold consultations with"),
    ("Make statement", "issue a statement about"),
    ("Praise or endorse", "speak approvingly of"),
    ("Criticize or denounce", "condemn"),
    ("Arrest, detain, or charge with legal action", "take into custody"),
    ("Sign formal agreement", "sign an agreement with"),
    ("Use conventional military force", "carry out a military attack on"),
    ("Express intent to meet or negotiate", "say they are willing to hold talks with"),
    ("Make an appeal or request", "ask for help from"),
    ("Accuse", "level accusations against"),
    ("Engage in negotiation", "negotiate with"),
    ("Threaten", "issue threats against"),
    ("Demand", "make demands of"),
    ("Discuss by telephone", "talk on the phone with"),
    ("Reject", "turn down"),
]


def setting_from_config(name: str | Path) -> dict:
    """The Phase-1 setting of a gate config (a packaged name or a file)."""
    path = configs.resolve(name)
    config = yaml.safe_load(path.read_text())
    data = {k: v for k, v in config["data"].items() if k not in ("dataset", "data_dir")}
    return {
        "name": path.stem,
        "lr": float(config["model"]["lr"]),
        "epochs": int(config["trainer"]["max_epochs"]),
        "seed": int(config.get("seed_everything", 0)),
        "data": data,
    }


def fit(kg, setting: dict, train_relations: list[str] | None = None):
    data = GateTransitionData(kg=kg, train_relations=train_relations, **setting["data"])
    module = pretrain_gate(data, lr=setting["lr"], seed=setting["seed"], max_epochs=setting["epochs"])
    with torch.no_grad():
        alpha = module.gate(data.embeddings)
    return data, module, alpha


def spearman(alpha: torch.Tensor, rate: torch.Tensor, relations: torch.Tensor) -> float:
    """Spearman's rho, to 3 decimals, of ``alpha [R]`` against the change ``rate [R]`` over
    ``relations`` (ids, or a mask [R]); NaN for fewer than 3."""
    x, y = alpha[relations].numpy(), rate[relations].numpy()
    return round(float(spearmanr(x, y).statistic), 3) if len(x) > 2 else float("nan")


def correlations(
    alpha: torch.Tensor, rate: torch.Tensor, pairs: torch.Tensor, ids: torch.Tensor, count: str
) -> Row:
    """``{count: len(ids), spearman, count_ge20, spearman_ge20}``: ``spearman`` over the relations
    ``ids`` and over those of them with at least ``MIN_PAIRS`` mined pairs (``pairs [R]``)."""
    many, ge = ids[pairs[ids] >= MIN_PAIRS], f"_ge{MIN_PAIRS}"
    rho, rho_many = spearman(alpha, rate, ids), spearman(alpha, rate, many)
    return {count: len(ids), "spearman": rho, count + ge: len(many), "spearman" + ge: rho_many}


def evaluate_setting(kg, setting: dict, seeds: int):
    """(summary, zero-shot rows, α [R], the data, the fitted module) of one Phase-1 setting."""
    data, module, alpha = fit(kg, setting)
    pairs, rate = data.all_transitions.per_relation()
    with_pairs = torch.nonzero(pairs > 0).squeeze(1)
    summary = {
        "setting": setting["name"],
        "template": setting["data"].get("template", DEFAULT_TEMPLATE),
        "lr": setting["lr"],
        "epochs": setting["epochs"],
        "loss_final": round(module.losses[-1], 4),
        **correlations(alpha, rate, pairs, with_pairs, "relations"),
    }
    zero_shot = []
    for seed in range(seeds):
        order = with_pairs[torch.randperm(len(with_pairs), generator=torch.Generator().manual_seed(seed))]
        held, seen = order[: round(0.2 * len(order))], order[round(0.2 * len(order)) :]
        _, _, zs_alpha = fit(kg, setting, [kg.relations[i] for i in seen.tolist()])
        split = correlations(zs_alpha, rate, pairs, held, "held_out")
        zero_shot.append({"setting": setting["name"], "seed": seed, **split})
        print(f"  zero-shot seed {seed}: {zero_shot[-1]}", flush=True)
    for key in ("spearman", f"spearman_ge{MIN_PAIRS}"):
        values = [row[key] for row in zero_shot]
        summary[f"zero_shot_{key}_mean"] = round(statistics.fmean(values), 3)
        summary[f"zero_shot_{key}_sd"] = round(statistics.pstdev(values), 3)
    summary["zero_shot_seeds"] = seeds
    return summary, zero_shot, alpha, data, module


def plot_alpha(alpha: torch.Tensor, data: GateTransitionData, spearman_all: float, path: Path) -> None:
    """α against the change rate, and the sorted α of the ``top`` most static and dynamic relations."""
    pairs, rate = data.all_transitions.per_relation()
    has, top = pairs > 0, 12
    fig, (left, right) = subplots(1, 2, figsize=(15, 7), gridspec_kw={"width_ratios": [1, 1.25]})
    left.scatter(rate[has], alpha[has], s=8 + 6 * torch.log1p(pairs[has].float()), alpha=0.6)
    left.set_xlabel("observed change rate of the relation's slots (train split)")
    left.set_ylabel("gate speed α")
    left.set_title(
        f"{data.kg.name}: α vs change rate, {int(has.sum())} relations (Spearman {spearman_all:.2f})"
    )
    order = torch.argsort(alpha[has])
    names = [data.kg.relations[i] for i in torch.nonzero(has).squeeze(1)[order].tolist()]
    values = alpha[has][order].tolist()
    picked = list(range(top)) + list(range(len(values) - top, len(values)))
    labels = [names[i][:48] for i in picked]
    colors = ["tab:blue"] * top + ["tab:red"] * top
    right.barh(range(len(picked)), [values[i] for i in picked], color=colors)
    right.set_yticks(range(len(picked)), labels, fontsize=8)
    right.axhline(top - 0.5, color="grey", lw=0.8, ls="--")
    right.set_xlabel("gate speed α")
    right.set_title(f"sorted α: the {top} most static (blue) and {top} most dynamic (red) relations")
    save(fig, path)
    print(f"wrote {path}")


def report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default="icews05-15")
    parser.add_argument("--data-dir")
    parser.add_argument("--config", default=str(configs.resolve("gate-icews05-15")))
    parser.add_argument("--seeds", type=int, default=20, help="zero-shot splits")
    parser.add_argument("--skip-paper", action="store_true", help="only the config's (no bare text, paper)")


def alpha_rows(alpha: torch.Tensor, data: GateTransitionData) -> list[Row]:
    pairs, rate = data.all_transitions.per_relation()
    return [{"relation": name, "alpha": round(float(alpha[i]), 5),
             "change_rate": "" if pairs[i] == 0 else round(float(rate[i]), 5), "pairs": int(pairs[i])}
            for i, name in enumerate(data.kg.relations)]  # fmt: skip


def report(args: argparse.Namespace) -> Iterator[Row]:
    def write(name: str, rows: list[Row]) -> None:
        write_csv(args.out_dir / name, rows, command_line("gate", env=DATA_DIR), commit_of())

    kg = load_dataset(args.data, args.data_dir)
    main_setting = setting_from_config(args.config)
    settings = [main_setting]
    if not args.skip_paper:
        bare = {**main_setting["data"], "template": BARE_TEMPLATE}
        settings.append({**main_setting, "name": f"{main_setting['name']}, bare text", "data": bare})
        settings.append(setting_from_config("gate-icews05-15-paper"))
    evaluated = []  # (summary, zero-shot rows, α, data, module) per setting, the config's first
    for setting in settings:
        print(f"setting {setting['name']}: lr {setting['lr']}, {setting['epochs']} epochs", flush=True)
        evaluated.append(evaluate_setting(kg, setting, args.seeds))
        yield evaluated[-1][0]
    write(f"gate_zero_shot_{kg.name}.csv", [row for _, zero_shot, *_ in evaluated for row in zero_shot])
    main_summary, _, main_alpha, main_data, main_module = evaluated[0]
    write(f"gate_alpha_{kg.name}.csv", alpha_rows(main_alpha, main_data))
    plot_alpha(main_alpha, main_data, main_summary["spearman"], args.out_dir / f"gate_alpha_{kg.name}.png")

    # Paraphrases: the gate trained on all relations (config setting), α of text it never saw.
    unknown = [a for a, _ in PARAPHRASES if a not in kg.relations]
    if unknown:
        raise SystemExit(f"paraphrase table names relations not in {kg.name}: {unknown}")
    with torch.no_grad():
        a_orig = main_module.gate.alpha([a for a, _ in PARAPHRASES])
        a_para = main_module.gate.alpha([b for _, b in PARAPHRASES])
    rows = [{"relation": a, "paraphrase": b, "alpha_relation": round(float(x), 4),
             "alpha_paraphrase": round(float(y), 4), "abs_diff": round(abs(float(x) - float(y)), 4)}
            for (a, b), x, y in zip(PARAPHRASES, a_orig, a_para, strict=True)]  # fmt: skip
    write(f"gate_paraphrases_{kg.name}.csv", rows)
    args.notes.append(f"paraphrases within 0.15: {sum(r['abs_diff'] <= 0.15 for r in rows)}/{len(rows)}")

    # The synthetic KG: static vs dynamic relations, with its own config.
    syn = synthetic_kg().kg
    syn_data, _, syn_alpha = fit(syn, setting_from_config("gate-synthetic"))
    write("gate_alpha_synthetic.csv", alpha_rows(syn_alpha, syn_data))


# --- paraphrases ---
def pretrain_icews_gate(path: Path) -> Path:
    """A Phase-1 gate on the ICEWS05-15 training split (the packaged gate-icews05-15 settings), saved at
    ``path`` (also the temporal-QA benchmark's gate)."""
    _, module, _ = fit(None, setting_from_config("gate-icews05-15"))
    module.gate.save(path, source="benchmarks.temporal_qa: gate-icews05-15 on the ICEWS05-15 train split")
    return path


def paraphrases_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gate", type=Path, help="a saved gate (default: pretrain gate-icews05-15 by --out)")
    parser.add_argument("--data-dir")


def paraphrases(args: argparse.Namespace) -> Iterator[Row]:
    kg = load_dataset("icews05-15", args.data_dir)
    gate = SemanticSpeedGate.load(args.gate or pretrain_icews_gate(args.out.with_name("gate_icews05-15.pt")))
    paraphrases = read_paraphrases()
    anchors = anchors_for(kg.relations, paraphrases)
    temperature, loo_max = choose_temperature(gate, anchors, paraphrases)
    anchored = AnchoredSpeeds(gate, anchors, temperature)
    templates = {(r, p.base) for r, p in PHRASINGS.items()}

    pairs, rate = mine_transitions(kg.train, kg.num_relations).per_relation()
    relations = kg.relations
    with torch.no_grad():
        alphas = {"plain": gate.alpha(relations), "anchored": anchored.alpha(relations)}
    plain_rel, anchored_rel = (dict(zip(relations, a.tolist(), strict=True)) for a in alphas.values())

    rows: list[Row] = []
    for p in paraphrases:
        with torch.no_grad():
            plain = float(gate.alpha([p.text])[0])
        exclude = [p.text] if p.split == "train" else []
        anch = float(anchored.alpha([p.text], exclude=exclude)[0])
        rows.append(dict(
            family=p.family, relation=p.relation, phrasing=p.text, split=p.split,
            template=(p.relation, p.text) in templates,
            alpha_relation_plain=round(plain_rel[p.relation], 4), alpha_plain=round(plain, 4),
            gap_plain=round(abs(plain - plain_rel[p.relation]), 4),
            alpha_relation_anchored=round(anchored_rel[p.relation], 4), alpha_anchored=round(anch, 4),
            gap_anchored=round(abs(anch - anchored_rel[p.relation]), 4),
        ))  # fmt: skip

    summary = []
    sets = {
        "heldout": lambda r: r["split"] == "heldout",
        "heldout templates": lambda r: r["template"],
        "train (leave-one-out)": lambda r: r["split"] == "train",
    }
    for method, alpha_rel in alphas.items():
        for name, keep in sets.items():
            gaps = [r[f"gap_{method}"] for r in rows if keep(r)]
            summary.append(dict(
                method=method, phrasings=name, n=len(gaps),
                median_gap=round(statistics.median(gaps), 4), max_gap=round(max(gaps), 4),
                spearman_change_rate=spearman(alpha_rel, rate, pairs >= 1),
                **{f"spearman_ge{MIN_PAIRS}": spearman(alpha_rel, rate, pairs >= MIN_PAIRS)},
                temperature=temperature if method == "anchored" else "",
                loo_max_gap_by_temperature=str(loo_max) if method == "anchored" else "",
            ))  # fmt: skip
    write_csv(args.out.with_name("gate_paraphrase_summary.csv"), summary, command_line("gate"), commit_of())
    args.notes += [str(s) for s in summary]
    yield from rows


# --- ablation ---
VARIANTS = {  # the arguments each variant adds to the config's (``args``: the section's options)
    "gate": lambda args: ["--model.family.speed", "gate", "--model.gate_path", args.gate],
    "no-gate": lambda args: ["--config", str(configs.resolve("ablation-no-gate"))],
    "learned": lambda args: ["--config", str(configs.resolve("ablation-learned-alpha"))],
    "gate-paper": lambda args: ["--model.family.speed", "gate", "--model.gate_path", args.paper_gate],
}
METRICS = ("mrr", "hits@1", "hits@3", "hits@10")


def ablation_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=str(configs.resolve("icews05-15-cpu")))
    parser.add_argument(
        "--variants", nargs="+", default=["gate", "no-gate", "learned"], choices=list(VARIANTS)
    )
    parser.add_argument("--gate", default="~/.cache/rotmem/gates/icews05-15/gate.pt")
    parser.add_argument("--paper-gate", default="~/.cache/rotmem/gates/icews05-15-paper/gate.pt")


def ablation(args: argparse.Namespace) -> Iterator[Row]:
    """Per variant: ``rotmem fit`` of the config, then test of its best-validation checkpoint."""
    from lightning_modules.cli import run_lightning_cli

    with tempfile.TemporaryDirectory() as logs:
        for variant in args.variants:
            start = time.time()
            config = ["--config", str(configs.resolve(args.config)), *VARIANTS[variant](args)]
            log_dir = ["--trainer.logger.init_args.save_dir", f"{logs}/{variant}"]
            cli = run_lightning_cli(["fit", *config, "--trainer.enable_progress_bar", "false", *log_dir])
            fit_seconds = time.time() - start
            trainer = cli.trainer
            result = trainer.test(cli.model, datamodule=cli.datamodule, ckpt_path="best", verbose=False)[0]
            row = {"variant": variant, "config": Path(args.config).name, "epochs": trainer.max_epochs}
            for kind in ("time-aware", "static"):
                row.update({f"{kind}/{m}": round(float(result[f"test/{kind}/{m}"]), 4) for m in METRICS})
            yield row | {"fit_seconds": round(fit_seconds, 1)}


DATA_DIR, BOTH = ("ROTMEM_DATA_DIR",), ("OMP_NUM_THREADS", "ROTMEM_DATA_DIR")
SECTIONS = {
    "report": Benchmark("gate report", __doc__, report, report_arguments, out_dir=True, env=DATA_DIR,
                        csv_name=lambda args: f"gate_summary_{args.data}"),
    "paraphrases": Benchmark("gate paraphrases", __doc__, paraphrases, paraphrases_arguments,
                             csv_name="gate_paraphrases_anchored"),
    "ablation": Benchmark("gate ablation", __doc__, ablation, ablation_arguments, env=BOTH,
                          csv_name="gate_ablation_icews05-15-cpu"),
}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """``python -m benchmarks.gate SECTION [options]``: that section's spec (``SECTION --help``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in SECTIONS:
        raise SystemExit(f"usage: python -m benchmarks.gate {{{','.join(SECTIONS)}}} [options]")
    SECTIONS[argv[0]].main(argv[1:])


if __name__ == "__main__":
    main()
