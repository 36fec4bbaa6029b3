#!/usr/bin/env bash
# GPU check, 8 minutes at most on one H200: build the CUDA extension, run the GPU tests, the kernel
# benchmarks (with rotate's GB/s beside a plain copy's), time one ICEWS05-15 epoch at the paper's size
# and, on a machine with 2 GPUs or more, train on 2 of them (DDP over NCCL with the entity table
# sharded). Every step has its own time limit and log (120 + 130 + 170 + 60 s = 8 minutes at worst;
# with several GPUs the kernel step gives 40 of its seconds to the 2-GPU step); a failed step does not
# stop the others. The kernel benchmark measures the issue's targets first,
# starts nothing new after its 130 s budget (and lists what it skipped), saves its CSV after every
# op, and reports a backend that fails on an op without stopping the other backends.
#
#   bash benchmarks/gpu_check.sh                # writes under $OUT, else benchmarks/results/gpu_check
#   ROTMEM_DATA_DIR=/path/to/data bash benchmarks/gpu_check.sh
#   GPU_CHECK_STEPS="tests kernels" bash benchmarks/gpu_check.sh   # a subset of: build tests kernels epoch ddp
#
# On the lent GPU machine (no registry, no ../shared): run `bash benchmarks/gpu_prepare.sh` here
# first, then call the device with carry=[".whl", ".gpu_data"]; wheels found in .whl/ are installed
# to /tmp/site and ICEWS05-15 is read from .gpu_data/ unless ROTMEM_DATA_DIR is set. $OUT gets 8
# files at most (what a device call brings back): summary.txt, the four step logs (the 2-GPU step's at the
# end of epoch.log), kernels_*.{csv,txt,png}.
# Without a GPU the build, benchmark and epoch steps still run on the CPU (a dry run of the script).
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-benchmarks/results/gpu_check}"
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
STEPS="${GPU_CHECK_STEPS:-build tests kernels epoch ddp}"
PYTHON="${PYTHON:-python}"
: >"$SUMMARY"

wanted() { [[ " $STEPS " == *" $1 "* ]]; }

# step NAME SECONDS COMMAND...: run with a time limit, log to $OUT/NAME.log, record rc and seconds.
step() {
    local name=$1 limit=$2 start=$SECONDS rc
    shift 2
    echo "== $name (limit ${limit}s): $*" | tee -a "$SUMMARY"
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    tail -n 25 "$OUT/$name.log"
    echo "== $name: rc=$rc$([[ $rc == 124 ]] && echo ' (timed out)') in $((SECONDS - start)) s" | tee -a "$SUMMARY"
}

{
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
    "$PYTHON" -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'gpu', torch.cuda.get_device_name() if torch.cuda.is_available() else None)"
} | tee -a "$SUMMARY"
if "$PYTHON" -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then DEVICE=cuda; else DEVICE=cpu; fi
GPUS=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
# the 2-GPU step's 40 s come out of the kernel benchmark's, so the total stays 8 minutes
if wanted ddp && [[ $GPUS -ge 2 ]]; then KERNEL_LIMIT=130 KERNEL_BUDGET=90; else KERNEL_LIMIT=170 KERNEL_BUDGET=130; fi
if compgen -G ".whl/*.whl" >/dev/null; then  # packages the machine lacks (benchmarks/gpu_prepare.sh)
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
    echo "installed to /tmp/site: $(cd .whl && echo *.whl)" | tee -a "$SUMMARY"
fi

if wanted build; then
    # the native extension, with its CUDA kernels when nvcc and a CUDA torch are present
    step build 120 "$PYTHON" -m pip install --no-deps --no-build-isolation -e .
fi

if wanted tests; then
    # the ops tests run on the GPU when one is visible; -m "not slow" keeps them within the limit, and
    # pytest-xdist (in the GPU image) compiles the Triton kernels in several processes at once
    PARALLEL=()
    "$PYTHON" -c "import xdist" 2>/dev/null && PARALLEL=(-n 8)
    step tests 130 "$PYTHON" -m pytest -q -p no:cacheprovider -m "not slow" "${PARALLEL[@]}" \
        tests/test_ops_triton.py tests/test_ops_properties.py tests/test_ops_compile.py \
        $(ls tests/test_ops_native*.py 2>/dev/null)
