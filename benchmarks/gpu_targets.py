"""Targets for the day a GPU comes: each op's bytes, FLOPs and roofline time at the kernel
benchmark's shapes on an H200 and an A100, the occupancy ptxas's register counts allow the CUDA
kernels, and the paper-size epoch's floor. Arithmetic, no GPU: the figures a measurement is
compared against (``docs/gpu.md``).

    python -m benchmarks.gpu_targets  # benchmarks/results/gpu_{targets,epoch_floor,occupancy}.csv;
                                      # gpu_targets.md has docs/gpu.md's tables
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.gpu_targets (from the checkout's root)")

import argparse
import math
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product

from benchmarks.kernels import ICEWS, Shape, bandwidth_shape, large_shape
from benchmarks.runner import RESULTS, Benchmark, Row, command_line, commit_of, read_csv, write_csv


@dataclass(frozen=True)
class Gpu:
    name: str
    bandwidth: float  # bytes/s of HBM
    bf16: float  # dense bfloat16 tensor-core FLOP/s
    fp32: float  # float32 CUDA-core FLOP/s (no TF32)


GPUS = (Gpu("H200", 4.8e12, 989e12, 67e12), Gpu("A100", 2.0e12, 312e12, 19.5e12))
BYTES = {"float32": 4, "bfloat16": 2}
SINCOS = 40  # FLOPs of one sine and cosine
THREADS = 256  # each CUDA kernel's block (csrc/cuda: kThreads; row kernels' threads_for_row at these widths)
# the kernel benchmark's shapes on a GPU; rotate of 2**20 rows
SHAPES = {ICEWS: ("rotate", "unrotated_query_indexed", "cross_entropy_all", "score_all", "n3", "step"),
          large_shape(4096): ("cross_entropy_all", "step"), bandwidth_shape(2**20): ("rotate",)}  # fmt: skip


def cost(op: str, mode: str, shape: Shape, dtype: str) -> tuple[float, float, float]:
    """``(bytes, matmul FLOPs, elementwise FLOPs)`` of ``op`` in ``mode`` at ``shape``."""
    es, acc = BYTES[dtype], 4
    b, n, big_n = shape.batch, shape.n, shape.entities
    d = 2 * n
    if op == "rotate":  # 5B rows (the contrastive loss): x [M, 2n], theta [M, n] -> y [M, 2n]
        m = 5 * b
        forward = (2 * d + n) * m * es, 0.0, (6 + SINCOS) * n * m
        backward = (3 * d + 2 * n) * m * es, 0.0, (12 + SINCOS) * n * m  # read g, x, theta; write gx, gtheta
    elif op == "unrotated_query_indexed":  # gather e, w, w_hat rows; q [B, 2n]
        forward = 4 * d * b * es, 0.0, (16 + SINCOS) * n * b
        # read g, e, w, w_hat; write entity rows (float32); relation atomics read+write float32 [B, 2n] x 2
        backward = (4 * d * b * es + d * b * acc + 2 * 2 * d * b * acc), 0.0, (40 + SINCOS) * n * b
    elif op == "cross_entropy_all":  # q [B, 2n], entity [N, 2n], tiles [B, N]
        tiles = b * big_n * es
        forward = (b * d + big_n * d) * es + 2 * tiles, 2 * b * big_n * d, 4 * b * big_n
        # in the forward sweep (small tables) or recomputed: 2 more products, tile read and rewritten,
        # read twice more; gradients written in float32
        backward = (
            (b * d + big_n * d) * es + 3 * tiles + (b + big_n) * d * acc,
            4 * b * big_n * d,
            4 * b * big_n,
        )
    elif op == "score_all":
        forward = (b * d + big_n * d + b * big_n) * es, 2 * b * big_n * d, 0.0
        backward = (b * d + big_n * d + b * big_n) * es * 2, 4 * b * big_n * d, 0.0
    elif op == "n3":  # 4 tensors [B, 2n]
        forward = 4 * b * d * es, 0.0, 4 * 4 * b * d
        backward = 4 * 2 * b * d * es, 0.0, 4 * 5 * b * d
    elif op == "step":  # 2B queries (both directions), CE over all entities, N3 of 3B rows
        two = Shape(shape.name, 2 * b, n, big_n, shape.relations)
        parts = [cost(part, mode, two, dtype) for part in ("unrotated_query_indexed", "cross_entropy_all")]
        parts.append(tuple(x * 3 / 4 for x in cost("n3", mode, shape, dtype)))
        return tuple(sum(p[i] for p in parts) for i in range(3))
    else:
        raise ValueError(f"unknown op {op!r}")
    if mode == "forward":
        return forward
    return tuple(f + g for f, g in zip(forward, backward, strict=True))


def roofline_s(gpu: Gpu, dtype: str, nbytes: float, matmul: float, elementwise: float) -> tuple[float, str]:
    """The floor time and what bounds it (``memory`` or ``compute``)."""
    memory = nbytes / gpu.bandwidth
    compute = matmul / (gpu.bf16 if dtype == "bfloat16" else gpu.fp32) + elementwise / gpu.fp32
    return max(memory, compute), "memory" if memory >= compute else "compute"


def occupancy(registers: int, threads: int, shared_bytes: int = 0) -> float:
    """Resident warps per SM / 64 for a block of ``threads`` using ``registers`` per thread."""
    warps_per_block = math.ceil(threads / 32)
    regs_per_warp = math.ceil(max(registers, 1) * 32 / 256) * 256
    warps_by_regs = 65536 // regs_per_warp
    blocks = min(warps_by_regs // warps_per_block, 32, 64 // warps_per_block)
    if shared_bytes:
        blocks = min(blocks, (228 * 1024) // shared_bytes)  # H100's 228 KB (A100: 164 KB) per SM
    return blocks * warps_per_block / 64


def targets(args: argparse.Namespace) -> Iterator[Row]:
    """Per op, mode, shape and dtype: bytes, FLOPs and floors; the epoch's floor and occupancy beside."""
    out = args.out.parent
    command, commit = command_line("gpu_targets"), commit_of()
    write_csv(out / "gpu_epoch_floor.csv", epoch_floor(), command, commit)
    if occ := occupancies():
        write_csv(out / "gpu_occupancy.csv", occ, command, commit)
    for shape, ops in SHAPES.items():
        for op, mode, dtype in product(ops, ("forward", "forward+backward"), BYTES):
            nbytes, matmul, elementwise = cost(op, mode, shape, dtype)
            row = {"op": op, "mode": mode, "shape": shape.name, "B": shape.batch, "n": shape.n,
                   "N": shape.entities, "dtype": dtype, "bytes": int(nbytes), "matmul_flop": int(matmul),
                   "elementwise_flop": int(elementwise)}  # fmt: skip
            for gpu in GPUS:
                seconds, bound = roofline_s(gpu, dtype, nbytes, matmul, elementwise)
                row |= {f"{gpu.name}_us": round(seconds * 1e6, 2), f"{gpu.name}_bound": bound}
            yield row


