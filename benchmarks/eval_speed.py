"""Time full filtered evaluation of an ICEWS05-15 split at the paper's size (dim 500, k = 3): fused
against eager on the CPU; with --device cuda, the fused ranking per GPU backend, cold and warm, then
the CPU's, with the rank-count op's ms per batch and the largest MRR difference GPU - CPU.

OMP_NUM_THREADS=2 python -m benchmarks.eval_speed [--split test] [--dim 500] [--k 3] [--rounds 1]
python -m benchmarks.eval_speed --device cuda [--backends native,triton,torch]
python -m benchmarks.eval_speed --device cuda --dry-run   # the CPU only, dim 8, each split's first batch
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.eval_speed (from the checkout's root)")

import argparse
import dataclasses
import os
import statistics
from collections.abc import Iterator

import torch

from benchmarks.runner import Benchmark, Row, comma_list, machine, timed
from rotmem import RoMem, load_dataset, ops
from rotmem.evaluation import FILTERS, evaluate_all
from rotmem.evaluation.ranking import answer_filters, filter_csr
from rotmem.ops import backend


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default="icews05-15")
    parser.add_argument("--split", default="test")
    parser.add_argument("--dim", type=int, default=500)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1, help="repeat the interleaved measurements")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--backends", type=comma_list(), default="native,triton,torch", help="GPU backends")
    parser.add_argument("--dry-run", action="store_true", help="the CPU only, each split's first batch")


@torch.no_grad()
def rank_count_ms(model, kg, split: str, batch_size: int, device: str, reps: int = 10) -> float:
    """Median ms of ``ops.filtered_rank_counts`` on the split's first batch, after two warm-up calls."""
    facts = kg.split(split)[:batch_size].to(device)
    h, r, t, day = facts.unbind(1)
    queries = torch.cat([model.query_tails(h, r, day.double()), model.query_heads(r, t, day.double())])
    ptr, idx = filter_csr(answer_filters(kg, FILTERS), FILTERS, facts)
    count = lambda: ops.filtered_rank_counts(queries, model.entity, torch.cat([t, h]), ptr, idx)
    return statistics.median([timed(count, device) for _ in range(reps + 2)][2:])


def timed_eval(model, kg, args, filters, fused: bool, device: str) -> tuple[dict, float]:
    """The metrics of one evaluation of ``args.split`` and its seconds."""
    metrics = {}
    run = lambda: metrics.update(evaluate_all(model, kg, args.split, filters, args.batch_size, fused))
    return metrics, timed(run, device) / 1e3


def runs_of(args: argparse.Namespace) -> list[tuple[str, str | None, bool, tuple[str, ...], str]]:
    """``(device, forced backend, fused, filters, run)`` of every evaluation, in order."""
    if args.device == "cpu":
        one_and_both = ((FILTERS[0],), FILTERS)
        return [("cpu", None, fused, f, "warm") for _ in range(args.rounds) for f in one_and_both
                for fused in (True, False)]  # fmt: skip
    names = [] if args.dry_run else [n for n in args.backends if backend.available(n, "cuda")]
    cpu = backend.backend_name(torch.device("cpu"), "filtered_rank_counts")
    return [("cuda", n, True, FILTERS, run) for n in names for run in ("cold", "warm")] + [
        ("cpu", cpu, True, FILTERS, "warm")
    ]


def measure(args: argparse.Namespace) -> Iterator[Row]:
    kg = load_dataset(args.data)
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False  # the GPU's scores as close to the CPU's as can be
    dim = 8 if args.dry_run else args.dim  # the dry run checks the script, not the arithmetic
    model = RoMem(kg.num_entities, kg.num_relations, dim=dim, k=args.k, tau0=kg.first_day)
    if args.dry_run:  # each split's first batch only, so the filters are built over those alone
        kg = dataclasses.replace(
            kg, **{s: kg.split(s)[: args.batch_size] for s in ("train", "valid", "test")}
        )
    elif args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device is visible (use --dry-run to check the script on the CPU)")
    for device, name, fused, filters, run in runs_of(args):
        if name is not None:
            os.environ["ROTMEM_BACKEND"] = name
        model = model.to(device)
        metrics, seconds = timed_eval(model, kg, args, filters, fused, device)
        row = {"evaluator": "fused" if fused else "eager", "split": args.split, "dim": dim, "n": model.n,
               "queries": 2 * len(kg.split(args.split)), "filters": "+".join(filters),
               "seconds": round(seconds, 3 if args.device == "cuda" else 2),
               "device": device if device == "cpu" else torch.cuda.get_device_name(),
               "backend": name or backend.backend_name(torch.device(device)), **machine()}  # fmt: skip
        if args.device == "cuda":
            row |= {"run": run, **{f"mrr {key}": round(v["mrr"], 6) for key, v in metrics.items()}}
            row["rank_counts_ms"] = round(rank_count_ms(model, kg, args.split, args.batch_size, device), 3)
        yield row
    os.environ.pop("ROTMEM_BACKEND", None)


def summarize(rows: list[Row]) -> list[str]:
    """CPU: eager / fused per filter set, round by round. GPU: per run the seconds, the time-aware /
    realistic MRR and the rank counts' ms per batch; the largest MRR difference GPU - CPU."""
    if "run" not in rows[0]:
        lines = []
        for name in dict.fromkeys(str(r["filters"]) for r in rows):
            times = {e: [r["seconds"] for r in rows if (r["filters"], r["evaluator"]) == (name, e)]
                     for e in ("fused", "eager")}  # fmt: skip
            ratios = (f"{e / f:.2f}x" for f, e in zip(times["fused"], times["eager"], strict=True))
            lines.append(f"{name}: eager / fused = " + ", ".join(ratios))
        return lines
    lines = [f"{r['device']} {r['backend']} {r['run']}: {r['seconds']} s, time-aware/realistic MRR "
             f"{r['mrr time-aware/realistic']}, rank counts {r['rank_counts_ms']} ms per batch"
             for r in rows]  # fmt: skip
    cpu = next(r for r in rows if r["device"] == "cpu")
    gaps = [abs(v - cpu[k]) for r in rows if r is not cpu for k, v in r.items() if k.startswith("mrr ")]
    if gaps:
        lines.append(f"largest MRR difference GPU - CPU over {len(gaps)} metrics: {max(gaps):.2e}")
    return lines


SPEC = Benchmark("eval_speed", __doc__, measure, add_arguments, summarize)

if __name__ == "__main__":
    SPEC.main()
