"""Time and measure the memory of every RoMem op, and of one whole training step, per backend.

python -m benchmarks.kernels --device cuda --dtype float32,tf32,bfloat16 --budget-s 130
python -m benchmarks.kernels --quick --out-dir /tmp/k   # tiny shapes, seconds (smoke test)
python -m benchmarks.kernels --device cpu --shapes icews --ops step --modes forward+backward --reps 9 \
    --providers eager,compile,native,native+compile,native-recompute,native-dense,matmul-floor --threads 2
python -m benchmarks.kernels --device cpu --shapes icews --ops cross_entropy_all,rotate --threads 1 \
    --providers eager,native-avx512,native-avx2,native-baseline   # the native ops per instruction set
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.kernels (from the checkout's root)")

import argparse
import contextlib
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import torch

from benchmarks.harness import TAU0, cpu_peak_bytes, step
from benchmarks.runner import (
    Benchmark,
    Row,
    add_threads,
    comma_list,
    command_line,
    interleaved,
    spread,
    timed,
)
from rotmem.ops import ce_tiles, native, reference
from rotmem.ops.backend import _load, available
from rotmem.ops.linear_cross_entropy import linear_cross_entropy

OPS = ("rotate", "unrotated_query_indexed", "cross_entropy_all", "n3", "score_all", "step")
MODES = ("forward", "backward", "forward+backward")
DEFAULT_PROVIDERS = ("eager", "compile", "native", "triton", "linear", "liger", "cce")
STEP_PROVIDERS = ("native-recompute", "native-dense", "matmul-floor")  # variants of the native step
CPU_ISAS = ("avx512", "avx2", "baseline")  # native-<isa>: the native ops under that instruction set
PROVIDERS = (*DEFAULT_PROVIDERS, "native+compile", *STEP_PROVIDERS, *(f"native-{isa}" for isa in CPU_ISAS))
CE_OPS = ("cross_entropy_all", "step")  # the ops the cross-entropy providers time
PRECISIONS = {"float32": torch.float32, "tf32": torch.float32, "bfloat16": torch.bfloat16}  # tf32: on a GPU
COLUMNS = ("op", "mode", "provider", "shape", "dtype", "device", "threads", "ms_median", "ms_p20", "ms_p80",
           "peak_mem_mb", "gb_per_s")  # fmt: skip
COMPILE_SHAPES = ("quick", "icews05-15", "bandwidth")  # compiling at the large shape takes minutes


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


def make_inputs(op: str, shape: Shape, precision: str, device: str) -> tuple[list, list[int]]:
    """Arguments of ``op`` at ``shape`` and the positions of those that take gradients."""
    dtype = PRECISIONS[precision]
    g = torch.Generator().manual_seed(0)
    B, n, N, R = shape.batch, shape.n, shape.entities, shape.relations

    def uniform(*size, scale=0.4):
        return ((torch.rand(*size, generator=g) * 2 - 1) * scale).to(device, dtype)

    def ids(high, count=B):
        return torch.randint(0, high, (count,), generator=g).to(device)

    def scalar(value):
        return torch.tensor(value, device=device, dtype=dtype)

    days = (TAU0 + torch.randint(0, 4017, (B,), generator=g).double()).to(device, dtype)
    spectrum = [scalar(math.log(0.05)), scalar(9.21)]  # log s, log base
    if op == "rotate":  # the time-contrastive loss rotates B facts at 1 + J = 5 times
        return [uniform(5 * B, 2 * n), uniform(5 * B, n, scale=math.pi)], [0, 1]
    if op == "unrotated_query_indexed":
        tables = [uniform(N, 2 * n), uniform(R, 2 * n), uniform(R, 2 * n)]
        alpha = torch.rand(B, generator=g).to(device, dtype)
        return [*tables, ids(N), ids(R), days, alpha, *spectrum, TAU0], [0, 1, 2, 6, 7, 8]
    if op in ("cross_entropy_all", "score_all"):
        args = [uniform(B, 2 * n, scale=1.0), uniform(N, 2 * n), ids(N)]
        return args[: 3 if op == "cross_entropy_all" else 2], [0, 1]
    if op == "n3":
        return [uniform(B, 2 * n) for _ in range(4)], [0, 1, 2, 3]
    if op == "step":
        tables = [uniform(N, 2 * n), uniform(R, 2 * n), uniform(R, 2 * n), scalar(0.0).expand(R).clone()]
        return [*tables, *spectrum, ids(N), ids(R), ids(N), days], [0, 1, 2, 3, 4, 5]
    raise ValueError(f"unknown op {op!r}; expected one of {OPS}")


def op_function(op: str, ops_module, provider: str = "") -> Callable:
    if provider == "matmul-floor":
        return matmul_floor
    if op == "step":  # harness.step: the training objective
        sparse = False if provider == "native-dense" else None  # native-dense: dense entity-row gradients
        return lambda *args: step(ops_module, *args, sparse=sparse)
    if op == "n3":
        return lambda *rows: ops_module.n3(list(rows))
    return getattr(ops_module, op)


def recomputed(fn: Callable) -> Callable:
    """``fn`` with the cross-entropy's gradients recomputed in backward, not made in the forward sweep."""
    return mock.patch.object(ce_tiles, "CE_GRAD_IN_FORWARD", False)(fn)


