"""Time full filtered evaluation of an ICEWS05-15 split at the paper's size (dim 500, k = 3)."""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.eval_speed (from the checkout's root)")

import argparse
import time
from collections.abc import Iterator

import torch

from benchmarks.runner import Benchmark, Row, machine
from rotmem import RoMem, load_dataset
from rotmem.evaluation import FILTERS, evaluate_all
from rotmem.ops import backend_name


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default="icews05-15")
    parser.add_argument("--split", default="test")
    parser.add_argument("--dim", type=int, default=500)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1, help="repeat the interleaved measurements")


def measure(args: argparse.Namespace) -> Iterator[Row]:
    kg = load_dataset(args.data)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = RoMem(kg.num_entities, kg.num_relations, dim=args.dim, k=args.k, tau0=kg.first_day).to(device)
    runs = [
        (f, fused) for _ in range(args.rounds) for f in ((FILTERS[0],), FILTERS) for fused in (True, False)
    ]
    for filters, fused in runs:
        start = time.perf_counter()
        evaluate_all(model, kg, args.split, filters, args.batch_size, fused=fused)
        yield {
            "evaluator": "fused" if fused else "eager",
            "split": args.split,
            "queries": 2 * len(kg.split(args.split)),
            "dim": args.dim,
            "n": model.n,
            "filters": "+".join(filters),
            "seconds": round(time.perf_counter() - start, 2),
            "device": device.type if device.type == "cpu" else torch.cuda.get_device_name(),
            "backend": backend_name(device),
            **machine(),
        }


def summarize(rows: list[Row]) -> list[str]:
    """Eager / fused per filter set, round by round."""
    lines = []
    for name in dict.fromkeys(str(r["filters"]) for r in rows):
        fused = [r["seconds"] for r in rows if r["filters"] == name and r["evaluator"] == "fused"]
        eager = [r["seconds"] for r in rows if r["filters"] == name and r["evaluator"] == "eager"]
        lines.append(
            f"{name}: eager / fused = "
            + ", ".join(f"{e / f:.2f}x" for f, e in zip(fused, eager, strict=True))
        )
    return lines


SPEC = Benchmark("eval_speed", __doc__, measure, add_arguments, summarize)

if __name__ == "__main__":
    SPEC.main()
