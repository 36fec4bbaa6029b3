"""Time full filtered evaluation of an ICEWS05-15 split at the paper's size (dim 500, k = 3).

python -m benchmarks.eval_speed [--split test] [--dim 500] [--k 3] [--rounds 1]
Scores do not depend on training, so a freshly initialised model times the same work as a trained
one: 2 directions x every fact x all 10,488 entities, one filter and both filters, every tie rule,
with the fused evaluator (``rotmem.ops.filtered_rank_counts``) and the eager one (``[B, N]`` score
matrices, ``evaluate_all(fused=False)``), interleaved in one run so their ratio is fair.
Writes benchmarks/results/eval_speed.csv (``--out``; with the command and the load average).
"""

from __future__ import annotations

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.eval_speed (from the checkout's root)")

import argparse
import csv
import os
import platform
import sys
import time
from pathlib import Path

import torch

from rotmem import RoMem, load_dataset
from rotmem.evaluation import FILTERS, evaluate_all
from rotmem.ops import backend_name

RESULTS = Path(__file__).resolve().parent / "results" / "eval_speed.csv"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="icews05-15")
    parser.add_argument("--split", default="test")
    parser.add_argument("--dim", type=int, default=500)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1, help="repeat the interleaved measurements")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the CSV to write")
    args = parser.parse_args(argv)
    kg = load_dataset(args.data)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = RoMem(kg.num_entities, kg.num_relations, dim=args.dim, k=args.k, tau0=kg.first_day).to(device)
    rows = []
    given = sys.argv[1:] if argv is None else argv
    threads = os.environ.get("OMP_NUM_THREADS", "unset")
    command = f"OMP_NUM_THREADS={threads} python -m benchmarks.eval_speed {' '.join(given)}"
    runs = [
        (f, fused) for _ in range(args.rounds) for f in ((FILTERS[0],), FILTERS) for fused in (True, False)
    ]
    for filters, fused in runs:
        start = time.perf_counter()
        evaluate_all(model, kg, args.split, filters, args.batch_size, fused=fused)
        seconds = time.perf_counter() - start
        rows.append(
            {
                "evaluator": "fused" if fused else "eager",
                "split": args.split,
                "queries": 2 * len(kg.split(args.split)),
                "dim": args.dim,
                "n": model.n,
                "filters": "+".join(filters),
                "seconds": round(seconds, 2),
                "device": device.type if device.type == "cpu" else torch.cuda.get_device_name(),
                "threads": torch.get_num_threads(),
                "backend": backend_name(device),
                "cpu": platform.processor() or platform.machine(),
                "load_1min": round(os.getloadavg()[0], 2),
                "command": command,
            }
        )
        print(rows[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for filters in ((FILTERS[0],), FILTERS):
        name = "+".join(filters)
        fused = [r["seconds"] for r in rows if r["filters"] == name and r["evaluator"] == "fused"]
        eager = [r["seconds"] for r in rows if r["filters"] == name and r["evaluator"] == "eager"]
        ratios = ", ".join(f"{e / f:.2f}x" for f, e in zip(fused, eager, strict=True))
        print(f"{name}: eager / fused = {ratios}")
    print(f"wrote {args.out}\ncommand: {command}")


if __name__ == "__main__":
    main()
