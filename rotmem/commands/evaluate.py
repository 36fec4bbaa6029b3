"""``rotmem evaluate``: filtered MRR / Hits@k of a trained checkpoint."""

from __future__ import annotations

import argparse
import json
import time

from rotmem.errors import BadCheckpointError, BadSettingError, UserInputError, describe

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


def device_of(name: str):
    """``torch.device(name)`` when this machine can hold a tensor there, else a ``BadSettingError``
    naming it (``--device bogus``, ``--device cuda`` without a GPU)."""
    import torch

    try:
        device = torch.device(name)
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError, ValueError) as error:
        raise BadSettingError(f"--device {name!r} is not usable here ({describe(error)})") from None
    return device


def check_fits(model, kg, ckpt: str, data: str) -> None:
    """``UserInputError`` when the checkpoint was not trained on this dataset: its vocabulary (or,
    without one, its table sizes) differs."""
    if model.entities is not None and (model.entities != kg.entities or model.relations != kg.relations):
        raise UserInputError(f"{ckpt}: its entity and relation names do not match dataset {data!r}")
    sizes = (model.num_entities, model.num_relations)
    if sizes != (kg.num_entities, kg.num_relations):
        raise UserInputError(
            f"{ckpt}: a model of {sizes[0]} entities and {sizes[1]} relations cannot be evaluated on "
            f"dataset {data!r} ({kg.num_entities} entities, {kg.num_relations} relations)"
        )


def run(args: argparse.Namespace) -> int:
    from rotmem import load_dataset, load_model
    from rotmem.evaluation import FILTERS, evaluate_all
    from rotmem.evaluation.ranking import NonFiniteScoreError

    if args.batch_size < 1:
        raise BadSettingError(f"--batch-size must be at least 1, got {args.batch_size}")
    device = device_of(args.device)
    model = load_model(args.ckpt).to(device)
    kg = load_dataset(args.data, args.data_dir)
    check_fits(model, kg, args.ckpt, args.data)
    filters = FILTERS if args.filter == "both" else (args.filter,)
    start = time.perf_counter()
    try:
        results = evaluate_all(model, kg, args.split, filters, args.batch_size)
    except NonFiniteScoreError as error:
        raise BadCheckpointError(f"{args.ckpt}: the model is broken: {error}") from None
    seconds = time.perf_counter() - start
    if args.json:
        print(json.dumps({"split": args.split, "seconds": seconds, **results}, indent=2))
        return 0
    print(f"{args.data} {args.split}: {kg.split(args.split).shape[0]} facts x 2 directions, {seconds:.1f} s")
    print(f"{'filter / tie rule':28s} {'MRR':>7s} {'H@1':>7s} {'H@3':>7s} {'H@10':>7s}")
    for name, m in results.items():
        print(f"{name:28s} {m['mrr']:7.4f} {m['hits@1']:7.4f} {m['hits@3']:7.4f} {m['hits@10']:7.4f}")
    return 0
