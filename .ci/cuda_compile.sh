#!/usr/bin/env bash
# CI, no GPU needed: every csrc/cuda/*.cu compiles for A100 (sm_80) and H100/H200 (sm_90), compile
# only, with every warning an error (host compiler -Wall -Wextra, nvcc's own, ptxas's register
# spills; not local memory: the rotations' full-range sincos keeps a 32-byte scratch array for its
# Payne-Hanek reduction of large angles, listed as stack in the CSV), 2 compilations at a time; ptxas's registers / spills / stack / shared
# memory per kernel go to benchmarks/results/cuda_ptxas.csv. Then every Triton kernel x branch x
# dtype compiles for both architectures (tests/triton_aot.py) with this install's Triton and with
# the GPU machine's Triton 3.6.
#
#   bash .ci/cuda_compile.sh                      # nvcc and Triton 3.6 installed into $CACHE once
#   ROTMEM_CI_CACHE=/tmp/c PYTHON=python3 bash .ci/cuda_compile.sh
#   CUDA_COMPILE_STEPS=nvcc bash .ci/cuda_compile.sh   # a subset of: nvcc triton triton36
#   CUDA_COMPILE_FILES=csrc/cuda/n3.cu bash .ci/cuda_compile.sh   # some files (report: $CACHE/cuda_ptxas.subset.csv)
#   CUDA_COMPILE_TORCH_INCLUDE=DIR CUDA_COMPILE_ARCHS=90 bash .ci/cuda_compile.sh  # other torch headers
#       (DIR/torch/csrc/api/include beside them), some architectures (report: $CACHE/cuda_ptxas.subset.csv);
#       .ci/cxx17_compile.sh runs it so with torch 2.11's headers, as the GPU machine builds
#
# nvcc 13.0 comes from the package registry, pinned to 13.0.* in every part (unpinned, pip pairs
# nvcc 13.0 with nvvm 13.5; the -cu12 nvcc package ships no nvcc binary), into a cache folder
# (never ../shared, read-only in CI). The headers are the installed (CPU) torch's: a CPU wheel
# lacks only the generated c10/cuda/impl/cuda_cmake_macros.h, stubbed here. Torch's and Python's
# headers are -isystem, so the warnings flags judge this project's code.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
CACHE="${ROTMEM_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rotmem-ci}"
STEPS="${CUDA_COMPILE_STEPS:-nvcc triton triton36}"
CSV=benchmarks/results/cuda_ptxas.csv
CUDA_PACKAGES=(nvidia-cuda-nvcc==13.0.* nvidia-cuda-runtime==13.0.* nvidia-cuda-crt==13.0.*
    nvidia-cuda-cccl==13.0.* nvidia-nvvm==13.0.*)
TRITON_GPU_MACHINE=triton==3.6.0
wanted() { [[ " $STEPS " == *" $1 "* ]]; }
start=$SECONDS

# install PACKAGES into DIR once (DIR/.installed names what is there)
install_once() {
    local dir=$1
    shift
    [[ -f "$dir/.installed" && "$(cat "$dir/.installed")" == "$*" ]] && return 0
    rm -rf "$dir" && mkdir -p "$dir"
    "$PYTHON" -m pip install -q --disable-pip-version-check --no-deps --target "$dir" "$@"
    echo "$*" >"$dir/.installed"
}

