"""A full ICEWS05-15 test evaluation with the fused ranking on the GPU, beside the same on the CPU.

python -m benchmarks.gpu_eval [--split test] [--dim 500] [--k 3] [--out results/gpu_eval.csv]
python -m benchmarks.gpu_eval --dry-run     # parse, load, each split's first batch, the CPU, dim 8
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.gpu_eval (from the checkout's root)")

import argparse
import dataclasses
import os
from collections.abc import Iterator

import torch

from benchmarks.runner import Benchmark, Row, comma_list, timed
from rotmem import RoMem, load_dataset, ops
from rotmem.evaluation import FILTERS, evaluate_all
from rotmem.evaluation.ranking import answer_filters, filter_csr
from rotmem.ops import backend


@torch.no_grad()
def rank_count_ms(model, kg, split: str, batch_size: int, device: str, reps: int = 10) -> float:
    """Median ms of ``ops.filtered_rank_counts`` on the split's first batch, after two warm-up calls."""
    facts = kg.split(split)[:batch_size].to(device)
    h, r, t, day = facts.unbind(1)
    queries = torch.cat([model.query_tails(h, r, day.double()), model.query_heads(r, t, day.double())])
    ptr, idx = filter_csr(answer_filters(kg, FILTERS), FILTERS, facts)
    target = torch.cat([t, h])
    times = [timed(lambda: ops.filtered_rank_counts(queries, model.entity, target, ptr, idx), device)
             for _ in range(reps + 2)]  # fmt: skip
    return sorted(times[2:])[reps // 2]


def timed_eval(model, kg, args: argparse.Namespace, device: str) -> tuple[dict, float]:
    """The metrics of the fused evaluation of ``args.split`` and its seconds."""
    metrics = {}
    ms = timed(lambda: metrics.update(evaluate_all(model, kg, args.split, FILTERS, args.batch_size)), device)
    return metrics, ms / 1e3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default="icews05-15")
    parser.add_argument("--split", default="test")
    parser.add_argument("--dim", type=int, default=500)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--backends", type=comma_list(), default="native,triton,torch", help="GPU backends")
    parser.add_argument("--dry-run", action="store_true", help="the CPU only, each split's first batch")


def measure(args: argparse.Namespace) -> Iterator[Row]:
    kg = load_dataset(args.data)
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False  # the GPU's scores as close to the CPU's as can be
    dim = 8 if args.dry_run else args.dim  # the dry run checks the script, not the arithmetic
    model = RoMem(kg.num_entities, kg.num_relations, dim=dim, k=args.k, tau0=kg.first_day)
    if args.dry_run:  # each split's first batch only, so the filters are built over those alone
        first = {s: kg.split(s)[: args.batch_size] for s in ("train", "valid", "test")}
        kg = dataclasses.replace(kg, **first)
    elif not torch.cuda.is_available():
        raise SystemExit("no CUDA device is visible (use --dry-run to check the script on the CPU)")
    runs = [("cpu", backend.backend_name(torch.device("cpu"), "filtered_rank_counts"))]
    if not args.dry_run:
        runs = [("cuda", name) for name in args.backends if backend.available(name, "cuda")] + runs
    for device, name in runs:
        os.environ["ROTMEM_BACKEND"] = name
        model = model.to(device)
        row = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "backend": name}
        for run in ("cold", "warm") if device == "cuda" else ("warm",):
            metrics, seconds = timed_eval(model, kg, args, device)
            for key, values in metrics.items():
                mrr = round(values["mrr"], 6)
                yield row | {"run": run, "metric": key, "mrr": mrr, "seconds": round(seconds, 3)}
        seconds = round(rank_count_ms(model, kg, args.split, args.batch_size, device) / 1e3, 6)
        yield row | {"run": "warm", "metric": "rank_counts ms/batch", "mrr": "", "seconds": seconds}
    os.environ.pop("ROTMEM_BACKEND", None)


def summarize(rows: list[Row]) -> list[str]:
    """Per run the time-aware/realistic MRR and seconds; the largest MRR difference GPU - CPU."""
    lines = [f"{r['device']} {r['backend']} {r['run']}: {r['seconds']} s, time-aware/realistic MRR {r['mrr']}"
             for r in rows if r["metric"] == "time-aware/realistic"]  # fmt: skip
    lines += [f"{r['device']} {r['backend']}: rank counts {r['seconds'] * 1e3:.3f} ms per batch"
              for r in rows if r["metric"] == "rank_counts ms/batch"]  # fmt: skip
    cpu = {r["metric"]: r["mrr"] for r in rows if r["device"] == "cpu" and r["mrr"] != ""}
    gaps = [abs(r["mrr"] - cpu[r["metric"]]) for r in rows if r["device"] != "cpu" and r["mrr"] != ""]
    gap = [f"largest MRR difference GPU - CPU over {len(gaps)} metrics: {max(gaps):.2e}"] if gaps else []
    return lines + gap


SPEC = Benchmark("gpu_eval", __doc__, measure, add_arguments, summarize)

if __name__ == "__main__":
    SPEC.main()