def epoch_floor() -> list[Row]:
    """The paper-size epoch (ICEWS05-15, 368,962 facts in batches of 1000, dim 500): its steps'
    FLOPs and floor time per GPU and dtype."""
    steps = math.ceil(368_962 / 1000)
    rows = []
    for dtype in BYTES:
        nbytes, matmul, elementwise = cost("step", "forward+backward", ICEWS, dtype)
        row = {"steps": steps, "dtype": dtype, "flop": f"{steps * (matmul + elementwise):.3e}",
               "bytes": f"{steps * nbytes:.3e}"}  # fmt: skip
        for gpu in GPUS:
            row[f"{gpu.name}_s"] = round(steps * roofline_s(gpu, dtype, nbytes, matmul, elementwise)[0], 3)
        rows.append(row)
    return rows


def occupancies() -> list[Row]:
    """Occupancy of every CUDA kernel in ptxas's report (``.ci/cuda_compile.sh``)."""
    if not (RESULTS / "cuda_ptxas.csv").is_file():
        return []
    rows = read_csv(RESULTS / "cuda_ptxas.csv", comments=True)
    share = [occupancy(int(r["registers"]), THREADS, int(r["shared_bytes"])) for r in rows]
    keys = ("file", "arch", "kernel", "registers")
    return [{k: r[k] for k in keys} | {"threads": THREADS, "occupancy": round(s, 3)}
            for r, s in zip(rows, share, strict=True)]  # fmt: skip


def markdown(rows: list[Row]) -> list[str]:
    """The tables of ``docs/gpu.md``: forward + backward targets, and occupancy per CUDA kernel."""
    out = ["| op | shape | dtype | MB moved | GFLOP | H200 floor (µs) | A100 floor (µs) | bound |",
           "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]  # fmt: skip
    for r in rows:
        if r["mode"] == "forward+backward":
            flop = (r["matmul_flop"] + r["elementwise_flop"]) / 1e9
            cells = [f"`{r['op']}`", r["shape"], r["dtype"], f"{r['bytes'] / 1e6:,.1f}", f"{flop:,.2f}",
                     f"{r['H200_us']:,}", f"{r['A100_us']:,}", r["H200_bound"]]  # fmt: skip
            out.append("| " + " | ".join(cells) + " |")
    header = "| CUDA kernel (every dtype) | registers sm_80 / sm_90 (most) | occupancy sm_80 / 90 (least) |"
    out += ["", header, "| --- | ---: | ---: |"]
    by_kernel: dict[tuple[str, str], list[dict]] = {}
    for r in occupancies():  # "void rotmem::(anonymous namespace)::name<dtypes>(args)" -> "file: name"
        name = r["kernel"].replace("rotmem::(anonymous namespace)::", "").removeprefix("void ").split("<")[0]
        by_kernel.setdefault((f"{r['file']}: {name.split('(')[0]}", r["arch"]), []).append(r)
    for kernel in sorted({k for k, _ in by_kernel}):
        regs, share = [], []
        for arch in ("sm_80", "sm_90"):
            rows = by_kernel.get((kernel, arch), [])
            regs.append(str(max((int(r["registers"]) for r in rows), default="-")))
            share.append(str(min((r["occupancy"] for r in rows), default="-")))
        out.append(f"| `{kernel}` | {' / '.join(regs)} | {' / '.join(share)} |")
    return [*(f"{r}" for r in epoch_floor()), "", *out]


SPEC = Benchmark(
    "gpu_targets", __doc__, targets, summarize=markdown, columns=("op", "mode", "shape", "dtype")
)

if __name__ == "__main__":
    SPEC.main()
