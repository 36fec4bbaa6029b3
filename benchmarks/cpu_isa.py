"""The native CPU cross-entropy under each instruction set this CPU runs: accuracy and time.

For every set of ``rotmem.ops.native.supported_cpu_isas()`` (AVX-512, AVX2 + FMA, baseline SSE2),
forced as ``ROTMEM_CPU_ISA`` would: the largest error of the loss and of both gradients against a
float64 truth on the test suite's ICEWS-sized case (B = 999 rows against N = 10,488 entities, width
18: ``tests/ops/test_cross_entropy_all.py::test_cross_entropy_all_icews_rows_and_entities``,
grad_out = 1), the eager reference's errors beside it, and the time of one forward + backward at
ICEWS05-15's training shape (2B = 2000 queries, N = 10,488, 2n = 498), sets interleaved round by round.

    python -m benchmarks.cpu_isa --threads 1 --rounds 7

Writes ``benchmarks/results/cpu_isa.csv`` (one row per set; the command in the last column).
"""

from __future__ import annotations

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.cpu_isa (from the checkout's root)")

import argparse
import csv
import os
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.harness import command_line, interleaved, percentile, timed
from rotmem.ops import native, reference

RESULTS = Path(__file__).resolve().parent / "results" / "cpu_isa.csv"
COLUMNS = (
    "isa",
    "torch_cpu_capability",
    "threads",
    "loss_error",
    "dq_error",
    "de_error",
    "reference_loss_error",
    "reference_dq_error",
    "reference_de_error",
    "ms_median",
    "ms_p20",
    "ms_p80",
    "command",
)


def accuracy_case(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The test suite's ICEWS-sized case: q [999, 18], entity [10488, 18] (float64 values), target."""
    g = torch.Generator().manual_seed(seed)
    target = torch.randint(0, 10488, (999,), generator=g)
    q = torch.randn(999, 18, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    e = torch.randn(10488, 18, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    return q, e, target


def loss_and_grads(fn, q: torch.Tensor, e: torch.Tensor, target: torch.Tensor) -> list[torch.Tensor]:
    q, e = q.detach().clone().requires_grad_(), e.detach().clone().requires_grad_()
    loss = fn(q, e, target)
    loss.backward()
    return [loss.detach().double(), q.grad.double(), e.grad.double()]


def errors(got: list[torch.Tensor], truth: list[torch.Tensor]) -> list[float]:
    return [float((a - b).abs().max()) for a, b in zip(got, truth, strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if not native.is_available("cpu"):
        sys.exit(f"native backend unavailable: {native.unavailable_reason('cpu')}")
    isas = native.supported_cpu_isas()

    q64, e64, target = accuracy_case()
    q32, e32 = q64.float(), e64.float()
    truth = loss_and_grads(lambda q, e, t: F.cross_entropy(q @ e.t(), t), q32.double(), e32.double(), target)
    reference_errors = errors(loss_and_grads(reference.cross_entropy_all, q32, e32, target), truth)
    native_errors = {}
    for isa in isas:
        with native.forced_cpu_isa(isa):
            native_errors[isa] = errors(loss_and_grads(native.cross_entropy_all, q32, e32, target), truth)

    g = torch.Generator().manual_seed(0)
    q = (torch.rand(2000, 498, generator=g) - 0.5).requires_grad_()
    e = (torch.rand(10488, 498, generator=g) * 0.8 - 0.4).requires_grad_()
    t = torch.randint(0, 10488, (2000,), generator=g)

    def step(isa: str) -> float:
        q.grad = e.grad = None
        with native.forced_cpu_isa(isa):
            return timed(lambda: native.cross_entropy_all(q, e, t).backward())

    times = interleaved({isa: lambda isa=isa: step(isa) for isa in isas}, args.rounds, warmup=1)

    command = command_line("benchmarks.cpu_isa", argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    new = not args.out.exists()
    with args.out.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        for isa in isas:
            row = dict(zip(("loss_error", "dq_error", "de_error"), native_errors[isa], strict=True))
            row |= dict(
                zip(
                    ("reference_loss_error", "reference_dq_error", "reference_de_error"),
                    reference_errors,
                    strict=True,
                )
            )
            writer.writerow(
                {
                    "isa": isa,
                    "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
                    "threads": torch.get_num_threads(),
                    **{k: f"{v:.3g}" for k, v in row.items()},
                    "ms_median": f"{statistics.median(times[isa]):.1f}",
                    "ms_p20": f"{percentile(times[isa], 20):.1f}",
                    "ms_p80": f"{percentile(times[isa], 80):.1f}",
                    "command": command,
                }
            )
            print(
                f"{isa:>8}: dq error {row['dq_error']:.3g} (reference {row['reference_dq_error']:.3g}), "
                f"dE error {row['de_error']:.3g} (reference {row['reference_de_error']:.3g}), "
                f"CE forward+backward {statistics.median(times[isa]):.1f} ms"
            )
    print(f"wrote {args.out}  [{command}]  load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
