"""``rotmem evaluate``: filtered MRR / Hits@k of a trained checkpoint."""

from __future__ import annotations

import argparse
import json
import time

FILTER_CHOICES = ("time-aware", "static", "both")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="filtered link-prediction metrics of a checkpoint")
    p.add_argument("--ckpt", required=True, help="training checkpoint (.ckpt) or RoMem.save file")
    p.add_argument("--data", default="icews05-15", help="dataset name or directory")
    p.add_argument("--data-dir", default=None, help="folder holding <data>/ (else $ROTMEM_DATA_DIR)")
    p.add_argument("--split", default="test", choices=("valid", "test"))
    p.add_argument("--filter", default="both", choices=FILTER_CHOICES)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--device", default="cuda" if _cuda() else "cpu")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(run=run)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def run(args: argparse.Namespace) -> int:
    from rotmem import load_dataset, load_model
    from rotmem.evaluation import FILTERS, evaluate_all

    model = load_model(args.ckpt).to(args.device)
    kg = load_dataset(args.data, args.data_dir)
    if model.entities is not None and model.entities != kg.entities:
        raise SystemExit(f"{args.ckpt}: its entity vocabulary does not match dataset {args.data!r}")
    filters = FILTERS if args.filter == "both" else (args.filter,)
    start = time.perf_counter()
    results = evaluate_all(model, kg, args.split, filters, args.batch_size)
    seconds = time.perf_counter() - start
    if args.json:
        print(json.dumps({"split": args.split, "seconds": seconds, **results}, indent=2))
        return 0
    print(f"{args.data} {args.split}: {kg.split(args.split).shape[0]} facts x 2 directions, {seconds:.1f} s")
    print(f"{'filter / tie rule':28s} {'MRR':>7s} {'H@1':>7s} {'H@3':>7s} {'H@10':>7s}")
    for name, m in results.items():
        print(f"{name:28s} {m['mrr']:7.4f} {m['hits@1']:7.4f} {m['hits@3']:7.4f} {m['hits@10']:7.4f}")
    return 0
