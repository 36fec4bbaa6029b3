"""Time one whole RoMem training step with the native backend beside the eager and compiled reference.

The step is ``harness.step`` (the objective ``benchmarks/kernels.py`` times as op ``step``: Phase
2's loss without the time-contrastive term) forward and backward: tail and head queries
(``unrotated_query_indexed``), one 1-vs-all cross-entropy over both directions, and the N3/L4
regulariser over the batch's rows (as ``rotmem.losses``). Providers: ``eager`` and ``compile``
(``torch.compile``) of the reference ops, ``native``, ``native+compile``, ``native-recompute``
(native with the CE gradients recomputed in backward, ``ROTMEM_CE_GRAD_IN_FORWARD=0``),
``native-dense`` (native with dense entity-row gradients, a zero-filled ``[N, 2n]`` table each,
instead of sparse ones: ``rotmem.ops.table_grad``) and ``matmul-floor`` (just the three BLAS
products of the cross-entropy, the bound below which no float32 provider can go). Providers run
interleaved, round by round (``harness.interleaved``), so a change in machine load hits all of them
alike; the CSV has the median and quartiles per provider and each one's speed-up over eager.

    python -m benchmarks.native_step                       # ICEWS05-15 shapes, float32
    python -m benchmarks.native_step --threads 1 --rounds 5
"""

from __future__ import annotations

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.native_step (from the checkout's root)")

import argparse
import csv
import os
import statistics
import sys
from pathlib import Path
from types import ModuleType

import torch

from benchmarks.harness import TAU0, command_line, interleaved, percentile, step, timed
from rotmem.ops import ce_tiles, native, reference

RESULTS = Path(__file__).resolve().parent / "results" / "native_step.csv"
STEP_INPUTS = ("entity", "w", "w_hat", "alpha_logit", "log_s", "log_base", "h", "r", "t", "tau")


def make_problem(
    batch: int, n: int, entities: int, relations: int, dtype: torch.dtype, seed: int = 0
) -> dict:
    """The inputs of ``harness.step`` (tables and speeds are leaves that require grad) for one batch."""
    g = torch.Generator().manual_seed(seed)

    def table(rows: int) -> torch.Tensor:
        return (torch.rand(rows, 2 * n, generator=g) * 0.8 - 0.4).to(dtype).requires_grad_()

    return {
        "entity": table(entities),
        "w": table(relations),
        "w_hat": table(relations),
        "alpha_logit": torch.zeros(relations, dtype=dtype, requires_grad=True),
        "log_s": torch.tensor(0.0, dtype=dtype, requires_grad=True),
        "log_base": torch.tensor(9.21, dtype=dtype, requires_grad=True),
        "h": torch.randint(0, entities, (batch,), generator=g),
        "r": torch.randint(0, relations, (batch,), generator=g),
        "t": torch.randint(0, entities, (batch,), generator=g),
        "tau": (TAU0 + torch.randint(0, 4017, (batch,), generator=g)).to(dtype),
    }


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


def zero_grads(p: dict) -> None:
    for value in p.values():
        if isinstance(value, torch.Tensor) and value.requires_grad:
            value.grad = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--n", type=int, default=249, help="complex dimensions (2n reals)")
    parser.add_argument("--entities", type=int, default=10488)
    parser.add_argument("--relations", type=int, default=251)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument(
        "--providers",
        default="eager,compile,native,native+compile,native-recompute,native-dense,matmul-floor",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if not native.is_available("cpu"):
        sys.exit(f"native backend unavailable: {native.unavailable_reason('cpu')}")
    dtype = getattr(torch, args.dtype)
    p = make_problem(args.batch, args.n, args.entities, args.relations, dtype)
    compiled = torch.compile(train_step)

    def recompute(ops: ModuleType, p: dict) -> torch.Tensor:
        """Native with the CE gradients recomputed in backward instead of computed in the forward sweep."""
        chosen, ce_tiles.CE_GRAD_IN_FORWARD = ce_tiles.CE_GRAD_IN_FORWARD, False
        try:
            return train_step(ops, p)
        finally:
            ce_tiles.CE_GRAD_IN_FORWARD = chosen

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
    losses = {}
    for name in providers:  # warm-up (and compilation), outside the timing
        zero_grads(p)
        losses[name] = float(run[name]())
        run[name]()

    def timer(name: str) -> float:
        zero_grads(p)
        return timed(run[name])

    times = interleaved({name: lambda name=name: timer(name) for name in providers}, args.rounds)

    command = command_line("benchmarks.native_step", argv)
    eager_ms = statistics.median(times["eager"]) if "eager" in times else float("nan")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    new = not args.out.exists()
    with args.out.open("a", newline="") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(
                [
                    "provider",
                    "batch",
                    "n",
                    "entities",
                    "dtype",
                    "threads",
                    "rounds",
                    "ms_median",
                    "ms_q25",
                    "ms_q75",
                    "speedup_vs_eager",
                    "loss",
                    "command",
                ]
            )
        for name in providers:
            q25, median, q75 = (percentile(times[name], q) for q in (25, 50, 75))
            writer.writerow(
                [
                    name,
                    args.batch,
                    args.n,
                    args.entities,
                    args.dtype,
                    torch.get_num_threads(),
                    args.rounds,
                    f"{median:.4g}",  # significant figures: a tiny shape's floor is a few µs
                    f"{q25:.4g}",
                    f"{q75:.4g}",
                    f"{eager_ms / median:.2f}",
                    f"{losses[name]:.6f}",
                    command,
                ]
            )
            print(f"{name:>15}: {median:8.4g} ms  ({eager_ms / median:.2f}x eager)  loss {losses[name]:.6f}")
    print(f"wrote {args.out}  [{command}]  load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
