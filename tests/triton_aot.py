"""Every Triton kernel of ``rotmem/ops/triton/``, compiled ahead of time for A100 (sm_80) and H100/H200
(sm_90), in every constexpr branch and dtype its launcher uses: no GPU needed.

The CPU interpreter runs the kernels' Python but never their compiled path (libdevice sin/cos,
loop-carried types, atomics, constexpr branches), so this compiles each kernel with
``triton.compile(ASTSource(...), target=GPUTarget("cuda", arch, 32))`` in a process without
``TRITON_INTERPRET``. ``MATRIX`` declares, per kernel, the dtypes and constexpr variants its
launcher passes (read off the ``launch(...)`` calls: each branch constexpr both ways, each row
kernel with a row that fits one block and one that needs the loop, block sizes as at the
benchmark's shapes, B = 1000, n = 249, N = 10,488, and the large graph's entity chunks);
``HELPERS`` the ``@triton.jit`` device functions that are compiled inside them.
``tests/ops/test_triton_aot.py`` fails when a kernel exists that these lists do not name.

    python tests/triton_aot.py                        # the full matrix, sm_80 and sm_90, 2 processes
    python tests/triton_aot.py --arch 90 --jobs 1 --only _count_kernel --dtypes fp32,bf16
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import os
import pkgutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "rotmem.ops.triton"
ARCHS = (80, 90)
DTYPES = ("fp32", "bf16", "fp16", "fp64")  # the Triton ops' SUPPORTED_DTYPES


@dataclass(frozen=True)
class Kernel:
    """One kernel's launches: pointer args by element kind (``T``: the inputs' dtype, ``A``: the
    accumulator, float64 for float64 inputs else float32; or a fixed type), the integer args, and
    the constexpr variants (``FP64`` follows the dtype and is added when the kernel has it)."""

    module: str
    name: str
    pointers: dict[str, str]
    ints: tuple[str, ...]
    variants: tuple[dict[str, object], ...]
    dtypes: tuple[str, ...] = DTYPES
    notes: str = field(default="", compare=False)


def _both(name: str, base: dict[str, object]) -> tuple[dict[str, object], ...]:
    """``base`` with constexpr ``name`` False and True (an ``if name:`` branch both ways)."""
    return tuple(dict(base, **{name: value}) for value in (False, True))


# Block sizes as the launchers pick them (``_blocks`` in each module) at the benchmark's shapes:
# n = 249 pairs -> BLOCK_N = 128; rows per block from each launcher's element budget.
_ROW_WISE = {"BLOCK_M": 16, "BLOCK_N": 128}  # rotate / unrotated_query forward (2048 elements)
_ROW_WISE_BACKWARD = {"BLOCK_M": 8, "BLOCK_N": 128}  # 1024 elements
_N3 = {"BLOCK_M": 32, "BLOCK_N": 128}  # 4096 elements
# Row kernels of the cross-entropy and the rank counts: a tile row that fits one block (N = 83), one
# that loops over several (ICEWS05-15's 10,488 entities, whole rows) and the large graph's chunk of
# 32,768 entities (N = 1,000,000, B = 4,096 in tiles of 2**23 logits).
_ROWS = ({"COLS": 83, "BLOCK": 128}, {"COLS": 10488, "BLOCK": 2048}, {"COLS": 32768, "BLOCK": 2048})

MATRIX: tuple[Kernel, ...] = (
    Kernel("rotate", "_rotate_forward_kernel", {"X": "T", "T": "T", "Y": "T"},
           ("M", "n", "stride_x", "stride_t", "stride_y"), (_ROW_WISE,)),
    Kernel("rotate", "_rotate_backward_kernel", {"G": "T", "X": "T", "T": "T", "GX": "T", "GT": "T"},
           ("M", "n", "stride_g", "stride_x", "stride_t"), (_ROW_WISE_BACKWARD,)),
    Kernel("unrotated_query", "_query_forward_kernel", {"H": "T", "W": "T", "WH": "T", "T": "T", "Q": "T"},
           ("M", "n", "stride_h", "stride_w", "stride_wh", "stride_t"), _both("HAS_WH", _ROW_WISE)),
    Kernel("unrotated_query", "_query_backward_kernel",
           {"G": "T", "H": "T", "W": "T", "WH": "T", "T": "T", "GH": "T", "GW": "T", "GWH": "T", "GT": "T"},
           ("M", "n", "stride_g", "stride_h", "stride_w", "stride_wh", "stride_t"),
           _both("HAS_WH", _ROW_WISE_BACKWARD)),
    Kernel("unrotated_query_indexed", "_query_indexed_forward_kernel",
           {"E": "T", "W": "T", "WH": "T", "EI": "i64", "RI": "i64", "SPEED": "A", "LOG_BASE": "A", "Q": "T"},
           ("B", "n", "stride_e", "stride_w", "stride_wh"),
           _both("HAS_WH", {"BLOCK_B": 16, "BLOCK_N": 128})),
    Kernel("unrotated_query_indexed", "_query_indexed_backward_kernel",
           {"G": "T", "E": "T", "W": "T", "WH": "T", "EI": "i64", "RI": "i64", "SPEED": "A", "LOG_BASE": "A",
            "GE": "A", "GW": "A", "GWH": "A", "PART_SPEED": "fp64", "PART_BASE": "fp64"},
           ("B", "n", "stride_g", "stride_e", "stride_w", "stride_wh"),
           _both("HAS_WH", {"BLOCK_B": 8, "BLOCK_N": 128})),
    Kernel("cross_entropy", "_lse_update_kernel",
           {"TILE": "T", "TARGET": "i64", "M": "A", "S": "A", "TGT": "A"}, ("r0", "c0"), _ROWS),
    Kernel("cross_entropy", "_grad_kernel", {"TILE": "T", "TARGET": "i64", "LSE": "A", "COEF": "A"},
           ("r0", "c0"), _ROWS),
    Kernel("cross_entropy", "_lse_and_grad_kernel",
           {"TILE": "T", "TARGET": "i64", "LSE": "A", "TGT": "A", "COEF": "A"}, ("r0",), _ROWS[:2],
           notes="whole rows only: the tile holds every entity"),
    Kernel("n3", "_n3_forward_kernel", {"X": "T", "PART": "A"}, ("M", "n", "stride_x"),
           _both("MODULUS", _N3)),
    Kernel("n3", "_n3_backward_kernel", {"G": "A", "X": "T", "GX": "T"}, ("M", "n", "stride_x"),
           _both("MODULUS", _N3)),
    # FILTERS: the filters counted at once (1: raw or time-aware alone; 2: static and time-aware)
    Kernel("rank_counts", "_count_kernel",
           {"TILE": "T", "SCORE": "A", "TARGET": "i64", "FILTER_PTR": "i64", "FILTER_IDX": "i64",
            "HIGHER": "i64", "TIES": "i64", "BAD": "i8"},
           ("r0", "c0", "batch", "stride"),
           tuple(dict(rows, FILTERS=f) for rows, f in itertools.product(_ROWS, (1, 2)))),
)  # fmt: skip

# @triton.jit device functions: compiled inlined into the kernels that call them, never launched.
HELPERS = {
    "_common": ("sincos", "cast_for", "upcast"),
    "_pairs": ("load_pairs", "store_pairs", "rotate_pairs", "unrotate_pairs", "query_pairs",
               "query_pairs_backward"),
    "cross_entropy": ("_row_summary", "_write_grad"),
    "n3": ("_sqrt",),
    "unrotated_query_indexed": ("_scatter_add", "_angles"),
}  # fmt: skip


def jit_functions() -> dict[str, object]:
    """Every ``@triton.jit`` function defined in the package's modules: ``"module.name" -> object``
    (a ``JITFunction``, or the interpreter's stand-in under ``TRITON_INTERPRET=1``)."""
    from triton.runtime.jit import KernelInterface

    package = importlib.import_module(PACKAGE)
    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{PACKAGE}.{info.name}")
        for name, obj in vars(module).items():
            fn = getattr(obj, "fn", None)
            if isinstance(obj, KernelInterface) and getattr(fn, "__module__", None) == module.__name__:
                found[f"{info.name}.{name}"] = obj
    return found


def declared() -> tuple[set[str], set[str]]:
    """``(kernels, helpers)`` the lists name, as ``"module.name"``."""
    kernels = {f"{k.module}.{k.name}" for k in MATRIX}
    helpers = {f"{module}.{name}" for module, names in HELPERS.items() for name in names}
    return kernels, helpers


@dataclass(frozen=True)
class Job:
    """One compilation: ``kernel`` in ``dtype`` with constexprs ``variant`` for ``sm_<arch>``."""

    kernel: Kernel
    dtype: str
    variant: tuple[tuple[str, object], ...]
    arch: int

    def label(self) -> str:
        constexprs = ",".join(f"{k}={v}" for k, v in self.variant)
        return f"sm_{self.arch} {self.kernel.name}[{self.dtype}; {constexprs}]"


def jobs(archs=ARCHS, dtypes=DTYPES, only: set[str] | None = None) -> list[Job]:
    """The matrix as compilations, for ``archs`` and the ``dtypes`` each kernel is launched with."""
    return [
        Job(kernel, dtype, tuple(variant.items()), arch)
        for kernel in MATRIX
        if only is None or kernel.name in only
        for dtype in kernel.dtypes
        if dtype in dtypes
        for variant in kernel.variants
        for arch in archs
    ]


def compile_job(job: Job):
    """Compile one job; returns the compiled kernel (``.asm``, ``.metadata``)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = getattr(importlib.import_module(f"{PACKAGE}.{job.kernel.module}"), job.kernel.name)
    accumulator = "fp64" if job.dtype == "fp64" else "fp32"
    kinds = {"T": job.dtype, "A": accumulator}
    signature = {arg: "*" + kinds.get(kind, kind) for arg, kind in job.kernel.pointers.items()}
    signature |= {arg: "i32" for arg in job.kernel.ints}
    constexprs = dict(job.variant)
    if "FP64" in kernel.arg_names:
        constexprs["FP64"] = job.dtype == "fp64"
    signature |= {arg: "constexpr" for arg in constexprs}
    missing = set(kernel.arg_names) - set(signature)
    if missing or len(signature) != len(kernel.arg_names):
        raise ValueError(
            f"{job.kernel.name}: the matrix does not type {sorted(missing)} (or names extra args)"
        )
    ordered = {arg: signature[arg] for arg in kernel.arg_names}
    source = ASTSource(fn=kernel, signature=ordered, constexprs=constexprs)
    return triton.compile(source, target=GPUTarget("cuda", job.arch, 32))


def _run(job: Job) -> tuple[str, float, str | None]:
    start = time.perf_counter()
    try:
        compile_job(job)
        return job.label(), time.perf_counter() - start, None
    except Exception as error:  # reported with the job's label; the exit code says it failed
        return job.label(), time.perf_counter() - start, f"{type(error).__name__}: {error}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--arch", default=",".join(map(str, ARCHS)), help="compute capabilities, e.g. 80,90")
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--only", default=None, help="comma-separated kernel names")
    parser.add_argument("--jobs", type=int, default=2, help="compiler processes")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("triton_aot.py: unset TRITON_INTERPRET (the interpreter compiles nothing)", file=sys.stderr)
        return 2
    import triton

    todo = jobs(
        tuple(int(a) for a in args.arch.split(",")),
        tuple(args.dtypes.split(",")),
        None if args.only is None else set(args.only.split(",")),
    )
    start, failed = time.perf_counter(), 0
    print(f"triton {triton.__version__}: {len(todo)} compilations in {args.jobs} processes", flush=True)
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for label, seconds, error in pool.map(_run, todo):
            failed += error is not None
            print(
                f"{'FAILED' if error else 'compiled'} {label} {seconds:.1f} s"
                + (f"\n  {error}" if error else "")
            )
    print(f"{len(todo) - failed} of {len(todo)} compiled in {time.perf_counter() - start:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # rotmem importable without an install
    sys.exit(main())