if wanted nvcc; then
    CUDA_DIR="$CACHE/cuda-13.0"
    install_once "$CUDA_DIR" "${CUDA_PACKAGES[@]}"
    CUDA="$CUDA_DIR/nvidia/cu13"
    STUB="$CACHE/torch-cuda-stub"
    mkdir -p "$STUB/c10/cuda/impl"
    echo "#define C10_CUDA_BUILD_SHARED_LIBS" >"$STUB/c10/cuda/impl/cuda_cmake_macros.h"
    read -r TORCH_INCLUDE PY_INCLUDE < <("$PYTHON" -c "import sysconfig, torch.utils.cpp_extension as c;\
print(c.include_paths()[0], sysconfig.get_paths()['include'])")
    TORCH_INCLUDE="${CUDA_COMPILE_TORCH_INCLUDE:-$TORCH_INCLUDE}"
    "$CUDA/bin/nvcc" --version | tail -n 2
    # torch's own extension flags (COMMON_NVCC_FLAGS, the extension macros); C++17 as setup.py
    FLAGS=(-c -o /dev/null -std=c++17 -O3 -DWITH_CUDA -DTORCH_EXTENSION_NAME=_C -DTORCH_API_INCLUDE_EXTENSION_H
        -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__
        -D__CUDA_NO_HALF2_OPERATORS__ --expt-relaxed-constexpr -lineinfo
        -I"$CUDA/include" -isystem "$CUDA/include/cccl" -isystem "$STUB" -isystem "$TORCH_INCLUDE"
        -isystem "$TORCH_INCLUDE/torch/csrc/api/include" -isystem "$PY_INCLUDE"
        -Xcompiler=-fPIC,-Wall,-Wextra,-Werror -Werror=all-warnings
        -Xptxas=-v,--warn-on-spills,--warning-as-error)
    LOGS=$(mktemp -d)
    export CUDA LOGS
    export FLAGS_LINE="${FLAGS[*]}"
    # one compilation per file and architecture, 2 at a time; each log keeps ptxas's report
    compile() {
        local file=$1 arch=$2 log
        log="$LOGS/$(basename "$file" .cu).sm_$arch.log"
        # shellcheck disable=SC2086  # FLAGS_LINE holds no spaces inside one flag
        if "$CUDA/bin/nvcc" "$file" $FLAGS_LINE -gencode "arch=compute_$arch,code=sm_$arch" >"$log" 2>&1; then
            echo "compiled $file sm_$arch"
        else
            echo "FAILED $file sm_$arch:"
            cat "$log"
            return 1
        fi
    }
    export -f compile
    nvcc_start=$SECONDS
    status=0
    FILES=${CUDA_COMPILE_FILES:-$(echo csrc/cuda/*.cu)}
    ARCHS=${CUDA_COMPILE_ARCHS:-80 90}
    # the committed report has every file, both architectures, the venv's torch
    if [[ -n "${CUDA_COMPILE_FILES:-}${CUDA_COMPILE_ARCHS:-}${CUDA_COMPILE_TORCH_INCLUDE:-}" ]]; then
        CSV="$CACHE/cuda_ptxas.subset.csv"
    fi
    for file in $FILES; do for arch in $ARCHS; do echo "$file $arch"; done; done |
        xargs -P 2 -n 2 bash -c 'compile "$0" "$1"' || status=1
    echo "nvcc: $(find "$LOGS" -name '*.log' | wc -l) compilations in $((SECONDS - nvcc_start)) s"
    NVCC_VERSION=$("$CUDA/bin/nvcc" --version | tail -n 1)
    "$PYTHON" - "$LOGS" "$CSV.new" "$NVCC_VERSION" <<'PY'
import csv, re, subprocess, sys
from datetime import datetime, timezone
from pathlib import Path

logs, out, version = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
rows = []
for log in sorted(logs.glob("*.log")):  # <file>.sm_<arch>.log
    source, arch = log.stem.rsplit(".", 1)
    kernel = None
    for line in log.read_text().splitlines():  # ptxas -v: entry, its stack/spills, then registers/smem
        if m := re.search(r"Compiling entry function '([^']+)'", line):
            kernel, stack = m.group(1), (0, 0, 0)
        elif m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line):
            stack = tuple(int(g) for g in m.groups())
        elif kernel and (m := re.search(r"Used (\d+) registers", line)):
            smem = re.search(r"(\d+) bytes smem", line)
            rows.append([source + ".cu", arch, kernel, int(m.group(1)), *stack, int(smem.group(1)) if smem else 0])
            kernel = None
names = subprocess.run(["c++filt"], input="\n".join(r[2] for r in rows), capture_output=True, text=True, check=True)
for row, name in zip(rows, names.stdout.splitlines(), strict=True):
    row[2] = name
with open(out, "w", newline="") as f:
    f.write(f"# ptxas -v per kernel from: bash .ci/cuda_compile.sh ({version}, {datetime.now(timezone.utc):%Y-%m-%d}); bytes\n")
    writer = csv.writer(f)
    writer.writerow(["file", "arch", "kernel", "registers", "stack_bytes", "spill_store_bytes", "spill_load_bytes",
                     "shared_bytes"])
    writer.writerows(sorted(rows, key=lambda r: (r[0], r[2], r[1])))
PY
    mv "$CSV.new" "$CSV"
    echo "ptxas report: $CSV ($(($(wc -l <"$CSV") - 2)) kernels)"
    rm -rf "$LOGS"
    [[ $status == 0 ]] || { echo ".ci/cuda_compile.sh: a CUDA compilation failed (above)" >&2; exit 1; }
fi

# the Triton kernels (tests/triton_aot.py): without TRITON_INTERPRET, which compiles nothing
if wanted triton; then
    env -u TRITON_INTERPRET "$PYTHON" tests/triton_aot.py --jobs 2
fi
if wanted triton36; then
    # the GPU machine's Triton before the venv's (torch is the venv's; only the compiler differs)
    TRITON36="$CACHE/triton-3.6.0"
    install_once "$TRITON36" "$TRITON_GPU_MACHINE"
    env -u TRITON_INTERPRET PYTHONPATH="$TRITON36" "$PYTHON" tests/triton_aot.py --jobs 2
fi
echo ".ci/cuda_compile.sh: done in $((SECONDS - start)) s"
