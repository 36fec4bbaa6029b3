"""Time one whole RoMem training step with the native backend beside the eager and compiled reference.

The step is Phase 2's loss without the time-contrastive term, forward and backward:
tail and head queries (``unrotated_query_indexed``), one 1-vs-all cross-entropy over both
directions, and the N3/L4 regulariser over the batch's rows (as ``rotmem.losses``).
Providers: ``eager`` and ``compile`` (``torch.compile``) of the reference ops, ``native``,
``native+compile``, ``native-recompute`` (native with the CE gradients recomputed in backward,
``ROTMEM_CE_GRAD_IN_FORWARD=0``), ``native-dense`` (native with dense entity-row gradients, a
zero-filled ``[N, 2n]`` table each, instead of sparse ones: ``rotmem.ops.table_grad``) and
``matmul-floor`` (just the three BLAS products of the cross-entropy, the bound below which no
float32 provider can go). Providers
run interleaved, round by round, so a change in machine load hits all of them alike; the CSV has
the median and quartiles per provider and each one's speed-up over eager.

    python benchmarks/native_step.py                       # ICEWS05-15 shapes, float32
    python benchmarks/native_step.py --threads 1 --rounds 5
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

import torch

from rotmem.ops import ce_tiles, native, reference
from rotmem.ops.table_grad import gather_rows

RESULTS = Path(__file__).resolve().parent / "results" / "native_step.csv"


def make_problem(
    batch: int, n: int, entities: int, relations: int, dtype: torch.dtype, seed: int = 0
) -> dict:
    """Tables (leaf tensors that require grad) and one batch of facts, as RoMem trains them."""
    g = torch.Generator().manual_seed(seed)

    def table(rows: int) -> torch.Tensor:
        return (torch.rand(rows, 2 * n, generator=g) * 0.8 - 0.4).to(dtype).requires_grad_()

    return {
        "entity": table(entities),
        "w": table(relations),
        "w_hat": table(relations),
        "log_s": torch.tensor(0.0, dtype=dtype, requires_grad=True),
        "log_base": torch.tensor(9.21, dtype=dtype, requires_grad=True),
        "h": torch.randint(0, entities, (batch,), generator=g),
        "r": torch.randint(0, relations, (batch,), generator=g),
        "t": torch.randint(0, entities, (batch,), generator=g),
        "tau": torch.randint(0, 4017, (batch,), generator=g).to(dtype),
        "alpha": torch.ones(batch, dtype=dtype),
    }


def step(ops: ModuleType, p: dict, sparse: bool | None = None) -> torch.Tensor:
    """Forward and backward of ``½(CE_tail + CE_head) + 0.01·N3/B``; returns the loss. ``sparse``:
    the entity rows' gradients sparse (default: for the fused backends, as ``rotmem.losses``)."""
    e, w, v, h, r, t = p["entity"], p["w"], p["w_hat"], p["h"], p["r"], p["t"]
    ht, rr = torch.cat([h, t]), torch.cat([r, r])
    tau, alpha = torch.cat([p["tau"], p["tau"]]), torch.cat([p["alpha"], p["alpha"]])
    angle = (tau, alpha, p["log_s"], p["log_base"], 0.0)
    sparse = ops is not reference if sparse is None else sparse
    candidates = torch.ops.aten.alias(e) if sparse else e  # see losses.one_vs_all_loss
    queries = ops.unrotated_query_indexed(e, w, v, ht, rr, *angle, sparse_grad=sparse)  # tails, heads
    loss = ops.cross_entropy_all(queries, candidates, torch.cat([t, h]))
    rows = [gather_rows(e, ht, sparse), w.index_select(0, r), v.index_select(0, r)]
    loss = loss + 0.01 * ops.n3(rows) / h.shape[0]
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
    compiled = torch.compile(step)

    def recompute(ops: ModuleType, p: dict) -> torch.Tensor:
        """Native with the CE gradients recomputed in backward instead of computed in the forward sweep."""
        chosen, ce_tiles.CE_GRAD_IN_FORWARD = ce_tiles.CE_GRAD_IN_FORWARD, False
        try:
            return step(ops, p)
        finally:
            ce_tiles.CE_GRAD_IN_FORWARD = chosen

    run = {
        "eager": lambda: step(reference, p),
        "compile": lambda: compiled(reference, p),
        "native": lambda: step(native, p),
        "native+compile": lambda: compiled(native, p),
        "native-recompute": lambda: recompute(native, p),
        "native-dense": lambda: step(native, p, sparse=False),
        "matmul-floor": lambda: matmul_floor(p),
    }
    providers = args.providers.split(",")
    losses = {}
    for name in providers:  # warm-up (and compilation), outside the timing
        zero_grads(p)
        losses[name] = float(run[name]())
        run[name]()
    times: dict[str, list[float]] = {name: [] for name in providers}
    for _ in range(args.rounds):
        for name in providers:
            zero_grads(p)
            start = time.perf_counter()
            run[name]()
            times[name].append((time.perf_counter() - start) * 1e3)

    command = "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])])
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
            q25, median, q75 = (
                statistics.quantiles(times[name], n=4) if args.rounds > 1 else [times[name][0]] * 3
            )
            median = statistics.median(times[name])
            writer.writerow(
                [
                    name,
                    args.batch,
                    args.n,
                    args.entities,
                    args.dtype,
                    torch.get_num_threads(),
                    args.rounds,
                    f"{median:.1f}",
                    f"{q25:.1f}",
                    f"{q75:.1f}",
                    f"{eager_ms / median:.2f}",
                    f"{losses[name]:.6f}",
                    command,
                ]
            )
            print(f"{name:>15}: {median:8.1f} ms  ({eager_ms / median:.2f}x eager)  loss {losses[name]:.6f}")
    print(f"wrote {args.out}  [{command}]  load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
