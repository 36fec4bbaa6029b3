#!/usr/bin/env bash
# GPU check, 6 minutes at most on one GPU, build included, so that a second try fits in a 15-minute
# lease. Every step has its own time limit and log, and its figures go to $OUT/summary.txt as soon
# as it ends (a cut lease still returns what finished); a failed step does not stop the others.
#
#   step      limit  what
#   (wheels)     15  install the carried wheels; then 10 s to ask torch whether a GPU is visible
#   env          10  python, torch, triton, nvcc, ninja, CUDA_HOME, setuptools (benchmarks/gpu_env.py)
#   build       100  the native extension with its CUDA kernels (for the visible GPU; ninja, all cores)
#   extension    10  import it: rotmem._C.WITH_CUDA
#   tests        60  every op's tests on CUDA (test_ops_*.py, test_sparse_grad.py; -m "not slow")
#   eval         25  a full ICEWS05-15 test evaluation, fused ranking, GPU then CPU: seconds and MRRs
#   epoch-day    45  icews05-15-romem-complex-day: one full training epoch (738 batches of 500)
#   epoch-tnt    45  icews05-15-tntcomplex          and a full validation, each
#   kernels      30  the kernel benchmark against eager and torch.compile (20 s of measuring),
#                    rotate's GB/s beside a copy
#   total       350  + 8 steps x 1 s of --kill-after = 358 s <= 360 s (tests/test_ops_gpu_check_dry_run.py
#                    adds the limits up)
# The epoch's 45 s, estimated before any GPU run: start-up (imports, data, history, model; 18-20 s
# with 2 batches on this project's 2-core CPU under load, 13 s of it imports), ~15 s of Triton's
# first compiles (the tests step's cache helps where the shapes agree), 738 steps at a few ms of
# launches each, a validation of ~2 s; a step that runs out says so (rc 124) with its log's tail.
# The exit code is 1 when a step failed or timed out.
#
#   bash benchmarks/gpu_check.sh                 # results under $OUT, else benchmarks/results/gpu_check
#   bash benchmarks/gpu_check.sh --dry-run       # on the CPU: every step's command line parses and starts
#   GPU_CHECK_STEPS="tests kernels" bash benchmarks/gpu_check.sh    # a subset of the steps above
#
# The dry run gives each step a dry form (pip --dry-run, pytest --collect-only, gpu_eval.py --dry-run,
# LightningCLI's --print_config, the kernel benchmark's --budget-s 0) and queues it instead of running it;
# at the end benchmarks/gpu_check_dry_run.py starts them all in one Python process that imports torch,
# Lightning and pytest once (a new interpreter per step spent most of a minute on those imports), two at
# a time, each with its step's limit. tests/test_ops_gpu_check_dry_run.py runs it.
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
STEPS="${GPU_CHECK_STEPS:-env build extension tests eval epoch-day epoch-tnt kernels}"
PYTHON="${PYTHON:-python3}"
KILL_AFTER=1
QUEUE="$OUT/dry_run.queue"
FAILED=0
: >"$SUMMARY"
[[ $DRY == 1 ]] && : >"$QUEUE"
wanted() { [[ " $STEPS " == *" $1 "* ]]; }
note() { echo "$*" | tee -a "$SUMMARY"; }

# step NAME SECONDS REPORT COMMAND...: run with a time limit, log to $OUT/NAME.log, then `finished`.
# The dry run queues NAME, SECONDS and the command (NUL-terminated words) for gpu_check_dry_run.py.
step() {
    local name=$1 limit=$2 report=$3 start=$SECONDS rc
    shift 3
    note "== $name (limit ${limit}s): $*"
    REPORTS[$name]=$report
    if [[ $DRY == 1 ]]; then
        printf '%s\0' "$name" "$limit" "$#" "$@" >>"$QUEUE"
        return
    fi
    timeout --kill-after=$KILL_AFTER "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    finished "$name" "$rc$([[ $rc == 124 ]] && echo ' (timed out)') in $((SECONDS - start)) s"
}
declare -A REPORTS

