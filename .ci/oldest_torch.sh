#!/usr/bin/env bash
# CI: the extension built and the op tests run with the oldest torch the README names (2.11, what the
# GPU machine has), on the CPU, beside the main suite's 2.13. PyPI's 2.11 is a CUDA build (its NVIDIA
# libraries are pip packages, ~4.7 GB in the venv; it imports and runs on a machine without a GPU).
# The CPU kernels only (.ci/cxx17_compile.sh compiles the CUDA ones against 2.11's headers); the venv
# is kept in the user cache, so a second run reuses it; the checkout is copied (tracked files only),
# so that this build's rotmem/_C*.so does not replace the main venv's.
#
#   bash .ci/oldest_torch.sh        # ~4 min to install once, ~2 min to build, the op tests after
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH=2.11.0
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/rotmem-ci"
VENV="$CACHE/venv-torch-$TORCH"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
start=$SECONDS

if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH')" 2>/dev/null; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip setuptools wheel
    "$VENV/bin/python" -m pip install -q "torch==$TORCH"
fi
# a license string (PEP 639) needs setuptools >= 77, torch 2.11 wants < 82; the tests' own tools
"$VENV/bin/python" -m pip install -q "setuptools>=77,<82" wheel numpy pytest hypothesis scipy
echo "oldest torch: $("$VENV/bin/python" -c 'import torch; print(torch.__version__)') in $((SECONDS - start)) s"

git archive HEAD | tar -x -C "$WORK"
(cd "$WORK" && ROTMEM_FORCE_CUDA=0 MAX_JOBS=2 "$VENV/bin/python" setup.py -q build_ext --inplace >"$WORK/build.log" 2>&1) ||
    { tail -n 30 "$WORK/build.log"; echo ".ci/oldest_torch.sh: the build against torch $TORCH failed" >&2; exit 1; }
echo "built against torch $TORCH in $((SECONDS - start)) s"

# the op tests (every backend this machine runs: native per instruction set, the reference, compile),
# as the main suite runs them; not Triton interpreted: torch 2.11's Triton 3.6 interpreter cannot run
# the rank-count kernel's loop over a loaded bound (the main suite's Triton 3.9 does; the GPU compiles
# it with 3.6, which .ci/cuda_compile.sh checks for sm_80 and sm_90)
cd "$WORK"
PYTHONPATH="$WORK" "$VENV/bin/python" -m pytest -q -p no:cacheprovider -m "not slow" -k "not triton-cpu" \
    tests/ops/test_rotate.py tests/ops/test_unrotated_query.py tests/ops/test_unrotated_query_indexed.py \
    tests/ops/test_cross_entropy_all.py tests/ops/test_linear_cross_entropy.py tests/ops/test_n3.py \
    tests/ops/test_rank_counts.py tests/ops/test_score_all.py tests/ops/test_id_ranges.py \
    tests/ops/test_compile.py::test_native_compiled_step_equals_eager tests/ops/test_compiled_backend.py \
    tests/ops/test_cross_entropy_all_biased.py tests/ops/test_inner_products.py \
    tests/ops/test_top_inner_products.py
echo "op tests on torch $TORCH in $((SECONDS - start)) s"
