"""How well the Semantic Speed Gate tracks how fast relations change, on seen and unseen relations.

ROTMEM_DATA_DIR=../shared/data python -m benchmarks.gate_report            # ~7 min on 2 cores
python -m benchmarks.gate_report --seeds 3 --skip-paper                   # quick
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.gate_report (from the checkout's root)")

import argparse
import statistics
from collections.abc import Iterator
from pathlib import Path

import torch
import yaml
from scipy.stats import spearmanr

from benchmarks.runner import Benchmark, Row, command_line, commit_of, save, subplots, write_csv
from lightning_modules.phase1_gate import GateTransitionData, pretrain_gate
from rotmem import configs
from rotmem.data import load_dataset, synthetic_kg
from rotmem.gate.speed_gate import BARE_TEMPLATE, DEFAULT_TEMPLATE

MIN_PAIRS = 20

# (ICEWS05-15 relation, a paraphrase written by hand)
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


def setting_from_config(path: Path) -> dict:
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


def spearman(alpha: torch.Tensor, rate: torch.Tensor, ids: torch.Tensor) -> float:
    return float(spearmanr(alpha[ids].numpy(), rate[ids].numpy()).statistic) if len(ids) > 2 else float("nan")


def evaluate_setting(kg, setting: dict, seeds: int):
    """(summary, zero-shot rows, α [R], the data, the fitted module) of one Phase-1 setting."""
    data, module, alpha = fit(kg, setting)
    pairs, rate = data.all_transitions.per_relation()
    with_pairs = torch.nonzero(pairs > 0).squeeze(1)
    many = torch.nonzero(pairs >= MIN_PAIRS).squeeze(1)
    summary = {
        "setting": setting["name"],
        "template": setting["data"].get("template", DEFAULT_TEMPLATE),
        "lr": setting["lr"],
        "epochs": setting["epochs"],
        "loss_final": round(module.losses[-1], 4),
        "relations": len(with_pairs),
        "spearman": round(spearman(alpha, rate, with_pairs), 3),
        f"relations_ge{MIN_PAIRS}": len(many),
        f"spearman_ge{MIN_PAIRS}": round(spearman(alpha, rate, many), 3),
    }
    zero_shot = []
    for seed in range(seeds):
        order = with_pairs[torch.randperm(len(with_pairs), generator=torch.Generator().manual_seed(seed))]
        held, seen = order[: round(0.2 * len(order))], order[round(0.2 * len(order)) :]
        _, _, zs_alpha = fit(kg, setting, [kg.relations[i] for i in seen.tolist()])
        held_many = held[pairs[held] >= MIN_PAIRS]
        rho, rho_many = (round(spearman(zs_alpha, rate, ids), 3) for ids in (held, held_many))
        row = {"setting": setting["name"], "seed": seed, "held_out": len(held), "spearman": rho}
        zero_shot.append(
            row | {f"held_out_ge{MIN_PAIRS}": len(held_many), f"spearman_ge{MIN_PAIRS}": rho_many}
        )
        print(f"  zero-shot seed {seed}: {zero_shot[-1]}", flush=True)
    for key in ("spearman", f"spearman_ge{MIN_PAIRS}"):
        values = [row[key] for row in zero_shot]
        summary[f"zero_shot_{key}_mean"] = round(statistics.fmean(values), 3)
        summary[f"zero_shot_{key}_sd"] = round(statistics.pstdev(values), 3)
    summary["zero_shot_seeds"] = seeds
    return summary, zero_shot, alpha, data, module


def plot(
    alpha: torch.Tensor, data: GateTransitionData, spearman_all: float, path: Path, top: int = 12
) -> None:
    pairs, rate = data.all_transitions.per_relation()
    has = pairs > 0
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default="icews05-15")
    parser.add_argument("--data-dir")
    parser.add_argument("--config", default=str(configs.resolve("gate-icews05-15")))
    parser.add_argument("--seeds", type=int, default=20, help="zero-shot splits")
    parser.add_argument(
        "--skip-paper", action="store_true", help="only the config's setting (no bare text, paper)"
    )


def alpha_rows(kg, alpha: torch.Tensor, data: GateTransitionData) -> list[Row]:
    pairs, rate = data.all_transitions.per_relation()
    return [{"relation": name, "alpha": round(float(alpha[i]), 5),
             "change_rate": "" if pairs[i] == 0 else round(float(rate[i]), 5), "pairs": int(pairs[i])}
            for i, name in enumerate(kg.relations)]  # fmt: skip


def measure(args: argparse.Namespace) -> Iterator[Row]:
    def write(name: str, rows: list[Row]) -> None:
        write_csv(args.out_dir / name, rows, command_line("gate_report", env=SPEC.env), commit_of())

    kg = load_dataset(args.data, args.data_dir)
    main_setting = setting_from_config(configs.resolve(args.config))
    settings = [main_setting]
    if not args.skip_paper:
        bare = {**main_setting["data"], "template": BARE_TEMPLATE}
        settings.append({**main_setting, "name": f"{main_setting['name']}, bare text", "data": bare})
        settings.append(setting_from_config(configs.resolve("gate-icews05-15-paper")))
    zero_shot_rows = []
    for setting in settings:
        print(f"setting {setting['name']}: lr {setting['lr']}, {setting['epochs']} epochs", flush=True)
        summary, zero_shot, alpha, data, module = evaluate_setting(kg, setting, args.seeds)
        zero_shot_rows += zero_shot
        yield summary
        if setting is main_setting:
            main_alpha, main_data, main_summary, main_module = alpha, data, summary, module
    write(f"gate_zero_shot_{kg.name}.csv", zero_shot_rows)
    write(f"gate_alpha_{kg.name}.csv", alpha_rows(kg, main_alpha, main_data))
    plot(main_alpha, main_data, main_summary["spearman"], args.out_dir / f"gate_alpha_{kg.name}.png")

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
    syn_data, _, syn_alpha = fit(syn, setting_from_config(configs.resolve("gate-synthetic")))
    write("gate_alpha_synthetic.csv", alpha_rows(syn, syn_alpha, syn_data))


SPEC = Benchmark("gate_report", __doc__, measure, add_arguments, out_dir=True, env=("ROTMEM_DATA_DIR",),
                 csv_name=lambda args: f"gate_summary_{args.data}")  # fmt: skip

if __name__ == "__main__":
    SPEC.main()
