"""The native CPU cross-entropy under each instruction set this CPU runs: accuracy and time.

python -m benchmarks.cpu_isa --threads 1 --rounds 7
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.cpu_isa (from the checkout's root)")

import argparse
from collections.abc import Iterator

import torch
import torch.nn.functional as F

from benchmarks.runner import Benchmark, Row, add_threads, interleaved, spread, timed
from rotmem.ops import native, reference

ERRORS = ("loss_error", "dq_error", "de_error")
COLUMNS = (*ERRORS, *(f"reference_{name}" for name in ERRORS))


def accuracy_case(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The test suite's ICEWS-sized case: q [999, 18], entity [10488, 18] (float64 values), target."""
    target = torch.randint(0, 10488, (999,), generator=torch.Generator().manual_seed(seed))
    q = torch.randn(999, 18, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    e = torch.randn(10488, 18, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    return q, e, target


def errors(fn, q: torch.Tensor, e: torch.Tensor, target: torch.Tensor, truth=None) -> list:
    """Loss and both gradients of ``fn``; with ``truth``, their largest errors against it instead."""
    q, e = q.detach().clone().requires_grad_(), e.detach().clone().requires_grad_()
    loss = fn(q, e, target)
    loss.backward()
    got = [loss.detach().double(), q.grad.double(), e.grad.double()]
    return got if truth is None else [float((a - b).abs().max()) for a, b in zip(got, truth, strict=True)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=7)
    add_threads(parser)


def measure(args: argparse.Namespace) -> Iterator[Row]:
    if not native.is_available("cpu"):
        raise SystemExit(f"native backend unavailable: {native.unavailable_reason('cpu')}")
    isas = native.supported_cpu_isas()
    q64, e64, target = accuracy_case()
    q32, e32 = q64.float(), e64.float()
    truth = errors(lambda q, e, t: F.cross_entropy(q @ e.t(), t), q32.double(), e32.double(), target)
    reference_errors = errors(reference.cross_entropy_all, q32, e32, target, truth)
    native_errors = {}
    for isa in isas:
        with native.forced_cpu_isa(isa):
            native_errors[isa] = errors(native.cross_entropy_all, q32, e32, target, truth)

    g = torch.Generator().manual_seed(0)
    q = (torch.rand(2000, 498, generator=g) - 0.5).requires_grad_()
    e = (torch.rand(10488, 498, generator=g) * 0.8 - 0.4).requires_grad_()
    t = torch.randint(0, 10488, (2000,), generator=g)

    def step(isa: str) -> float:
        q.grad = e.grad = None
        with native.forced_cpu_isa(isa):
            return timed(lambda: native.cross_entropy_all(q, e, t).backward())

    times = interleaved({isa: lambda isa=isa: step(isa) for isa in isas}, args.rounds, warmup=1)
    for isa in isas:
        found = zip(COLUMNS, native_errors[isa] + reference_errors, strict=True)
        yield {"isa": isa, "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
               "threads": torch.get_num_threads(), **{k: float(f"{v:.3g}") for k, v in found},
               **spread(times[isa], digits=1)}  # fmt: skip


SPEC = Benchmark("cpu_isa", __doc__, measure, add_arguments)

if __name__ == "__main__":
    SPEC.main()