fi

if wanted kernels; then
    if [[ $DEVICE == cuda ]]; then
        step kernels "$KERNEL_LIMIT" "$PYTHON" benchmarks/kernels.py --device cuda --dtype float32,bfloat16 \
            --compile-ops step,rotate,cross_entropy_all --budget-s "$KERNEL_BUDGET" --out-dir "$OUT"
    else
        step kernels "$KERNEL_LIMIT" "$PYTHON" benchmarks/kernels.py --device cpu --quick --budget-s "$KERNEL_BUDGET" \
            --out-dir "$OUT"
    fi
    # the targets' lines (rotate's GB/s, the whole step, the large graph's CE), failures, skips
    grep -h "GB/s\|step .*forward+backward\|large.*cross_entropy_all .*forward+backward\|^FAILED\|^skipped" \
        "$OUT/kernels_$DEVICE.txt" 2>/dev/null | tee -a "$SUMMARY"
fi

if wanted epoch; then
    DATA="${ROTMEM_DATA_DIR:-$([[ -d .gpu_data ]] && echo .gpu_data || echo ../shared/data)}"
    if [[ -f "$DATA/icews05-15/train.txt" ]]; then
        export ROTMEM_DATA_DIR="$(cd "$DATA" && pwd)"
        # the paper's size (dim 500, k = 3, batch 1000); speed "constant" because no pretrained gate
        # travels with this check (the gate only changes alpha, not the work per step)
        # (logs and checkpoints go outside $OUT, which brings back 8 files at most)
        EPOCH_ARGS=(fit --config icews05-15-chronor --trainer.max_epochs 1
            --model.speed constant --model.gate_path null
            --trainer.logger.init_args.save_dir "${TMPDIR:-/tmp}/gpu_check_runs")
        [[ $DEVICE == cpu ]] && EPOCH_ARGS+=(--trainer.limit_train_batches 3)
        step epoch 60 "$PYTHON" -m rotmem.cli "${EPOCH_ARGS[@]}"
        grep -o "[0-9.]*it/s\|[0-9.]*s/it" "$OUT/epoch.log" | tail -n 1 | sed 's/^/epoch speed: /' | tee -a "$SUMMARY"
    else
        echo "== epoch: skipped, no ICEWS05-15 under $DATA (set ROTMEM_DATA_DIR)" | tee -a "$SUMMARY"
    fi
fi

if wanted ddp; then
    if [[ $GPUS -ge 2 ]]; then
        # 2 processes, NCCL: the synthetic graph for one epoch and a validation, the entity table sharded
        # over the 2 GPUs (DDP reduces the replicated tables), the native CUDA kernels (no Triton JIT in
        # a 40 s step; torch's ops when the build has no CUDA). Logs outside $OUT (8 files at most).
        BACKEND=$("$PYTHON" -c "import rotmem._C as C; print('native' if C.WITH_CUDA else 'torch')" 2>/dev/null || echo torch)
        ROTMEM_BACKEND=$BACKEND step ddp 40 "$PYTHON" -m rotmem.cli fit --config synthetic \
            --trainer.accelerator gpu --trainer.devices 2 --trainer.strategy ddp --model.entity_parallel true \
            --trainer.max_epochs 1 --trainer.check_val_every_n_epoch 1 --model.speed constant --model.gate_path null \
            --trainer.logger.init_args.save_dir "${TMPDIR:-/tmp}/gpu_check_ddp"
        grep -o "val_mrr: [0-9.]*\|[0-9.]*it/s" "$OUT/ddp.log" | tail -n 2 | sed 's/^/2 GPUs, entity-parallel: /' | tee -a "$SUMMARY"
        # $OUT brings back 8 files: this log rides at the end of the epoch step's
        { echo "== ddp step log"; cat "$OUT/ddp.log"; } >>"$OUT/epoch.log" && rm -f "$OUT/ddp.log"
    else
        echo "== ddp: skipped, this machine has $GPUS GPU(s) (the 2-process step needs 2 or more)" | tee -a "$SUMMARY"
    fi
fi

echo "everything is under $OUT ($SUMMARY)"
