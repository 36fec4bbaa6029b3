"""A full ICEWS05-15 test evaluation with the fused ranking on the GPU, beside the same on the CPU.

    python -m benchmarks.gpu_eval [--split test] [--dim 500] [--k 3] [--out results.csv]
    python -m benchmarks.gpu_eval --dry-run     # parse, load, each split's first batch, the CPU, dim 8

One model (seeded, freshly initialised: the work does not depend on training, as in
``benchmarks/eval_speed.py``), both filters (time-aware, static) and every tie rule, with
``rotmem.ops.filtered_rank_counts`` (``evaluate_all(fused=True)``): on the GPU with each backend
that runs there (``--backends``), twice each, *cold* (the first run: Triton's and the compiler's
first compiles, the filters' first copy to the device) and *warm*; then on the CPU (its default
backend). Also the rank-count op alone on one batch (milliseconds, median of 10, warm). The seconds,
the MRRs, and the largest MRR difference GPU - CPU (the scores' rounding differs between devices,
TF32 off, so ranks may differ where scores are within rounding) go to the CSV.
"""

from __future__ import annotations

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.gpu_eval (from the checkout's root)")

import argparse
import csv
import dataclasses
import os
import sys
import time
from pathlib import Path

import torch

from benchmarks.harness import command_line
from rotmem import RoMem, load_dataset, ops
from rotmem.evaluation import FILTERS, evaluate_all
from rotmem.evaluation.ranking import answer_filters, filter_csr
from rotmem.ops import backend


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed_eval(model, kg, split: str, batch_size: int, device: str) -> tuple[float, dict]:
    model = model.to(device)
    synchronize(device)
    start = time.perf_counter()
    metrics = evaluate_all(model, kg, split, FILTERS, batch_size, fused=True)
    synchronize(device)
    return time.perf_counter() - start, metrics


@torch.no_grad()
def rank_count_ms(model, kg, split: str, batch_size: int, device: str, reps: int = 10) -> float:
    """Median milliseconds of ``ops.filtered_rank_counts`` on the split's first batch (both
    directions, both filters), after two warm-up calls."""
    model = model.to(device)
    facts = kg.split(split)[:batch_size].to(device)
    h, r, t, day = facts.unbind(1)
    queries = torch.cat([model.query_tails(h, r, day.double()), model.query_heads(r, t, day.double())])
    ptr, idx = filter_csr(answer_filters(kg, FILTERS), FILTERS, facts)
    times = []
    for i in range(reps + 2):
        synchronize(device)
        start = time.perf_counter()
        ops.filtered_rank_counts(queries, model.entity, torch.cat([t, h]), ptr, idx)
        synchronize(device)
        if i >= 2:
            times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="icews05-15")
    parser.add_argument("--split", default="test")
    parser.add_argument("--dim", type=int, default=500)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--backends", default="native,triton,torch", help="the GPU's backends to time")
    parser.add_argument("--out", default=None, help="CSV to write (default: print only)")
    parser.add_argument("--dry-run", action="store_true", help="the CPU only, each split's first batch")
    args = parser.parse_args(argv)
    kg = load_dataset(args.data)
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False  # the GPU's scores as close to the CPU's as can be
    dim = 8 if args.dry_run else args.dim  # the dry run checks the script, not the arithmetic
    model = RoMem(kg.num_entities, kg.num_relations, dim=dim, k=args.k, tau0=kg.first_day)
    if args.dry_run:  # each split's first batch only, so the filters are built over those alone
        first = {split: kg.split(split)[: args.batch_size] for split in ("train", "valid", "test")}
        kg = dataclasses.replace(kg, **first)
    elif not torch.cuda.is_available():
        parser.error("no CUDA device is visible (use --dry-run to check the script on the CPU)")
    runs = [("cpu", backend.backend_name(torch.device("cpu"), "filtered_rank_counts"))]
    if not args.dry_run:
        gpu = [name for name in args.backends.split(",") if backend.available(name, "cuda")]
        runs = [("cuda", name) for name in gpu] + runs
    rows = []
    for device, name in runs:
        os.environ["ROTMEM_BACKEND"] = name
        gpu_name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
        for run in ("cold", "warm") if device == "cuda" else ("warm",):
            seconds, metrics = timed_eval(model, kg, args.split, args.batch_size, device)
            for key, values in metrics.items():
                rows.append({"device": gpu_name, "backend": name, "run": run, "metric": key,
                             "mrr": round(values["mrr"], 6), "seconds": round(seconds, 3)})  # fmt: skip
            mrr = metrics["time-aware/realistic"]["mrr"]
            print(f"{gpu_name} {name} {run}: {seconds:.2f} s, time-aware/realistic MRR {mrr:.6f}", flush=True)
        ms = rank_count_ms(model, kg, args.split, args.batch_size, device)
        rows.append({"device": gpu_name, "backend": name, "run": "warm", "metric": "rank_counts ms/batch",
                     "mrr": "", "seconds": round(ms / 1e3, 6)})  # fmt: skip
        print(f"{gpu_name} {name}: rank counts {ms:.3f} ms per batch of {args.batch_size}", flush=True)
    os.environ.pop("ROTMEM_BACKEND", None)
    cpu = {r["metric"]: r["mrr"] for r in rows if r["device"] == "cpu" and r["mrr"] != ""}
    gaps = [abs(r["mrr"] - cpu[r["metric"]]) for r in rows if r["device"] != "cpu" and r["mrr"] != ""]
    if gaps:
        print(f"largest MRR difference GPU - CPU over {len(gaps)} metrics: {max(gaps):.2e}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", newline="") as handle:
            handle.write(f"# {command_line('benchmarks.gpu_eval', argv)}\n")
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
