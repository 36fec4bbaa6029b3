#!/usr/bin/env bash
# GPU check, 6 minutes at most on one GPU, build included, so that a second try fits in a 15-minute
# lease. Every step has its own time limit and log, and its figures go to $OUT/summary.txt as soon
# as it ends (a cut lease still returns what finished); a failed step does not stop the others.
#
#   step      limit  what
#   (wheels)     15  install the carried wheels; then 10 s to ask torch whether a GPU is visible
#   env          10  python, torch, triton, nvcc, ninja, CUDA_HOME, setuptools
#   build       100  the native extension with its CUDA kernels (for the visible GPU; ninja, all cores),
#                    then 10 s to report rotmem._C.WITH_CUDA
#   tests        65  every op's tests on CUDA (test_ops_*.py, test_sparse_grad.py; -m "not slow")
#   eval         30  a full ICEWS05-15 test evaluation, fused ranking, GPU then CPU: seconds and MRRs
#   epoch-day    35  icews05-15-romem-complex-day: 200 training batches (of 738, about 27% of an
#   epoch-tnt    35  icews05-15-tntcomplex           epoch, to fit) and a full validation, each
#   kernels      40  the kernel benchmark against eager and torch.compile, rotate's GB/s beside a copy
#   total       350  + 7 steps x 1 s of --kill-after = 357 s <= 360 s (tests/test_ops_gpu_check_dry_run.py
#                    adds the limits up)
#
#   bash benchmarks/gpu_check.sh                 # results under $OUT, else benchmarks/results/gpu_check
#   bash benchmarks/gpu_check.sh --dry-run       # on the CPU, < 1 minute: every step's command
#                                                # line parses and starts (tests/test_gpu_check_dry_run.py)
#   GPU_CHECK_STEPS="tests kernels" bash benchmarks/gpu_check.sh    # a subset of the steps above
#
# On the lent GPU machine (no registry, no ../shared): run `bash benchmarks/gpu_prepare.sh` here
# first, then call the device with carry=[".whl", ".gpu_data"]; wheels found in .whl/ (Lightning's
# CLI parser, ninja) are installed to /tmp/site and ICEWS05-15 is read from .gpu_data/ unless
# ROTMEM_DATA_DIR is set. Logs and checkpoints of the training steps stay outside $OUT.
set -u -o pipefail
cd "$(dirname "$0")/.."
DRY=0
[[ "${1:-}" == "--dry-run" ]] && DRY=1
OUT="${OUT:-benchmarks/results/gpu_check}"
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
STEPS="${GPU_CHECK_STEPS:-env build tests eval epoch-day epoch-tnt kernels}"
PYTHON="${PYTHON:-python3}"
KILL_AFTER=1
: >"$SUMMARY"
wanted() { [[ " $STEPS " == *" $1 "* ]]; }
note() { echo "$*" | tee -a "$SUMMARY"; }

# step NAME SECONDS COMMAND...: run with a time limit, log to $OUT/NAME.log, record rc and seconds.
step() {
    local name=$1 limit=$2 start=$SECONDS rc
    shift 2
    note "== $name (limit ${limit}s): $*"
    timeout --kill-after=$KILL_AFTER "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    tail -n 15 "$OUT/$name.log"
    note "== $name: rc=$rc$([[ $rc == 124 ]] && echo ' (timed out)') in $((SECONDS - start)) s"
}

if compgen -G ".whl/*.whl" >/dev/null; then  # what the machine lacks (benchmarks/gpu_prepare.sh)
    timeout 15 "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}" \
        PATH="/tmp/site/bin:$PATH"
    note "installed to /tmp/site: $(cd .whl && echo *.whl)"
fi
if [[ $DRY == 0 ]] && timeout 10 "$PYTHON" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
    DEVICE=cuda
else
    DEVICE=cpu
fi
DATA="${ROTMEM_DATA_DIR:-$([[ -d .gpu_data ]] && echo .gpu_data || echo ../shared/data)}"
[[ -d "$DATA" ]] && export ROTMEM_DATA_DIR="$(cd "$DATA" && pwd)"

