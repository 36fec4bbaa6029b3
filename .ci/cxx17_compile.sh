#!/usr/bin/env bash
# CI, no GPU needed: the whole extension compiles the way the GPU machine builds it, against torch
# 2.11.0's headers (the oldest torch the README names) in C++17 (what torch 2.11's extension build
# uses; setup.py passes -std=c++17 everywhere). Every csrc/**/*.cpp with g++ (syntax only, with
# -DWITH_CUDA as a CUDA build has it), every csrc/cuda/*.cu with nvcc 13.0 for sm_90
# (.ci/cuda_compile.sh with these headers); every warning an error, -pedantic catching C++20
# creep that g++ otherwise accepts in C++17 (designated initialisers).
#
#   bash .ci/cxx17_compile.sh
#   CXX17_STEPS=gcc bash .ci/cxx17_compile.sh   # a subset of: gcc nvcc
#
# torch 2.11's headers: the wheel from the package registry (a CUDA build, about 900 MB), downloaded
# once, of which only torch/include/** is kept in $CACHE/torch-2.11.0-include (about 60 MB); the
# wheel is deleted after. Torch's and Python's headers are -isystem, so the warnings judge this
# project's code.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
CACHE="${ROTMEM_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rotmem-ci}"
STEPS="${CXX17_STEPS:-gcc nvcc}"
TORCH_PIN=torch==2.11.0
HEADERS="$CACHE/torch-2.11.0-include"
start=$SECONDS

if [[ ! -f "$HEADERS/.installed" || "$(cat "$HEADERS/.installed")" != "$TORCH_PIN" ]]; then
    rm -rf "$HEADERS" && mkdir -p "$HEADERS"
    WHEELS=$(mktemp -d)
    "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
        --python-version 3.12 --platform manylinux_2_28_x86_64 -d "$WHEELS" "$TORCH_PIN"
    "$PYTHON" - "$WHEELS" "$HEADERS" <<'PY'
import sys, zipfile
from pathlib import Path

wheel = next(Path(sys.argv[1]).glob("torch-*.whl"))
with zipfile.ZipFile(wheel) as archive:
    archive.extractall(sys.argv[2], [n for n in archive.namelist() if n.startswith("torch/include/")])
PY
    rm -rf "$WHEELS"
    echo "$TORCH_PIN" >"$HEADERS/.installed"
fi
INCLUDE="$HEADERS/torch/include"
echo "torch 2.11.0 headers: $INCLUDE ($((SECONDS - start)) s)"

if [[ " $STEPS " == *" gcc "* ]]; then
    PY_INCLUDE=$("$PYTHON" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
    gcc_start=$SECONDS
    # torch's extension flags (the extension macros), setup.py's own, and the warnings
    FLAGS="-std=c++17 -fsyntax-only -O3 -fno-trapping-math -fopenmp -fPIC -DWITH_CUDA -DTORCH_EXTENSION_NAME=_C
        -DTORCH_API_INCLUDE_EXTENSION_H -isystem $INCLUDE -isystem $INCLUDE/torch/csrc/api/include
        -isystem $PY_INCLUDE -Wall -Wextra -pedantic -Werror"
    export FLAGS
    # shellcheck disable=SC2016  # expanded by the inner bash
    find csrc -name '*.cpp' | sort | xargs -P 2 -n 1 bash -c \
        'if g++ $FLAGS "$0" 2>/tmp/cxx17.$$.log; then echo "g++ -std=c++17 $0: ok";
         else echo "FAILED g++ -std=c++17 $0:"; cat /tmp/cxx17.$$.log; rm -f /tmp/cxx17.$$.log; exit 255; fi;
         rm -f /tmp/cxx17.$$.log'
    echo "g++: $(find csrc -name '*.cpp' | wc -l) files in $((SECONDS - gcc_start)) s"
fi
if [[ " $STEPS " == *" nvcc "* ]]; then
    CUDA_COMPILE_STEPS=nvcc CUDA_COMPILE_ARCHS=90 CUDA_COMPILE_TORCH_INCLUDE="$INCLUDE" PYTHON="$PYTHON" \
        ROTMEM_CI_CACHE="$CACHE" bash .ci/cuda_compile.sh
fi
echo ".ci/cxx17_compile.sh: done in $((SECONDS - start)) s"
