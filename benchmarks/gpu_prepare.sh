#!/usr/bin/env bash
# Run HERE (the CPU machine, which reaches the package registry) before the GPU check: puts in the
# repository, in folders git ignores, what the GPU machine lacks and cannot fetch, so that a device
# call can carry them (total about 32 MB of the 64 MiB a call may carry):
#   .whl/       wheels of jsonargparse[signatures] (LightningCLI needs it; the GPU image has none),
#               ninja (torch builds the extension in parallel with it, serially without), and the
#               two fused linear cross-entropies benchmarks/kernels.py times beside this package's:
#               Liger-Kernel and Cut Cross-Entropy (pure Python over Triton, which the image has)
#   .gpu_data/  a copy of ICEWS05-15 (../shared beside the checkout does not travel)
# Then, on the device: run(command="bash benchmarks/gpu_check.sh", carry=[".whl", ".gpu_data"], timeout_s=600);
# gpu_check.sh installs the wheels and reads the data from there when it finds them.
#
#   bash benchmarks/gpu_prepare.sh                 # data from $ROTMEM_DATA_DIR, else ../shared/data
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${ROTMEM_DATA_DIR:-../shared/data}"
PYTHON="${PYTHON:-python3}"

# Versions that pass the test suite with pytorch-lightning 2.6.6 (the GPU image's); pure Python.
WHEELS=(jsonargparse==4.53.0 docstring-parser==0.18.0 typeshed-client==2.15.0 ninja==1.11.1.4
    liger-kernel==0.8.5 cut-cross-entropy==25.1.1)
rm -rf .whl
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_12_x86_64 --platform any -d .whl "${WHEELS[@]}"

if [[ ! -f "$DATA/icews05-15/train.txt" ]]; then
    echo "no ICEWS05-15 under $DATA: set ROTMEM_DATA_DIR (the epoch step will be skipped)" >&2
else
    rm -rf .gpu_data && mkdir -p .gpu_data/icews05-15
    cp "$DATA"/icews05-15/{train,valid,test}.txt .gpu_data/icews05-15/
fi
for folder in .whl .gpu_data; do git check-ignore -q "$folder" || { echo "$folder is not ignored by git" >&2; exit 1; }; done
du -sh .whl .gpu_data 2>/dev/null
echo 'now: run(command="bash benchmarks/gpu_check.sh", carry=[".whl", ".gpu_data"], timeout_s=600)'
