"""A full ICEWS05-15 test evaluation with the fused ranking on the GPU, beside the same on the CPU.

    python -m benchmarks.gpu_eval [--split test] [--dim 500] [--k 3] [--out results.csv]
    python -m benchmarks.gpu_eval --dry-run     # parse, load, each split's first batch, the CPU, dim 8

One model (seeded, freshly initialised: the work does not depend on training, as in
``benchmarks/eval_speed.py``), both filters (time-aware, static) and every tie rule, with
``rotmem.ops.filtered_rank_counts`` (``evaluate_all(fused=True)``): first on the GPU, then on the
CPU; the seconds of each, the MRRs, and the largest MRR difference (the scores' rounding differs
between devices, TF32 off, so ranks may differ where scores are within rounding) go to the CSV.
"""

from __future__ import annotations

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.gpu_eval (from the checkout's root)")

import argparse
import csv
import dataclasses
import sys
import time
from pathlib import Path

import torch

from rotmem import RoMem, load_dataset
from rotmem.evaluation import FILTERS, evaluate_all
from rotmem.ops import backend_name


def timed_eval(model, kg, split: str, batch_size: int, device: str) -> tuple[float, dict]:
    model = model.to(device)
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    metrics = evaluate_all(model, kg, split, FILTERS, batch_size, fused=True)
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="icews05-15")
    parser.add_argument("--split", default="test")
    parser.add_argument("--dim", type=int, default=500)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--out", default=None, help="CSV to write (default: print only)")
    parser.add_argument("--dry-run", action="store_true", help="the CPU only, each split's first batch")
    args = parser.parse_args(argv)
    kg = load_dataset(args.data)
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False  # the GPU's scores as close to the CPU's as can be
    dim = 8 if args.dry_run else args.dim  # the dry run checks the script, not the arithmetic
    model = RoMem(kg.num_entities, kg.num_relations, dim=dim, k=args.k, tau0=kg.first_day)
    devices = ["cpu"] if args.dry_run else ["cuda", "cpu"]
    if args.dry_run:  # each split's first batch only, so the filters are built over those alone
        first = {split: kg.split(split)[: args.batch_size] for split in ("train", "valid", "test")}
        kg = dataclasses.replace(kg, **first)
    elif not torch.cuda.is_available():
        parser.error("no CUDA device is visible (use --dry-run to check the script on the CPU)")
    rows = []
    for device in devices:
        seconds, metrics = timed_eval(model, kg, args.split, args.batch_size, device)
        name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
        for key, values in metrics.items():
            rows.append({"device": name, "backend": backend_name(torch.device(device)), "metric": key,
                         "mrr": round(values["mrr"], 6), "seconds": round(seconds, 2)})  # fmt: skip
        print(
            f"{name}: {seconds:.2f} s, time-aware/realistic MRR {metrics['time-aware/realistic']['mrr']:.6f}"
        )
    if len(devices) == 2:
        half = len(rows) // 2
        gap = max(abs(a["mrr"] - b["mrr"]) for a, b in zip(rows[:half], rows[half:], strict=True))
        print(f"largest MRR difference GPU - CPU over {half} metrics: {gap:.2e}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", newline="") as handle:
            handle.write(f"# python {' '.join(sys.argv)}\n")
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
