"""Time and measure the memory of every RoMem op, and of one whole training step, per backend.

Providers: ``eager`` (``rotmem.ops.reference``), ``compile`` (``torch.compile`` of the reference),
``native`` (csrc, when built for the device), ``triton`` (CUDA only), and for the cross-entropy and
the step only ``linear`` (the chunked cuBLAS/BLAS cross-entropy the native backend runs on CUDA),
``liger`` (Liger-Kernel's fused linear cross-entropy) and ``cce`` (Cut Cross-Entropy), both GPU-only
(``benchmarks.ce_providers``: eager ops around the provider's cross-entropy). Precisions: float32,
``tf32`` (float32 tensors, TensorFloat-32 products on a GPU) and bfloat16. Modes: ``forward``
(without autograd, as in evaluation), ``backward`` (a forward that records the graph runs untimed
before it) and ``forward+backward``. A fused cross-entropy that needs gradients computes them in
its forward sweep when the table is small (``rotmem.ops.ce_tiles``), so its ``backward`` is
nearly free and only ``forward+backward`` compares it fairly. Shapes: ICEWS05-15
(B = 1000, n = 249, N = 10,488, R = 251) and a large graph (N = 1,000,000, B = 4,096; on the CPU
a smaller batch, ``--large-batch``, and only the fused cross-entropy by default).

Writes ``<out-dir>/kernels_<device>.csv`` (op, mode, provider, shape, dtype, device, threads,
ms_median, ms_p20, ms_p80, peak_mem_mb, gb_per_s), a summary of the ratios against eager
(``kernels_<device>.txt``) and a chart (``kernels_<device>.png``); prints the command that made it.

Peak memory is the growth of allocated memory above what the inputs already hold, during one
run: ``torch.cuda.max_memory_allocated`` on a GPU; on the CPU the allocator's events recorded by
the PyTorch profiler (every tensor, including those the native and compiled code allocate).
Times on a shared CPU are only comparable as ratios: providers run interleaved, rep by rep.

    python -m benchmarks.kernels                       # this machine's default device
    python -m benchmarks.kernels --device cuda --dtype float32,tf32,bfloat16
    python -m benchmarks.kernels --quick --out-dir /tmp/k   # tiny shapes, seconds (smoke test)
    python -m benchmarks.kernels --budget-s 130             # nothing new starts after 130 s

The issue's targets (rotate's GB/s, the ICEWS05-15 step, the large graph's CE) are measured first
in each dtype. A backend that raises on an op (a kernel that fails to compile, out of memory) is
dropped from that op with a ``FAILED`` line in the summary, the others go on, and the exit code is 1.
"""

