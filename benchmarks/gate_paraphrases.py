"""Paraphrase consistency of the Semantic Speed Gate, with and without paraphrase anchors.

ROTMEM_DATA_DIR=../shared/data python -m benchmarks.gate_paraphrases [--gate gate.pt]
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.gate_paraphrases (from the checkout's root)")

import argparse
import statistics
from collections.abc import Iterator
from pathlib import Path

import torch
from scipy.stats import spearmanr

from benchmarks.runner import Benchmark, Row, command_line, commit_of, write_csv
from benchmarks.temporal_qa.phrasings import PHRASINGS
from rotmem.data import load_dataset
from rotmem.gate import SemanticSpeedGate, mine_transitions
from rotmem.gate.anchors import AnchoredSpeeds, anchors_for, choose_temperature, read_paraphrases

MIN_PAIRS = 20


def pretrained_gate(path: Path) -> SemanticSpeedGate:
    from benchmarks.temporal_qa.run import pretrain_gate

    pretrain_gate(path)
    return SemanticSpeedGate.load(path)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gate", type=Path, help="a saved gate (default: pretrain gate-icews05-15 beside --out)"
    )
    parser.add_argument("--data-dir")


def measure(args: argparse.Namespace) -> Iterator[Row]:
    kg = load_dataset("icews05-15", args.data_dir)
    gate = (
        SemanticSpeedGate.load(args.gate)
        if args.gate
        else pretrained_gate(args.out.with_name("gate_icews05-15.pt"))
    )
    paraphrases = read_paraphrases()
    anchors = anchors_for(kg.relations, paraphrases)
    temperature, loo_max = choose_temperature(gate, anchors, paraphrases)
    anchored = AnchoredSpeeds(gate, anchors, temperature)
    templates = {(r, p.base) for r, p in PHRASINGS.items()}

    pairs, rate = mine_transitions(kg.train, kg.num_relations).per_relation()
    relations = kg.relations
    with torch.no_grad():
        plain_rel = dict(zip(relations, gate.alpha(relations).tolist(), strict=True))
    anchored_rel = dict(zip(relations, anchored.alpha(relations).tolist(), strict=True))

    rows: list[Row] = []
    for p in paraphrases:
        with torch.no_grad():
            plain = float(gate.alpha([p.text])[0])
        exclude = [p.text] if p.split == "train" else []
        anch = float(anchored.alpha([p.text], exclude=exclude)[0])
        rows.append(
            dict(
                family=p.family, relation=p.relation, phrasing=p.text, split=p.split,
                template=(p.relation, p.text) in templates,
                alpha_relation_plain=round(plain_rel[p.relation], 4), alpha_plain=round(plain, 4),
                gap_plain=round(abs(plain - plain_rel[p.relation]), 4),
                alpha_relation_anchored=round(anchored_rel[p.relation], 4), alpha_anchored=round(anch, 4),
                gap_anchored=round(abs(anch - anchored_rel[p.relation]), 4),
            )
        )  # fmt: skip

    def spearman(alpha: dict[str, float], min_pairs: int) -> float:
        ids = [i for i in range(len(relations)) if pairs[i] >= min_pairs]
        values = [alpha[relations[i]] for i in ids]
        return round(float(spearmanr(values, rate[ids].numpy()).statistic), 3)

    summary = []
    sets = {
        "heldout": lambda r: r["split"] == "heldout",
        "heldout templates": lambda r: r["template"],
        "train (leave-one-out)": lambda r: r["split"] == "train",
    }
    for method, alpha_rel in (("plain", plain_rel), ("anchored", anchored_rel)):
        for name, keep in sets.items():
            gaps = [r[f"gap_{method}"] for r in rows if keep(r)]
            summary.append(
                dict(
                    method=method, phrasings=name, n=len(gaps),
                    median_gap=round(statistics.median(gaps), 4), max_gap=round(max(gaps), 4),
                    spearman_change_rate=spearman(alpha_rel, 1),
                    **{f"spearman_ge{MIN_PAIRS}": spearman(alpha_rel, MIN_PAIRS)},
                    temperature=temperature if method == "anchored" else "",
                    loo_max_gap_by_temperature=str(loo_max) if method == "anchored" else "",
                )
            )  # fmt: skip
    write_csv(
        args.out.with_name("gate_paraphrase_summary.csv"), summary, command_line(SPEC.name), commit_of()
    )
    args.notes += [str(s) for s in summary]
    yield from rows


SPEC = Benchmark("gate_paraphrases", __doc__, measure, add_arguments, csv_name="gate_paraphrases_anchored")

if __name__ == "__main__":
    SPEC.main()
