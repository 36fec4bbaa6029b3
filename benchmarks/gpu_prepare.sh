#!/usr/bin/env bash
# Step one on a lent GPU (DEVELOPERS.md), run HERE: python -m benchmarks.gpu_check --prepare puts the
# wheels and the data copy to carry in .whl/ and .gpu_data/, then prints the device call to make.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$([[ -x .venv/bin/python ]] && echo .venv/bin/python || echo python3)}"
exec "$PYTHON" -m benchmarks.gpu_check --prepare
