"""Every Triton kernel compiles, ahead of time, to a cubin for the H200 (sm_90): no GPU needed.

The CPU interpreter runs the kernels' Python but never their compiled path (libdevice sin/cos,
loop-carried reductions, atomics, constexpr branches), so this compiles each kernel in its float32
and bfloat16 forms in a subprocess without ``TRITON_INTERPRET``.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

# (module, kernel, pointer args -> dtype key, int args, constexprs); "T" = the tensor dtype.
KERNELS = [
    ("rotate", "_rotate_forward_kernel", {"X": "T", "T": "T", "Y": "T"},
     ["M", "n", "stride_x", "stride_t", "stride_y"], {"BLOCK_M": 16, "BLOCK_N": 128}),
    ("rotate", "_rotate_backward_kernel", {"G": "T", "X": "T", "T": "T", "GX": "T", "GT": "T"},
     ["M", "n", "stride_g", "stride_x", "stride_t"], {"BLOCK_M": 8, "BLOCK_N": 128}),
    ("unrotated_query", "_query_forward_kernel", {"H": "T", "W": "T", "WH": "T", "T": "T", "Q": "T"},
     ["M", "n", "stride_h", "stride_w", "stride_wh", "stride_t"],
     {"BLOCK_M": 16, "BLOCK_N": 128, "HAS_WH": True}),
    ("unrotated_query", "_query_backward_kernel",
     {"G": "T", "H": "T", "W": "T", "WH": "T", "T": "T", "GH": "T", "GW": "T", "GWH": "T", "GT": "T"},
     ["M", "n", "stride_g", "stride_h", "stride_w", "stride_wh", "stride_t"],
     {"BLOCK_M": 8, "BLOCK_N": 128, "HAS_WH": False}),
    ("unrotated_query_indexed", "_query_indexed_forward_kernel",
     {"E": "T", "W": "T", "WH": "T", "EI": "i64", "RI": "i64", "SPEED": "A", "LOG_BASE": "A", "Q": "T"},
     ["B", "n", "stride_e", "stride_w", "stride_wh"], {"BLOCK_B": 16, "BLOCK_N": 128, "HAS_WH": True}),
    ("unrotated_query_indexed", "_query_indexed_backward_kernel",
     {"G": "T", "E": "T", "W": "T", "WH": "T", "EI": "i64", "RI": "i64", "SPEED": "A", "LOG_BASE": "A",
      "GE": "A", "GW": "A", "GWH": "A", "PART_SPEED": "fp64", "PART_BASE": "fp64"},
     ["B", "n", "stride_g", "stride_e", "stride_w", "stride_wh"],
     {"BLOCK_B": 8, "BLOCK_N": 128, "HAS_WH": True}),
    ("cross_entropy", "_lse_update_kernel",
     {"TILE": "T", "TARGET": "i64", "M": "A", "S": "A", "TGT": "A"}, ["r0", "c0"],
     {"COLS": 3496, "BLOCK": 2048}),
    ("cross_entropy", "_grad_kernel", {"TILE": "T", "TARGET": "i64", "LSE": "A", "COEF": "A"}, ["r0", "c0"],
     {"COLS": 3496, "BLOCK": 2048}),
    ("cross_entropy", "_lse_and_grad_kernel",
     {"TILE": "T", "TARGET": "i64", "LSE": "A", "TGT": "A", "COEF": "A"}, ["r0"],
     {"COLS": 10488, "BLOCK": 2048}),
    ("n3", "_n3_forward_kernel", {"X": "T", "PART": "A"}, ["M", "n", "stride_x"],
     {"BLOCK_M": 32, "BLOCK_N": 128, "MODULUS": True}),
    ("n3", "_n3_backward_kernel", {"G": "A", "X": "T", "GX": "T"}, ["M", "n", "stride_x"],
     {"BLOCK_M": 32, "BLOCK_N": 128, "MODULUS": False}),
]  # fmt: skip
# float64 compiles too (``python tests/test_ops_triton_sm90.py fp32 bf16 fp64``); the test keeps to
# the training dtypes to stay short.
DTYPES = ("fp32", "bf16")


def compile_all(dtypes: tuple[str, ...] = DTYPES) -> list[str]:
    """Compile every kernel for sm_90 in each of ``dtypes``; the names of those compiled."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target = GPUTarget("cuda", 90, 32)
    done = []
    for module, name, pointers, ints, constexprs in KERNELS:
        kernel = getattr(importlib.import_module(f"rotmem.ops.triton.{module}"), name)
        for dtype in dtypes:
            accumulate = "fp64" if dtype == "fp64" else "fp32"
            types = {"T": dtype, "A": accumulate, "i64": "i64", "fp64": "fp64"}
            signature = {arg: f"*{types[kind]}" for arg, kind in pointers.items()}
            signature |= {arg: "i32" for arg in ints}
            values = dict(constexprs, FP64=dtype == "fp64")
            signature |= {arg: "constexpr" for arg in values}
            ordered = {arg: signature[arg] for arg in kernel.arg_names}
            triton.compile(ASTSource(fn=kernel, signature=ordered, constexprs=values), target=target)
            done.append(f"{name}[{dtype}]")
    return done


@pytest.mark.slow
def test_kernels_compile_for_sm90():
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = str(Path(__file__).resolve().parents[1])  # rotmem importable without an install
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    assert result.stdout.count("compiled") == len(KERNELS) * len(DTYPES), result.stdout


if __name__ == "__main__":
    for kernel in compile_all(tuple(sys.argv[1:]) or DTYPES):
        print("compiled", kernel, flush=True)