def in_isa(provider: str, fn: Callable) -> Callable:
    """``fn`` under the CPU instruction set ``provider`` forces (``native-avx2``: AVX2), else ``fn``."""
    isa = provider.removeprefix("native-")
    return native.forced_cpu_isa(isa)(fn) if isa in CPU_ISAS else fn  # a context manager as decorator


_FLOOR: dict[tuple, tuple] = {}


def matmul_floor(entity, w, w_hat, alpha_logit, log_s, log_base, h, r, t, tau) -> torch.Tensor:
    """Only the three [2B, N, 2n] products any 1-vs-all CE step needs (logits, dq, dentity), into
    buffers made once: a lower bound for every provider that computes in the tables' dtype with BLAS.
    Not differentiable: timed as one forward + backward."""
    e = entity.detach()
    key = (e.data_ptr(), h.data_ptr())
    if key not in _FLOOR:
        q = e[torch.cat([h, t])]
        _FLOOR[key] = (q, q.new_empty(q.shape[0], e.shape[0]), torch.empty_like(q), torch.empty_like(e))
    q, logits, dq, de = _FLOOR[key]
    torch.mm(q, e.t(), out=logits)
    torch.mm(logits, e, out=dq)
    torch.mm(logits.t(), q, out=de)
    return dq[0, 0] + de[0, 0]


# Other implementations of the 1-vs-all cross-entropy, as providers: the reference ops with their
# ``cross_entropy_all`` (a step's gain over eager is then the cross-entropy's).
def _liger(q, entity, target, reduction: str = "mean") -> torch.Tensor:
    from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

    out = liger_fused_linear_cross_entropy(q, entity, target, reduction=reduction)
    return (out[0] if isinstance(out, tuple) else out).float()


def _cce(q, entity, target, reduction: str = "mean") -> torch.Tensor:
    from cut_cross_entropy import linear_cross_entropy as cut_cross_entropy

    # filter_eps=None: exact gradients (CCE's default skips the gradient of logits whose softmax is
    # below a threshold, an approximation the other providers do not make)
    return cut_cross_entropy(q, entity, target, reduction=reduction, filter_eps=None).float()


CE_PROVIDERS = {"linear": linear_cross_entropy, "liger": _liger, "cce": _cce}
_IMPORT = {"liger": ("liger_kernel", "liger-kernel"), "cce": ("cut_cross_entropy", "cut-cross-entropy")}


def unavailable_reason(name: str, device: str) -> str:
    """Why cross-entropy provider ``name`` cannot run on ``device`` here ("" when it can)."""
    if name not in _IMPORT:
        return ""
    module, package = _IMPORT[name]
    if device != "cuda":
        return f"{name} runs Triton kernels on a GPU only"
    try:
        __import__(module)
    except ImportError as error:
        return f"{name} is not installed (pip install {package}): {error}"
    return ""