from __future__ import annotations

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.kernels (from the checkout's root)")

import argparse
import contextlib
import csv
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch

from benchmarks import ce_providers
from benchmarks.harness import TAU0, command_line, interleaved, percentile, step, synchronize
from benchmarks.plot_kernels import plot
from rotmem.cpu_memory import cpu_peak_bytes
from rotmem.ops import reference
from rotmem.ops.backend import _load, available

OPS = ("rotate", "unrotated_query_indexed", "cross_entropy_all", "n3", "score_all", "step")
MODES = ("forward", "backward", "forward+backward")
PROVIDERS = ("eager", "compile", "native", "triton", *ce_providers.PROVIDERS)
CE_OPS = ("cross_entropy_all", "step")  # the ops the cross-entropy providers time
PRECISIONS = {
    "float32": (torch.float32, False),
    "tf32": (torch.float32, True),
    "bfloat16": (torch.bfloat16, False),
}
COLUMNS = (
    "op",
    "mode",
    "provider",
    "shape",
    "dtype",
    "device",
    "threads",
    "ms_median",
    "ms_p20",
    "ms_p80",
    "peak_mem_mb",
    "gb_per_s",
)


@dataclass(frozen=True)
class Shape:
    name: str
    batch: int
    n: int
    entities: int
    relations: int

    def label(self) -> str:
        return f"{self.name} (B={self.batch}, n={self.n}, N={self.entities})"


ICEWS = Shape("icews05-15", 1000, 249, 10488, 251)
QUICK = Shape("quick", 8, 7, 50, 5)


def large_shape(batch: int) -> Shape:
    return Shape("large", batch, 249, 1_000_000, 251)


def bandwidth_shape(rows: int) -> Shape:
    """``rotate`` on ``rows`` vectors (``make_inputs`` rotates 5 B rows: the contrastive loss's count)."""
    return Shape("bandwidth", max(1, rows // 5), 249, 1, 1)


# --- inputs and calls --------------------------------------------------------------------------
def make_inputs(op: str, shape: Shape, precision: str, device: str) -> tuple[list, list[int]]:
    """Arguments of ``op`` at ``shape`` and the positions of those that take gradients."""
    dtype = PRECISIONS[precision][0]
    g = torch.Generator().manual_seed(0)
    B, n, N, R = shape.batch, shape.n, shape.entities, shape.relations

    def uniform(*size, scale=0.4):
        return ((torch.rand(*size, generator=g) * 2 - 1) * scale).to(device, dtype)

    def ids(high, count=B):
        return torch.randint(0, high, (count,), generator=g).to(device)

    days = (TAU0 + torch.randint(0, 4017, (B,), generator=g).double()).to(device, dtype)
    if op == "rotate":  # the time-contrastive loss rotates B facts at 1 + J = 5 times
        return [uniform(5 * B, 2 * n), uniform(5 * B, n, scale=math.pi)], [0, 1]
    if op == "unrotated_query_indexed":
        tables = [uniform(N, 2 * n), uniform(R, 2 * n), uniform(R, 2 * n)]
        alpha = torch.rand(B, generator=g).to(device, dtype)
        spectrum = [
            torch.tensor(math.log(0.05), device=device, dtype=dtype),
            torch.tensor(9.21, device=device, dtype=dtype),
        ]
        return [*tables, ids(N), ids(R), days, alpha, *spectrum, TAU0], [0, 1, 2, 6, 7, 8]
    if op == "cross_entropy_all":
        return [uniform(B, 2 * n, scale=1.0), uniform(N, 2 * n), ids(N)], [0, 1]
    if op == "score_all":
        return [uniform(B, 2 * n, scale=1.0), uniform(N, 2 * n)], [0, 1]
    if op == "n3":
        return [uniform(B, 2 * n) for _ in range(4)], [0, 1, 2, 3]
    if op == "step":
        tables = [
            uniform(N, 2 * n),
            uniform(R, 2 * n),
            uniform(R, 2 * n),
            torch.zeros(R, device=device, dtype=dtype),
        ]
        spectrum = [
            torch.tensor(math.log(0.05), device=device, dtype=dtype),
            torch.tensor(9.21, device=device, dtype=dtype),
        ]
        return [*tables, *spectrum, ids(N), ids(R), ids(N), days], [0, 1, 2, 3, 4, 5]
    raise ValueError(f"unknown op {op!r}; expected one of {OPS}")


def op_function(op: str, ops_module) -> Callable:
    if op == "step":  # harness.step: the training objective native_step.py times too
        return lambda *args: step(ops_module, *args)
    if op == "n3":
        return lambda *rows: ops_module.n3(list(rows))
    return getattr(ops_module, op)


def providers_for(device: str, wanted: list[str]) -> dict[str, object]:
    """Provider name -> ops module (``compile`` uses the reference) for those that run here."""
    found = {}
    for name in wanted:
        if name not in PROVIDERS:
            raise SystemExit(f"unknown provider {name!r}; expected some of {','.join(PROVIDERS)}")
        if name in ("eager", "compile"):
            found[name] = reference
        elif name in ce_providers.PROVIDERS:
            why = ce_providers.unavailable_reason(name, device)
            if why:
                print(f"provider {name} skipped: {why}", flush=True)
            else:
                found[name] = ce_providers.provider(name)
        elif name == "triton" and device != "cuda":
            continue  # the CPU interpreter is a test tool, not something to time
        elif available(name, device):
            found[name] = _load(name)
    return found


# --- measurement -------------------------------------------------------------------------------
def run_once(fn: Callable, args: list, grad_idx: list[int], mode: str, device: str) -> float:
    """Milliseconds of one ``mode`` run of ``fn(*args)``."""
    wrt = [args[i] for i in grad_idx]
    if mode == "backward":
        out = fn(*args)
        synchronize(device)
    start = time.perf_counter()
    if mode == "forward":
        with torch.no_grad():
            out = fn(*args)
    elif mode == "forward+backward":
        out = fn(*args)
    if mode != "forward":
        torch.autograd.grad(out, wrt, torch.ones_like(out) if out.dim() == 0 else _grad_like(out))
    synchronize(device)
    return (time.perf_counter() - start) * 1e3


_GRADS: dict[tuple, torch.Tensor] = {}


def _grad_like(out: torch.Tensor) -> torch.Tensor:
    key = (tuple(out.shape), out.dtype, out.device)
    if key not in _GRADS:
        _GRADS[key] = torch.randn_like(out)
    return _GRADS[key]


def peak_memory_mb(fn: Callable, args: list, grad_idx: list[int], mode: str, device: str) -> float:
    """Peak growth of allocated memory (MiB) during one ``mode`` run."""
    if device == "cuda":
        synchronize(device)
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        run_once(fn, args, grad_idx, mode if mode != "backward" else "forward+backward", device)
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    run = mode if mode != "backward" else "forward+backward"
    return cpu_peak_bytes(lambda: run_once(fn, args, grad_idx, run, device)) / 2**20


def bytes_moved(op: str, args: list) -> int | None:
    """Bytes a memory-bound op must read and write once (for GB/s), else None."""
    if op == "rotate":
        x, theta = args
        return (2 * x.numel() + theta.numel()) * x.element_size()
    if op == "copy":
        return 2 * args[0].numel() * args[0].element_size()
    return None


def measure(op, shape, dtype, device, providers, modes, reps, warmup) -> tuple[list[dict], list[str]]:
    """Rows of ``op`` per mode and provider, and one line per provider that raised (which is then
    dropped, so one broken backend or an out-of-memory does not stop the others being measured)."""
    args, grad_idx = make_inputs(op, shape, dtype, device)
    for i in grad_idx:
        args[i].requires_grad_(True)
    functions = {}
    for name, module in providers.items():
        fn = op_function(op, module)
        functions[name] = torch.compile(fn) if name == "compile" else fn
    rows, failures = [], []
    for mode in modes:

        def drop(name: str, error: Exception, mode: str = mode) -> None:  # reported; the exit code is 1
            failures.append(failure_line(op, mode, name, shape, dtype, error))
            del functions[name]

        call = (args, grad_idx, mode, device)
        timers = {n: partial(run_once, fn, *call) for n, fn in functions.items()}
        times = interleaved(timers, reps, warmup, drop)
        peaks = interleaved({n: partial(peak_memory_mb, functions[n], *call) for n in times}, 1, 0, drop)
        rows += [row(op, mode, n, shape, dtype, device, times[n], peaks[n][0], None) for n in peaks]
    return rows, failures


def failure_line(op, mode, provider, shape, dtype, error: BaseException) -> str:
    message = str(error).strip().splitlines()
    return (
        f"FAILED {shape.label()} {dtype} {op} {mode} {provider}: "
        f"{type(error).__name__}: {message[0] if message else ''}"
    )


def row(op, mode, provider, shape, dtype, device, times, peak_mb, nbytes) -> dict:
    median = statistics.median(times)
    return {
        "op": op,
        "mode": mode,
        "provider": provider,
        "shape": shape.label(),
        "dtype": dtype,
        "device": device,
        "threads": torch.get_num_threads() if device == "cpu" else "",
        "ms_median": round(median, 4),
        "ms_p20": round(percentile(times, 20), 4),
        "ms_p80": round(percentile(times, 80), 4),
        "peak_mem_mb": round(peak_mb, 3),
        "gb_per_s": "" if nbytes is None else round(nbytes / (median * 1e-3) / 1e9, 2),
    }


def bandwidth_rows(shape, dtype, device, providers, reps, warmup) -> tuple[list[dict], list[str]]:
    """``rotate`` forward beside a plain tensor copy of its input: GB/s against the practical peak;
    and one line per provider that raised."""
    args, _ = make_inputs("rotate", shape, dtype, device)
    rows, failures = [], []
    cases = {"torch": (torch.clone, [args[0]])} | {
        name: (op_function("rotate", m), args) for name, m in providers.items()
    }
    for name, (fn, fn_args) in cases.items():
        fn = torch.compile(fn) if name == "compile" else fn
        op = "copy" if name == "torch" else "rotate"
        try:
            for _ in range(warmup):
                run_once(fn, fn_args, [], "forward", device)
            times = [run_once(fn, fn_args, [], "forward", device) for _ in range(reps)]
            peak = peak_memory_mb(fn, fn_args, [], "forward", device)
        except Exception as error:  # noqa: BLE001 - reported in the summary, and the exit code is 1
            failures.append(failure_line(op, "forward", name, shape, dtype, error))
            continue
        rows.append(row(op, "forward", name, shape, dtype, device, times, peak, bytes_moved(op, fn_args)))
    return rows, failures


@dataclass(frozen=True)
class Job:
    """One measurement: ``op`` at ``shape`` in ``dtype`` (rotate at the bandwidth shape: the GB/s test)."""

    op: str
    shape: Shape
    dtype: str  # a key of PRECISIONS

    def label(self) -> str:
        return f"{self.shape.label()} {self.dtype} {self.op}"


TARGETS = {("bandwidth", "rotate"), ("icews05-15", "step"), ("large", "cross_entropy_all")}


def plan(jobs: list[Job], dtypes: list[str]) -> list[Job]:
    """``jobs`` reordered so that, per dtype in the order given, the issue's targets (rotate's GB/s,
    the ICEWS05-15 step, the large graph's CE) come first: a run stopped by ``--budget-s`` or a time
    limit then has them."""
    return sorted(jobs, key=lambda j: (dtypes.index(j.dtype), (j.shape.name, j.op) not in TARGETS))


# --- reporting ---------------------------------------------------------------------------------
def summary(rows: list[dict]) -> list[str]:
    """Speed-up (eager ms / provider ms) and memory ratio (provider / eager) per op and mode."""
    lines = []
    eager = {(r["op"], r["mode"], r["shape"], r["dtype"]): r for r in rows if r["provider"] == "eager"}
    for r in rows:
        base = eager.get((r["op"], r["mode"], r["shape"], r["dtype"]))
        if r["provider"] == "eager" or base is None:
            continue
        speed = base["ms_median"] / r["ms_median"] if r["ms_median"] else float("nan")
        memory = f"{r['peak_mem_mb'] / base['peak_mem_mb']:5.2f}x" if base["peak_mem_mb"] else "  n/a"
        lines.append(
            f"{r['shape']:<40} {r['dtype']:<8} {r['op']:<24} {r['mode']:<17} {r['provider']:<8} "
            f"{speed:6.2f}x faster than eager   peak memory {memory} eager"
        )
    for r in rows:
        if r["gb_per_s"] != "":
            lines.append(
                f"{r['shape']:<40} {r['dtype']:<8} {r['op']:<24} {r['provider']:<8} {r['gb_per_s']} GB/s"
            )
    return lines


def run_job(job: Job, device: str, providers, compile_ops, reps: int, warmup: int):
    """Rows and failure lines of one job, in every mode it is timed in."""
    providers = {k: v for k, v in providers.items() if k not in ce_providers.PROVIDERS or job.op in CE_OPS}
    if job.shape.name == "bandwidth":
        providers = {k: v for k, v in providers.items() if k not in ce_providers.PROVIDERS}
        with tf32_products(PRECISIONS[job.dtype][1], device):
            return bandwidth_rows(job.shape, job.dtype, device, providers, reps, warmup)
    providers = {k: v for k, v in providers.items() if k != "compile" or job.op in compile_ops}
    modes = ("forward",) if job.op == "score_all" else MODES
    if job.shape.name == "large":  # each run takes tens of seconds on a CPU, tenths on a GPU
        if device == "cuda":
            reps = max(3, reps // 10)
        else:
            modes, reps, warmup = ("forward+backward",), 1, 0
    with tf32_products(PRECISIONS[job.dtype][1], device):
        return measure(job.op, job.shape, job.dtype, device, providers, modes, reps, warmup)


@contextlib.contextmanager
def tf32_products(enabled: bool, device: str):
    """TensorFloat-32 matrix products (and convolutions) on a GPU for the duration, when ``enabled``."""
    if not enabled or device != "cuda":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32", help="comma-separated: float32,tf32,bfloat16")
    parser.add_argument("--shapes", default="icews,large", help="comma-separated: icews,large")
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--providers", default=",".join(PROVIDERS))
    parser.add_argument("--compile-ops", default=None, help="ops for the compile provider (default: all)")
    parser.add_argument("--reps", type=int, default=None, help="timed reps (default 10 on CPU, 50 on GPU)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    parser.add_argument(
        "--compile-shapes", default="icews05-15,bandwidth", help="shapes for the compile provider (or: large)"
    )
    parser.add_argument(
        "--bandwidth-rows", type=int, default=None, help="rows of rotate's GB/s test (GPU 2**20)"
    )
    parser.add_argument(
        "--large-batch", type=int, default=None, help="B of the large graph (CPU default 1024)"
    )
    parser.add_argument(
        "--large-ops", default=None, help="ops at the large shape (CPU default cross_entropy_all)"
    )
    parser.add_argument(
        "--budget-s", type=float, default=None, help="start no measurement after this many seconds"
    )
    parser.add_argument("--quick", action="store_true", help="tiny shapes and 2 reps: a smoke test")
    parser.add_argument("--out-dir", default=str(Path(__file__).resolve().parent / "results"))
    args = parser.parse_args(argv)
    command = command_line("benchmarks.kernels", argv)
    device = args.device
    if args.threads:
        torch.set_num_threads(args.threads)
    if device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but no CUDA device is visible")
    on_gpu = device == "cuda"
    reps = args.reps or (2 if args.quick else 50 if on_gpu else 10)
    dtypes = args.dtype.split(",")
    for name in dtypes:
        if name not in PRECISIONS:
            parser.error(f"unknown --dtype {name!r}; expected some of {','.join(PRECISIONS)}")
        if name == "tf32" and not on_gpu:
            parser.error("--dtype tf32 needs --device cuda (the CPU has no TensorFloat-32 products)")
    ops = args.ops.split(",")
    compile_ops = ops if args.compile_ops is None else args.compile_ops.split(",")
    large_ops = (args.large_ops or (",".join(ops) if on_gpu else "cross_entropy_all")).split(",")
    shapes = [QUICK] if args.quick else []
    if not args.quick:
        for name in args.shapes.split(","):
            shapes.append(
                ICEWS if name == "icews" else large_shape(args.large_batch or (4096 if on_gpu else 1024))
            )
    providers = providers_for(device, args.providers.split(","))
    compile_shapes = args.compile_shapes.split(",")

    def providers_at(shape: Shape) -> dict[str, object]:
        if shape.name == "quick" or shape.name in compile_shapes:
            return providers
        return {k: v for k, v in providers.items() if k != "compile"}

    print(f"device {device}, providers {list(providers)}, reps {reps}", flush=True)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, txt_path = out / f"kernels_{device}.csv", out / f"kernels_{device}.txt"

    def save(rows: list[dict], notes: list[str]) -> list[str]:
        """Write the CSV and the summary so far (a run stopped at a time limit keeps what it measured)."""
        with csv_path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        lines = summary(rows) + notes
        txt_path.write_text("\n".join([f"# {command}", *lines]) + "\n")
        return lines

    jobs = []
    if "rotate" in ops:
        rows_rotated = 40 if args.quick else args.bandwidth_rows or (1 << 20 if on_gpu else 5000)
        jobs += [Job("rotate", bandwidth_shape(rows_rotated), dtype) for dtype in dtypes]
    for shape in shapes:
        jobs += [
            Job(op, shape, dtype)
            for dtype in dtypes
            for op in ops
            if shape.name != "large" or op in large_ops
        ]
    rows: list[dict] = []
    failures: list[str] = []
    skipped: list[str] = []
    started = time.perf_counter()
    for job in plan(jobs, dtypes):
        if args.budget_s is not None and time.perf_counter() - started >= args.budget_s:
            skipped.append(f"skipped (the {args.budget_s:g} s budget was spent): {job.label()}")
            continue
        t0 = time.perf_counter()
        new, failed = run_job(job, device, providers_at(job.shape), compile_ops, reps, args.warmup)
        rows += new
        failures += failed
        for r in new:
            print(
                f"{r['shape']:<40} {r['dtype']:<8} {r['op']:<24} {r['mode']:<17} {r['provider']:<8} "
                f"{r['ms_median']:>10.3f} ms  {r['peak_mem_mb']:>10.1f} MiB",
                flush=True,
            )
        for line in failed:
            print(line, file=sys.stderr, flush=True)
        print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
        save(rows, failures)

    lines = save(rows, failures + skipped)
    written = [csv_path, txt_path]
    if any(r["op"] != "copy" and r["provider"] != "eager" for r in rows):  # the chart is vs eager
        written.append(out / f"kernels_{device}.png")
        plot(csv_path, written[-1])
    print("\n".join(lines))
    print("wrote " + ", ".join(map(str, written)))
    print(f"made by: {command}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