# finished NAME "RC in S s": the log's tail, the step's rc and seconds, then its figures (its REPORT
# function, given the step's name) into the summary
finished() {
    local name=$1 result=$2
    tail -n 15 "$OUT/$name.log"
    note "== $name: rc=$result"
    [[ $result == "0 "* ]] || FAILED=$((FAILED + 1))
    "${REPORTS[$name]}" "$name"
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
report_env() { cat "$OUT/$1.log" >>"$SUMMARY"; }
wanted env && step env 10 report_env "$PYTHON" -m benchmarks.gpu_env

if wanted build; then
    # the visible GPU's architecture (setup.py: 8.0;9.0+PTX when none is visible); ninja builds in parallel
    BUILD=("$PYTHON" -m pip install --no-index --disable-pip-version-check --no-deps --no-build-isolation -e .)
    [[ $DRY == 1 ]] && BUILD+=(--dry-run)  # the build backend runs setup.py, compiles nothing
    MAX_JOBS="${MAX_JOBS:-$(nproc)}" step build 100 true "${BUILD[@]}"
fi
report_last_line() { tail -n 1 "$OUT/$1.log" | tee -a "$SUMMARY"; }
if wanted extension; then
    step extension 10 report_last_line "$PYTHON" -c \
        "import torch, rotmem._C as C; print('rotmem._C WITH_CUDA =', C.WITH_CUDA)"
fi

report_tests() { grep -E "passed|failed|error|collected" "$OUT/$1.log" | tail -n 1 | sed 's/^/tests: /' | tee -a "$SUMMARY"; }
if wanted tests; then
    # every op's tests (the AOT compile test is the CPU's, CI's); pytest-xdist, when the image has
    # it, compiles the Triton kernels in several processes at once
    TESTS=(tests/test_ops_*.py tests/test_sparse_grad.py)
    TEST_ARGS=(-q -p no:cacheprovider -m "not slow" -rfE --ignore tests/test_ops_triton_aot.py)
    "$PYTHON" -c "import xdist" 2>/dev/null && TEST_ARGS+=(-n 8)
    [[ $DRY == 1 ]] && TEST_ARGS+=(--collect-only)
    step tests 60 report_tests "$PYTHON" -m pytest "${TEST_ARGS[@]}" "${TESTS[@]}"
fi

report_eval() { grep -E "MRR" "$OUT/$1.log" | tee -a "$SUMMARY"; }
if wanted eval; then
    EVAL=("$PYTHON" -m benchmarks.gpu_eval --out "$OUT/eval.csv")
    [[ $DRY == 1 ]] && EVAL+=(--dry-run)
    step eval 25 report_eval "${EVAL[@]}"
fi

# one full training epoch per config (738 batches of 500) and a full validation on the valid split;
# the per-step speed and val MRR go to the summary
declare -A CONFIGS=([epoch-day]=icews05-15-romem-complex-day [epoch-tnt]=icews05-15-tntcomplex)
epoch() {
    local name=$1 config=${CONFIGS[$1]}
    local args=(fit --config "$config" --trainer.max_epochs 1 --trainer.check_val_every_n_epoch 1
        --trainer.enable_progress_bar true
        --trainer.logger.init_args.save_dir "${TMPDIR:-/tmp}/gpu_check_runs")
    [[ $DRY == 1 ]] && args+=(--print_config)  # LightningCLI parses every argument, then exits
    step "$name" 45 report_epoch "$PYTHON" -m rotmem.cli "${args[@]}"
}
report_epoch() {
    grep -o "[0-9.]*it/s\|[0-9.]*s/it\|val/time-aware/mrr[^,]*" "$OUT/$1.log" | tail -n 2 |
        sed "s/^/${CONFIGS[$1]}: /" | tee -a "$SUMMARY"
}
for name in epoch-day epoch-tnt; do
    wanted $name && epoch $name
done

# the targets' lines (rotate's GB/s beside the copy's, the whole step), failures, skips
report_kernels() {
    grep -h "GB/s\|step .*forward+backward\|^FAILED\|^skipped" "$OUT/kernels_$DEVICE.txt" 2>/dev/null | tee -a "$SUMMARY"
}
if wanted kernels; then
    if [[ $DEVICE == cuda ]]; then
        KERNELS=(--device cuda --dtype float32,bfloat16 --compile-ops step,rotate,cross_entropy_all --budget-s 20)
    else
        KERNELS=(--device cpu --quick --budget-s 0)  # the dry run: parse, plan, measure nothing
    fi
    step kernels 30 report_kernels "$PYTHON" -m benchmarks.kernels "${KERNELS[@]}" --out-dir "$OUT"
fi

if [[ $DRY == 1 ]]; then
    "$PYTHON" -m benchmarks.gpu_check_dry_run --python "$PYTHON" --out "$OUT" "$QUEUE" | tee "$OUT/dry_run.log"
    tail -n 1 "$OUT/dry_run.log" >>"$SUMMARY"
    while IFS= read -r -d '' name && IFS= read -r -d '' limit && IFS= read -r -d '' argc; do
        for ((i = 0; i < argc; i++)); do IFS= read -r -d '' _; done
        finished "$name" "$(cat "$OUT/$name.result" 2>/dev/null || echo "none (not started)")"
    done <"$QUEUE"
fi
note "everything is under $OUT ($SUMMARY)$( ((FAILED)) && echo "; $FAILED step(s) failed")"
exit $((FAILED > 0))
