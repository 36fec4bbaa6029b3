#!/usr/bin/env bash
# GPU check v2, 4 minutes at most on one GPU, build included, so that a second try fits in a 15-minute
# lease. Every step has its own time limit and log, and its figures go to $OUT/summary.txt as soon
# as it ends (a cut lease still returns what finished); a failed step does not stop the others.
#
#   step      limit  what
#   (wheels)      8  install the carried wheels (Lightning's CLI parser, ninja, Liger-Kernel, Cut
#                    Cross-Entropy); then 3 s to ask nvidia-smi whether a GPU is there
#   build        90  the native extension with its CUDA kernels (for the visible GPU; ninja, all cores)
#   env           7  python, torch, triton, nvcc, CUDA_HOME, the GPU; rotmem._C and WITH_CUDA
#   tests        45  the GPU subset of the op tests (pytest --gpu-subset: every CUDA case of each op
#                    at its first 3 parametrizations, every error test)
#   eval         15  a full ICEWS05-15 test evaluation per GPU backend, cold and warm, then the CPU;
#                    the rank-count op's ms per batch (importable from the checkout whatever the build did)
#   epoch        48  icews05-15-romem-complex-rules (the demo): one epoch and its validation, batches and
#                    history counts made by 8 loader workers; a torch.profiler table of 20 steps and the
#                    syncs torch.cuda.set_sync_debug_mode reports in them
#   kernels      15  the step and the cross-entropy, float32 / TF32 / bfloat16, every provider (eager,
#                    compile, native, triton, linear, liger, cce), as far as 10 s of measuring reach
#   total       231  + 6 steps x 1 s of --kill-after = 237 s (tests/test_gpu_check_dry_run.py
#                    adds the limits up)
# The exit code is 1 when a step failed or timed out.
#
#   bash benchmarks/gpu_check.sh                 # results under $OUT, else benchmarks/results/gpu_check
#   bash benchmarks/gpu_check.sh --dry-run       # on the CPU: every step's command line parses and starts
#   GPU_CHECK_STEPS="tests kernels" bash benchmarks/gpu_check.sh    # a subset of the steps above
#
# The dry run gives each step a dry form (pip --dry-run, pytest --collect-only, gpu_eval --dry-run,
# LightningCLI's --print_config, the kernel benchmark's --budget-s 0) and queues it instead of running it;
# at the end benchmarks/gpu_check_dry_run.py starts them all in one Python process that imports torch,
# Lightning and pytest once, two at a time, each with its step's limit.
# tests/test_gpu_check_dry_run.py runs it.
#
# On the lent GPU machine (no registry, no ../shared): run `bash benchmarks/gpu_prepare.sh` here
# first, then call the device with carry=[".whl", ".gpu_data"]; wheels found in .whl/ are installed to
# /tmp/site and ICEWS05-15 is read from .gpu_data/ unless ROTMEM_DATA_DIR is set. Logs and checkpoints
# of the training step stay outside $OUT.
set -u -o pipefail
cd "$(dirname "$0")/.."
DRY=0
[[ "${1:-}" == "--dry-run" ]] && DRY=1
OUT="${OUT:-benchmarks/results/gpu_check}"
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
STEPS="${GPU_CHECK_STEPS:-build env tests eval epoch kernels}"
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
    timeout 8 "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}" \
        PATH="/tmp/site/bin:$PATH"
    note "installed to /tmp/site: $(cd .whl && echo *.whl)"
fi
if [[ $DRY == 0 ]] && timeout 3 nvidia-smi -L >/dev/null 2>&1; then
    DEVICE=cuda
else
    DEVICE=cpu
fi
DATA="${ROTMEM_DATA_DIR:-$([[ -d .gpu_data ]] && echo .gpu_data || echo ../shared/data)}"
[[ -d "$DATA" ]] && export ROTMEM_DATA_DIR="$(cd "$DATA" && pwd)"

