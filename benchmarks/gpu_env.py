"""The GPU check's first step: the machine as the build and the tests will see it.

python -m benchmarks.gpu_env
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.gpu_env (from the checkout's root)")

import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime


def main() -> int:
    print(datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    smi = shutil.which("nvidia-smi")
    query = ["--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"]
    if smi is None or subprocess.run([smi, *query], timeout=5).returncode != 0:
        print("no nvidia-smi")
    print("which nvcc ninja:", shutil.which("nvcc"), shutil.which("ninja"))
    print(f"CUDA_HOME={os.environ.get('CUDA_HOME', 'unset')}")
    sys.stdout.flush()

    import setuptools
    import torch
    import triton
    from torch.utils.cpp_extension import CUDA_HOME

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    print(sys.executable, sys.version.split()[0], "setuptools", setuptools.__version__,
          "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__,
          "torch CUDA_HOME", CUDA_HOME, "gpu", gpu)  # fmt: skip
    try:
        import rotmem._C as extension

        print("rotmem._C WITH_CUDA =", extension.WITH_CUDA)
    except ImportError as error:
        print(f"rotmem._C does not load: {error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