# the machine as the build and the tests will see it
env_report() {
    date -u +%Y-%m-%dT%H:%M:%SZ
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
    echo "which nvcc ninja: $(which nvcc ninja | tr '\n' ' ')"
    echo "CUDA_HOME=${CUDA_HOME:-unset}"
    "$PYTHON" -c "import sys, setuptools, torch, triton; from torch.utils.cpp_extension import CUDA_HOME
print(sys.executable, sys.version.split()[0], 'setuptools', setuptools.__version__, 'torch', torch.__version__,
      'cuda', torch.version.cuda, 'triton', triton.__version__, 'torch CUDA_HOME', CUDA_HOME,
      'gpu', torch.cuda.get_device_name() if torch.cuda.is_available() else None)"
}
if wanted env; then
    export -f env_report
    export PYTHON
    step env 10 bash -c env_report
    grep -v "^==" "$OUT/env.log" >>"$SUMMARY"
fi

if wanted build; then
    # the visible GPU's architecture (setup.py: 8.0;9.0+PTX when none is visible); ninja builds in parallel
    BUILD=("$PYTHON" -m pip install --no-deps --no-build-isolation -e .)
    [[ $DRY == 1 ]] && BUILD+=(--dry-run)  # the build backend runs setup.py, compiles nothing
    MAX_JOBS="${MAX_JOBS:-$(nproc)}" step build 100 "${BUILD[@]}"
    timeout 10 "$PYTHON" -c "import rotmem._C as C; print('rotmem._C WITH_CUDA =', C.WITH_CUDA)" 2>&1 | tail -n 1 |
        tee -a "$SUMMARY"
fi

if wanted tests; then
    # every op's tests (the AOT compile test is the CPU's, CI's); pytest-xdist, when the image has
    # it, compiles the Triton kernels in several processes at once
    TESTS=(tests/test_ops_*.py tests/test_sparse_grad.py)
    TEST_ARGS=(-q -p no:cacheprovider -m "not slow" -rfE --ignore tests/test_ops_triton_aot.py)
    "$PYTHON" -c "import xdist" 2>/dev/null && TEST_ARGS+=(-n 8)
    [[ $DRY == 1 ]] && TEST_ARGS+=(--collect-only)
    step tests 65 "$PYTHON" -m pytest "${TEST_ARGS[@]}" "${TESTS[@]}"
    grep -E "passed|failed|error" "$OUT/tests.log" | tail -n 1 | sed 's/^/tests: /' | tee -a "$SUMMARY"
fi

if wanted eval; then
    EVAL=("$PYTHON" benchmarks/gpu_eval.py --out "$OUT/eval.csv")
    [[ $DRY == 1 ]] && EVAL+=(--dry-run)
    step eval 30 "${EVAL[@]}"
    grep -E "MRR" "$OUT/eval.log" | tee -a "$SUMMARY"
fi

# one training step per config: 200 batches (about 27% of an ICEWS05-15 epoch at batch 500) and a full
# validation on the valid split; the per-step speed and val MRR go to the summary
epoch() {
    local name=$1 config=$2
    local args=(fit --config "$config" --trainer.max_epochs 1 --trainer.limit_train_batches 200
        --trainer.check_val_every_n_epoch 1 --trainer.enable_progress_bar true
        --trainer.logger.init_args.save_dir "${TMPDIR:-/tmp}/gpu_check_runs")
    [[ $DRY == 1 ]] && args+=(--print_config)  # LightningCLI parses every argument, then exits
    step "$name" 35 "$PYTHON" -m rotmem.cli "${args[@]}"
    grep -o "[0-9.]*it/s\|[0-9.]*s/it\|val/time-aware/mrr[^,]*" "$OUT/$name.log" | tail -n 2 |
        sed "s/^/$config: /" | tee -a "$SUMMARY"
}
wanted epoch-day && epoch epoch-day icews05-15-romem-complex-day
wanted epoch-tnt && epoch epoch-tnt icews05-15-tntcomplex

if wanted kernels; then
    if [[ $DEVICE == cuda ]]; then
        KERNELS=(--device cuda --dtype float32,bfloat16 --compile-ops step,rotate,cross_entropy_all --budget-s 30)
    else
        KERNELS=(--device cpu --quick --budget-s 1)  # the dry run: the same script, tiny shapes
    fi
    step kernels 40 "$PYTHON" benchmarks/kernels.py "${KERNELS[@]}" --out-dir "$OUT"
    # the targets' lines (rotate's GB/s beside the copy's, the whole step), failures, skips
    grep -h "GB/s\|step .*forward+backward\|^FAILED\|^skipped" "$OUT/kernels_$DEVICE.txt" 2>/dev/null | tee -a "$SUMMARY"
fi

note "everything is under $OUT ($SUMMARY)"
