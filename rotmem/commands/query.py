"""``rotmem query``: the top answers of a trained model for one question at a date.

rotmem query --ckpt CKPT --head "Barack Obama" --relation "Make a visit" --date 2014-06-01
rotmem query --ckpt CKPT --relation "Make a visit" --tail "China" --date 2014-06-01 -k 10
"""

from __future__ import annotations

import argparse

from rotmem.errors import BadCheckpointError, UserInputError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("query", help="top answers of (head, relation, ?) or (?, relation, tail) at a date")
    p.add_argument("--ckpt", required=True, help="training checkpoint (.ckpt) or RoMem.save file")
    p.add_argument("--head", help="the head entity: rank tails")
    p.add_argument("--tail", help="the tail entity: rank heads")
    p.add_argument("--relation", required=True, help="the relation, as in the data")
    p.add_argument("--date", required=True, help="YYYY-MM-DD")
    p.add_argument("-k", type=int, default=5, help="number of answers (default 5)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from rotmem import load_model
    from rotmem.data import day_of

    if (args.head is None) == (args.tail is None):
        raise UserInputError("rotmem query: give one of --head (ranks tails) and --tail (ranks heads)")
    if args.k < 1:
        raise UserInputError(f"rotmem query: -k must be at least 1, got {args.k}")
    day = torch.tensor([float(day_of(args.date))])
    model = load_model(args.ckpt)
    relation = model.relation_ids([args.relation])
    with torch.no_grad():
        if args.head is not None:
            scores = model.score_tails(model.entity_ids([args.head]), relation, day)[0]
            question = f"({args.head}, {args.relation}, ?)"
        else:
            scores = model.score_heads(relation, model.entity_ids([args.tail]), day)[0]
            question = f"(?, {args.relation}, {args.tail})"
    bad = int((~torch.isfinite(scores)).sum())
    if bad:
        raise BadCheckpointError(
            f"{args.ckpt}: the model is broken: {bad} of its {scores.numel()} scores for {question} "
            "are NaN or infinite; use an earlier checkpoint or retrain"
        )
    top = scores.topk(min(args.k, scores.numel()))
    print(f"{question} on {args.date}:")
    for rank, (score, index) in enumerate(zip(top.values.tolist(), top.indices.tolist(), strict=True), 1):
        print(f"{rank:3d}. {model.entities[index]}\t{score:.4f}")
    return 0