def providers_for(device: str, wanted: list[str]) -> dict[str, object]:
    """Provider name -> ops module (``compile`` uses the reference) for those that run here."""
    found = {}
    for name in wanted:
        if name in ("eager", "compile"):
            found[name] = reference
        elif name.removeprefix("native-") in CPU_ISAS:
            if device == "cpu" and name[7:] in native.supported_cpu_isas():
                found[name] = native
            else:
                print(f"provider {name} skipped: this CPU runs {native.supported_cpu_isas()}", flush=True)
        elif name == "native+compile" or name in STEP_PROVIDERS:
            if available("native", device):
                found[name] = native
        elif name in CE_PROVIDERS:
            if why := unavailable_reason(name, device):
                print(f"provider {name} skipped: {why}", flush=True)
            else:
                ops = {op: getattr(reference, op) for op in dir(reference) if not op.startswith("_")}
                found[name] = SimpleNamespace(**ops | {"cross_entropy_all": CE_PROVIDERS[name]})
        elif name == "triton" and device != "cuda":
            continue  # the CPU interpreter is a test tool, not something to time
        elif available(name, device):
            found[name] = _load(name)
    return found


_GRADS: dict[tuple, torch.Tensor] = {}


def run_once(fn: Callable, args: list, grad_idx: list[int], mode: str, device: str) -> float:
    """Milliseconds of one ``mode`` run of ``fn(*args)`` (``backward``: after an untimed forward)."""
    forward = fn(*args) if mode == "backward" else None

    def run() -> None:
        with torch.set_grad_enabled(mode != "forward"):
            out = fn(*args) if forward is None else forward
        if mode != "forward" and out.requires_grad:  # (the matmul floor has no graph)
            key = (tuple(out.shape), out.dtype, out.device)
            if key not in _GRADS:
                _GRADS[key] = torch.ones_like(out) if out.dim() == 0 else torch.randn_like(out)
            torch.autograd.grad(out, [args[i] for i in grad_idx], _GRADS[key])

    return timed(run, device)


def peak_memory_mb(fn: Callable, args: list, grad_idx: list[int], mode: str, device: str) -> float:
    """Peak growth of allocated memory (MiB) during one ``mode`` run (``backward``: with its forward)."""
    run = partial(run_once, fn, args, grad_idx, "forward+backward" if mode == "backward" else mode, device)
    if device != "cuda":
        return cpu_peak_bytes(run) / 2**20
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    run()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def measure_op(op, shape, dtype, device, providers, modes, reps, warmup) -> tuple[list[Row], list[str]]:
    """Rows of ``op`` per mode and provider (at the bandwidth shape, a plain copy of the input too),
    and one line per provider that raised, which is then dropped: the others are still measured."""
    args, grad_idx = make_inputs(op, shape, dtype, device)
    for i in grad_idx:
        args[i].requires_grad_(True)
    cases = {name: (op, op_function(op, module, name), args) for name, module in providers.items()}
    if shape.name == "bandwidth":  # rotate's GB/s beside a plain copy of its input
        cases = {"torch": ("copy", torch.clone, args[:1])} | cases
    wrap = {"compile": torch.compile, "native+compile": torch.compile, "native-recompute": recomputed}
    cases = {n: (o, wrap.get(n, lambda f: f)(fn), a) for n, (o, fn, a) in cases.items()}
    rows, failures = [], []
    for mode in modes:

        def drop(name: str, error: Exception, mode: str = mode) -> None:  # reported; the exit code is 1
            message = str(error).strip().splitlines()
            line = f"FAILED {shape.label()} {dtype} {cases[name][0]} {mode} {name}: {type(error).__name__}: "
            failures.append(line + (message[0] if message else ""))
            print(failures[-1], file=sys.stderr, flush=True)
            del cases[name]

        here = {n: c for n, c in cases.items() if n != "matmul-floor" or mode == "forward+backward"}
        timers = {
            n: in_isa(n, partial(run_once, fn, a, grad_idx, mode, device)) for n, (_, fn, a) in here.items()
        }
        times = interleaved(timers, reps, warmup, drop)
        peak = {n: in_isa(n, partial(peak_memory_mb, *cases[n][1:], grad_idx, mode, device)) for n in times}
        peaks = interleaved(peak, 1, 0, drop)
        for name in peaks:
            label, _, (x, *rest) = cases[name]
            nbytes = (2 * x.numel() + (rest[0].numel() if label == "rotate" else 0)) * x.element_size()
            gb_per_s = nbytes / (statistics.median(times[name]) * 1e-3) / 1e9
            rows.append({"op": label, "mode": mode, "provider": name, "shape": shape.label(), "dtype": dtype,
                         "device": device, "threads": torch.get_num_threads() if device == "cpu" else "",
                         **spread(times[name]), "peak_mem_mb": round(peaks[name][0], 3),
                         "gb_per_s": round(gb_per_s, 2) if shape.name == "bandwidth" else ""})  # fmt: skip
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


