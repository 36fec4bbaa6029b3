"""The Triton kernels compile ahead of time for sm_80 and sm_90 (``tests/triton_aot.py``): the
declared matrix names every ``@triton.jit`` function of ``rotmem/ops/triton/``, and a
representative part of it compiles here (the full matrix, every kernel x branch x dtype x arch,
runs in CI from ``.ci/triton_aot.sh``, in parallel processes, with this install's Triton and
with the GPU machine's Triton 3.6)."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

from tests import triton_aot  # noqa: E402  (the matrix is shared with .ci/triton_aot.sh)

ROOT = Path(__file__).resolve().parents[2]


def test_every_jit_function_is_in_the_matrix_or_a_helper():
    found = set(triton_aot.jit_functions())
    kernels, helpers = triton_aot.declared()
    unlisted = sorted(found - kernels - helpers)
    assert not unlisted, f"@triton.jit functions not in tests/triton_aot.py (MATRIX, HELPERS): {unlisted}"
    assert not ((kernels | helpers) - found), (
        f"declared but not defined: {sorted((kernels | helpers) - found)}"
    )
    assert not (kernels & helpers), f"both a kernel and a helper: {sorted(kernels & helpers)}"


def test_helpers_are_called_and_kernels_are_launched():
    """A helper is compiled only through a kernel that calls it, and a kernel is one only if
    its module launches it: the split into MATRIX and HELPERS is checked against the source."""
    functions = triton_aot.jit_functions()
    kernels, helpers = triton_aot.declared()
    source = {name: inspect.getsource(obj.fn) for name, obj in functions.items()}
    for helper in helpers:
        short = helper.split(".")[1]
        callers = [name for name, text in source.items() if name != helper and f"{short}(" in text]
        assert callers, f"{helper} is called by no @triton.jit function: a kernel, or dead code?"
    for kernel in kernels:
        module, short = kernel.split(".")
        text = Path(ROOT, "rotmem/ops/triton", f"{module}.py").read_text()
        assert re.search(rf"launch\(\s*{short},", text), f"{kernel} is never launched in {module}.py"


def test_matrix_types_every_argument():
    """Each declared kernel's pointers, ints and constexprs are exactly its arguments."""
    functions = triton_aot.jit_functions()
    for kernel in triton_aot.MATRIX:
        names = functions[f"{kernel.module}.{kernel.name}"].arg_names
        for variant in kernel.variants:
            typed = set(kernel.pointers) | set(kernel.ints) | set(variant) | ({"FP64"} & set(names))
            assert typed == set(names), f"{kernel.name}: typed {sorted(typed)}, arguments {names}"


# A representative part, for seconds rather than minutes (16 compilations; the race test below
# compiles the whole-row cross-entropy): the kernels whose compiled path differs most from the
# interpreter's (loops carrying values across blocks, atomics, libdevice), both architectures,
# bfloat16 (the training dtype with the most casts).
SUBSET = "_count_kernel,_query_indexed_backward_kernel"
SUBSET_DTYPES = ("bf16",)


@pytest.mark.slow
def test_representative_kernels_compile_for_sm80_and_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    script = str(ROOT / "tests/triton_aot.py")
    command = [sys.executable, script, "--only", SUBSET, "--dtypes", ",".join(SUBSET_DTYPES)]
    result = subprocess.run(command + ["--jobs", "2"], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    expected = len(triton_aot.jobs(dtypes=SUBSET_DTYPES, only=set(SUBSET.split(","))))
    compiled = [line for line in result.stdout.splitlines() if line.startswith("compiled ")]
    assert len(compiled) == expected, result.stdout


RACE_CHECK = """
import re, sys
import triton_aot
kernel = next(k for k in triton_aot.MATRIX if k.name == "_lse_and_grad_kernel")
job = triton_aot.Job(kernel, "fp32", tuple(kernel.variants[1].items()), 90)
lines = triton_aot.compile_job(job).asm["ttgir"].splitlines()
first = lambda pattern: next((i for i, line in enumerate(lines) if re.search(pattern, line)), -1)
load = first(r"%target_logit\\S* = tt\\.load")
print(load, first(r"\\b(gpu|ttg)\\.barrier"), first(r"tt\\.store .*tensor<"))
"""


@pytest.mark.slow
def test_whole_row_cross_entropy_reads_the_target_logit_before_the_gradient_overwrites_the_row():
    """In the compiled kernel (TTGIR, after Triton's passes) the target logit's load comes first,
    then a barrier, then the first block store of the gradient into the row: no thread can
    overwrite the target's logit before it is read (the interpreter runs one thread: no race)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-c", RACE_CHECK], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-4000:]
    load, barrier, store = (int(x) for x in result.stdout.split())
    assert 0 <= load < barrier < store, (
        f"target logit load at line {load}, barrier {barrier}, gradient store {store}"
    )
