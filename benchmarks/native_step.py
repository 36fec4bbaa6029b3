"""Time one whole RoMem training step with the native backend beside the eager and compiled reference.

python -m benchmarks.native_step --threads 2 --rounds 9
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.native_step (from the checkout's root)")

import argparse
import statistics
from collections.abc import Iterator
from types import ModuleType

import torch

from benchmarks.harness import TAU0, step
from benchmarks.runner import Benchmark, Row, add_threads, interleaved, percentile, timed
from rotmem.ops import ce_tiles, native, reference

STEP_INPUTS = ("entity", "w", "w_hat", "alpha_logit", "log_s", "log_base", "h", "r", "t", "tau")
PROVIDERS = "eager,compile,native,native+compile,native-recompute,native-dense,matmul-floor"


def make_problem(batch: int, n: int, entities: int, relations: int, dtype: torch.dtype) -> dict:
    """The inputs of ``harness.step`` (tables and speeds are leaves that require grad) for one batch."""
    g = torch.Generator().manual_seed(0)

    def table(rows: int) -> torch.Tensor:
        return (torch.rand(rows, 2 * n, generator=g) * 0.8 - 0.4).to(dtype).requires_grad_()

    def ids(high: int) -> torch.Tensor:
        return torch.randint(0, high, (batch,), generator=g)

    def leaf(value) -> torch.Tensor:
        return torch.as_tensor(value, dtype=dtype).requires_grad_()

    p = {"entity": table(entities), "w": table(relations), "w_hat": table(relations)}
    p |= {"alpha_logit": leaf(torch.zeros(relations)), "log_s": leaf(0.0), "log_base": leaf(9.21)}
    p |= {"h": ids(entities), "r": ids(relations), "t": ids(entities)}
    return p | {"tau": (TAU0 + torch.randint(0, 4017, (batch,), generator=g)).to(dtype)}


def train_step(ops: ModuleType, p: dict, sparse: bool | None = None) -> torch.Tensor:
    """``harness.step`` forward and backward; returns the loss."""
    loss = step(ops, *(p[name] for name in STEP_INPUTS), sparse=sparse)
    loss.backward()
    return loss.detach()


def matmul_floor(p: dict) -> torch.Tensor:
    """Only the three [2B, N, 2n] products any 1-vs-all CE step needs (logits, dq, dentity), into
    buffers made once: a lower bound for every provider that computes in the tables' dtype with BLAS."""
    e = p["entity"].detach()
    if "floor" not in p:
        q = e[torch.cat([p["h"], p["t"]])]
        p["floor"] = (q, q.new_empty(q.shape[0], e.shape[0]), torch.empty_like(q), torch.empty_like(e))
    q, logits, dq, de = p["floor"]
    torch.mm(q, e.t(), out=logits)
    torch.mm(logits, e, out=dq)
    torch.mm(logits.t(), q, out=de)
    return dq[0, 0] + de[0, 0]


def recompute(ops: ModuleType, p: dict) -> torch.Tensor:
    """The CE gradients recomputed in backward instead of computed in the forward sweep."""
    chosen, ce_tiles.CE_GRAD_IN_FORWARD = ce_tiles.CE_GRAD_IN_FORWARD, False
    try:
        return train_step(ops, p)
    finally:
        ce_tiles.CE_GRAD_IN_FORWARD = chosen


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--n", type=int, default=249, help="complex dimensions (2n reals)")
    parser.add_argument("--entities", type=int, default=10488)
    parser.add_argument("--relations", type=int, default=251)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--rounds", type=int, default=7)
    add_threads(parser)
    parser.add_argument("--providers", default=PROVIDERS)


def measure(args: argparse.Namespace) -> Iterator[Row]:
    if not native.is_available("cpu"):
        raise SystemExit(f"native backend unavailable: {native.unavailable_reason('cpu')}")
    p = make_problem(args.batch, args.n, args.entities, args.relations, getattr(torch, args.dtype))
    compiled = torch.compile(train_step)
    run = {
        "eager": lambda: train_step(reference, p),
        "compile": lambda: compiled(reference, p),
        "native": lambda: train_step(native, p),
        "native+compile": lambda: compiled(native, p),
        "native-recompute": lambda: recompute(native, p),
        "native-dense": lambda: train_step(native, p, sparse=False),
        "matmul-floor": lambda: matmul_floor(p),
    }
    providers = args.providers.split(",")

    def timer(name: str) -> float:
        for value in p.values():
            if isinstance(value, torch.Tensor) and value.requires_grad:
                value.grad = None
        return timed(run[name])

    losses = {}
    for name in providers:  # warm-up (and compilation), outside the timing
        losses[name] = float(run[name]())
        timer(name)
    times = interleaved({name: lambda name=name: timer(name) for name in providers}, args.rounds)
    eager_ms = statistics.median(times["eager"]) if "eager" in times else float("nan")
    for name in providers:
        q25, median, q75 = (float(f"{percentile(times[name], q):.4g}") for q in (25, 50, 75))
        yield {"provider": name, "batch": args.batch, "n": args.n, "entities": args.entities,
               "dtype": args.dtype, "threads": torch.get_num_threads(), "rounds": args.rounds,
               "ms_median": median, "ms_q25": q25, "ms_q75": q75,
               "speedup_vs_eager": round(eager_ms / median, 2), "loss": round(losses[name], 6)}  # fmt: skip


SPEC = Benchmark("native_step", __doc__, measure, add_arguments)

if __name__ == "__main__":
    SPEC.main()