@contextlib.contextmanager
def tf32_products(enabled: bool):
    """TensorFloat-32 matrix products (and convolutions) on a GPU for the duration, when ``enabled``."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = enabled or before[0]
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def run_job(job: Job, device: str, providers, reps: int, warmup: int, modes=MODES):
    """Rows and failure lines of one job, in every mode it is timed in."""
    keep = job.op in CE_OPS and job.shape.name != "bandwidth"
    providers = {k: v for k, v in providers.items() if (k not in CE_PROVIDERS or keep)
                 and (k not in STEP_PROVIDERS or job.op == "step")}  # fmt: skip
    if job.shape.name not in COMPILE_SHAPES:
        providers = {k: v for k, v in providers.items() if not k.endswith("compile")}
    modes = ("forward",) if job.op == "score_all" else [m for m in MODES if m in modes]
    if job.shape.name == "large":  # each run takes tens of seconds on a CPU, tenths on a GPU
        on_gpu = (modes, max(3, reps // 10), warmup)
        modes, reps, warmup = on_gpu if device == "cuda" else (("forward+backward",), 1, 0)
    if job.shape.name == "bandwidth":
        modes = ("forward",)
    with tf32_products(job.dtype == "tf32" and device == "cuda"):
        return measure_op(job.op, job.shape, job.dtype, device, providers, modes, reps, warmup)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", type=comma_list(PRECISIONS), default="float32", help="tf32: on cuda")
    parser.add_argument("--shapes", type=comma_list(("icews", "large")), default="icews,large")
    parser.add_argument("--ops", type=comma_list(OPS), default=",".join(OPS))
    parser.add_argument("--providers", type=comma_list(PROVIDERS), default=",".join(DEFAULT_PROVIDERS))
    parser.add_argument("--modes", type=comma_list(MODES), default=",".join(MODES))
    parser.add_argument("--reps", type=int, default=None, help="timed reps (default 10 on CPU, 50 on GPU)")
    add_threads(parser)
    parser.add_argument("--large-batch", type=int, default=None, help="the large graph's B (CPU 1024)")
    parser.add_argument(
        "--large-ops", type=comma_list(OPS), help="ops at the large shape (CPU: cross_entropy_all)"
    )
    parser.add_argument("--budget-s", type=float, default=None, help="start nothing after this many s")
    parser.add_argument("--quick", action="store_true", help="tiny shapes and 2 reps: a smoke test")


def jobs_of(args: argparse.Namespace, on_gpu: bool) -> list[Job]:
    dtypes, ops = args.dtype, args.ops
    large_ops = args.large_ops or (ops if on_gpu else ["cross_entropy_all"])
    large = large_shape(args.large_batch or (4096 if on_gpu else 1024))
    shapes = [QUICK] if args.quick else [ICEWS if s == "icews" else large for s in args.shapes]
    rotated = 40 if args.quick else 1 << 20 if on_gpu else 5000
    jobs = [Job("rotate", bandwidth_shape(rotated), d) for d in dtypes if "rotate" in ops]
    jobs += [
        Job(op, s, d) for s in shapes for d in dtypes for op in ops if s.name != "large" or op in large_ops
    ]
    return plan(jobs, dtypes)


def measure(args: argparse.Namespace) -> Iterator[Row]:
    device, on_gpu = args.device, args.device == "cuda"
    if on_gpu and not torch.cuda.is_available():
        raise SystemExit("--device cuda but no CUDA device is visible")
    if "tf32" in args.dtype and not on_gpu:
        raise SystemExit("--dtype tf32: on cuda only")
    reps = args.reps or (2 if args.quick else 50 if on_gpu else 10)
    providers = providers_for(device, args.providers)
    print(f"device {device}, providers {list(providers)}, reps {reps}", flush=True)
    started = time.perf_counter()
    for job in jobs_of(args, on_gpu):
        if args.budget_s is not None and time.perf_counter() - started >= args.budget_s:
            args.notes.append(f"skipped (the {args.budget_s:g} s budget was spent): {job.label()}")
            continue
        rows, failures = run_job(job, device, providers, reps, 2, args.modes)
        args.notes += failures
        yield from rows


def summarize(rows: list[Row]) -> list[str]:
    """Speed-up (eager ms / provider ms) and memory ratio (provider / eager) per op and mode; GB/s."""
    lines = []
    eager = {(r["op"], r["mode"], r["shape"], r["dtype"]): r for r in rows if r["provider"] == "eager"}
    for r in rows:
        base = eager.get((r["op"], r["mode"], r["shape"], r["dtype"]))
        if r["provider"] != "eager" and base is not None:
            speed = base["ms_median"] / r["ms_median"] if r["ms_median"] else float("nan")
            memory = f"{r['peak_mem_mb'] / base['peak_mem_mb']:5.2f}x" if base["peak_mem_mb"] else "  n/a"
            lines.append(f"{r['shape']:<40} {r['dtype']:<8} {r['op']:<24} {r['mode']:<17} {r['provider']:<8} "
                         f"{speed:6.2f}x faster than eager   peak memory {memory} eager")  # fmt: skip
    lines += [f"{r['shape']:<40} {r['dtype']:<8} {r['op']:<24} {r['provider']:<8} {r['gb_per_s']} GB/s"
              for r in rows if r["gb_per_s"] != ""]  # fmt: skip
    return lines


def plot(rows: list[Row], png: Path) -> None:
    """One row of panels per (shape, dtype): speed-up over eager per op and mode, and peak memory."""
    from benchmarks.runner import save, subplots

    rows = [r for r in rows if r["op"] != "copy"]
    providers = list(dict.fromkeys(r["provider"] for r in rows if r["provider"] != "eager"))
    if not providers:
        return  # nothing to compare with eager
    groups = sorted({(r["shape"], r["dtype"]) for r in rows})
    fig, axes = subplots(len(groups), 2, figsize=(15, 4.2 * len(groups)), squeeze=False)
    for (shape, dtype), (speed_ax, memory_ax) in zip(groups, axes, strict=True):
        mine = [r for r in rows if (r["shape"], r["dtype"]) == (shape, dtype)]
        here = {(r["op"], r["mode"], r["provider"]): r for r in mine}
        keys = [(op, mode) for op, mode, p in here if p == "eager"]
        width = 0.8 / len(providers)
        for i, p in enumerate(providers):
            ratios = [(here[(*k, "eager")]["ms_median"] / here[(*k, p)]["ms_median"],
                       here[(*k, p)]["peak_mem_mb"] / max(here[(*k, "eager")]["peak_mem_mb"], 1e-9))
                      if (*k, p) in here else (0, 0) for k in keys]  # fmt: skip
            offsets = [j + (i - (len(providers) - 1) / 2) * width for j in range(len(keys))]
            speed_ax.bar(offsets, [s for s, _ in ratios], width, label=p)
            memory_ax.bar(offsets, [m for _, m in ratios], width, label=p)
        speed_ax.set_yscale("log")  # speed-ups span 0.5x to 50x
        for ax, title in ((speed_ax, "speed-up over eager (x, log)"), (memory_ax, "peak memory / eager")):
            ax.axhline(1.0, color="black", linewidth=0.8)
            labels = [f"{op}\n{mode}" for op, mode in keys]
            ax.set_xticks(range(len(keys)), labels, fontsize=7, rotation=45, ha="right")
            ax.set_title(f"{title}: {shape}, {dtype}", fontsize=9)
            ax.legend(fontsize=8)
    save(fig, png, dpi=110)


SPEC = Benchmark("kernels", __doc__, measure, add_arguments, summarize, plot, out_dir=True, partial=True,
                 empty_ok=True, csv_name=lambda args: f"kernels_{args.device}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Run; the exit code is 1 when a provider failed on an op."""
    args = SPEC.parser().parse_args(argv)
    SPEC.run(args, command_line("kernels", argv))
    return int(any(line.startswith("FAILED") for line in args.notes))


if __name__ == "__main__":
    raise SystemExit(main())