if wanted build; then
    # the visible GPU's architecture (setup.py: 8.0;9.0+PTX when none is visible); ninja builds in parallel
    BUILD=("$PYTHON" -m pip install --no-index --disable-pip-version-check --no-deps --no-build-isolation -e .)
    [[ $DRY == 1 ]] && BUILD+=(--dry-run)  # the build backend runs setup.py, compiles nothing
    MAX_JOBS="${MAX_JOBS:-$(nproc)}" step build 90 true "${BUILD[@]}"
fi
# the machine as the tests will see it, and the extension the build made (or why it cannot load)
report_env() { cat "$OUT/$1.log" >>"$SUMMARY"; }
wanted env && step env 7 report_env "$PYTHON" -m benchmarks.gpu_env

report_tests() { grep -E "passed|failed|error|collected" "$OUT/$1.log" | tail -n 1 | sed 's/^/tests: /' | tee -a "$SUMMARY"; }
if wanted tests; then
    # the GPU subset (tests/conftest.py: --gpu-subset); pytest-xdist, when the image has it, compiles
    # the Triton kernels in several processes at once
    TESTS=(tests/ops tests/test_sparse_grad.py)
    TEST_ARGS=(-q -p no:cacheprovider -m "not slow" -rfE --gpu-subset --ignore tests/ops/test_triton_aot.py)
    "$PYTHON" -c "import xdist" 2>/dev/null && TEST_ARGS+=(-n 8)
    [[ $DRY == 1 ]] && TEST_ARGS+=(--collect-only)
    step tests 45 report_tests "$PYTHON" -m pytest "${TEST_ARGS[@]}" "${TESTS[@]}"
fi

report_eval() { grep -E "MRR|rank counts" "$OUT/$1.log" | tee -a "$SUMMARY"; }
if wanted eval; then
    # from the checkout (PYTHONPATH), so that it imports whatever the build did: the torch backend runs
    EVAL=("$PYTHON" -m benchmarks.gpu_eval --out "$OUT/eval.csv")
    [[ $DRY == 1 ]] && EVAL+=(--dry-run)
    PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" step eval 15 report_eval "${EVAL[@]}"
fi

# one training epoch of the demo config and its validation, 20 steps profiled with their syncs
report_epoch() {
    grep -o "[0-9.]*it/s\|[0-9.]*s/it\|val/time-aware/mrr[^,]*" "$OUT/$1.log" | tail -n 2 | tee -a "$SUMMARY"
    grep -h "training steps from step" "$OUT/profile.txt" 2>/dev/null | tee -a "$SUMMARY"
}
if wanted epoch; then
    EPOCH=(fit --config icews05-15-romem-complex-rules --trainer.max_epochs 1 --trainer.check_val_every_n_epoch 1
        --trainer.enable_progress_bar true --data.num_workers 8
        --trainer.callbacks+=lightning_modules.step_profile.StepProfile
        --trainer.callbacks.init_args.out "$OUT/profile.txt"
        --trainer.logger.init_args.save_dir "${TMPDIR:-/tmp}/gpu_check_runs")
    [[ $DRY == 1 ]] && EPOCH+=(--print_config)  # LightningCLI parses every argument, then exits
    step epoch 48 report_epoch "$PYTHON" -m rotmem.cli "${EPOCH[@]}"
fi

# the step's and the cross-entropy's forward+backward lines per provider and precision, failures, skips
report_kernels() {
    grep -h "forward+backward\|^FAILED\|^skipped\|^provider" "$OUT/kernels_$DEVICE.md" "$OUT/kernels.log" 2>/dev/null |
        tee -a "$SUMMARY"
}
if wanted kernels; then
    if [[ $DEVICE == cuda ]]; then
        KERNELS=(--device cuda --dtype float32,tf32,bfloat16 --ops step,cross_entropy_all --reps 20
            --shapes icews --providers eager,compile,native,triton,linear,liger,cce --budget-s 10)
    else
        KERNELS=(--device cpu --quick --budget-s 0)  # the dry run: parse, plan, measure nothing
    fi
    step kernels 15 report_kernels "$PYTHON" -m benchmarks.kernels "${KERNELS[@]}" --out-dir "$OUT"
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
