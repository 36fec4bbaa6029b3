"""Build script: the package metadata is in pyproject.toml; this file adds the native extension.

``rotmem._C`` holds the C++ kernels of ``csrc/`` (CPU, OpenMP, always) and the CUDA kernels of
``csrc/cuda`` (only when a CUDA toolkit and a CUDA build of torch are present). Switches:

- ``ROTMEM_SKIP_NATIVE=1``: no extension at all (a pure-Python install; ops use the torch backend).
- ``ROTMEM_FORCE_CUDA=1`` / ``=0``: build the CUDA kernels, or leave them out, whatever is detected.
- ``TORCH_CUDA_ARCH_LIST``: the GPU architectures to compile for. Unset, torch asks the visible GPUs;
  with none visible (a build machine, a wheel) it is ``8.0;9.0+PTX`` here: A100, H100/H200, and PTX
  that newer GPUs compile at load time.

Build against the torch already installed (``pip install --no-build-isolation -e .``): an isolated
build would compile against a freshly downloaded torch that is not the one you run.
"""

from __future__ import annotations

import glob
import os
import platform
import sys

from setuptools import setup

ROOT = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CUDA_ARCHS = "8.0;9.0+PTX"  # A100 and H100/H200, PTX for later GPUs
CXX_STD = "-std=c++17"  # for g++ and nvcc alike; .ci/cxx17_compile.sh checks torch 2.11's headers too


def _flag(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def cuda_arch_list(environ: dict[str, str], gpu_visible: bool) -> str | None:
    """The ``TORCH_CUDA_ARCH_LIST`` to build with: the user's, else None when a GPU is visible
    (torch compiles for it), else ``DEFAULT_CUDA_ARCHS`` (torch cannot ask a GPU that is not there)."""
    user = environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    if user:
        return user
    return None if gpu_visible else DEFAULT_CUDA_ARCHS


def native_extensions() -> dict:
    """``ext_modules`` and ``cmdclass`` for ``setup()``, or nothing when the extension is skipped."""
    if _flag("ROTMEM_SKIP_NATIVE") == "1":
        return {}
    try:
        import torch
        from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension
    except ImportError as error:
        sys.exit(
            f"rotmem: building the native extension needs torch ({error}). Install torch first and run "
            "`pip install --no-build-isolation -e .`, or set ROTMEM_SKIP_NATIVE=1 for a pure-Python install."
        )

    force_cuda = _flag("ROTMEM_FORCE_CUDA")
    with_cuda = torch.version.cuda is not None and CUDA_HOME is not None
    if force_cuda is not None:
        with_cuda = force_cuda == "1"

    sources = [os.path.relpath(p, ROOT) for p in sorted(glob.glob(os.path.join(ROOT, "csrc", "*.cpp")))]
    sources += [
        os.path.relpath(p, ROOT) for p in sorted(glob.glob(os.path.join(ROOT, "csrc", "cpu", "*.cpp")))
    ]
    # C++17, not torch's default C++20: torch 2.11's extension build (the GPU machine's) compiles
    # C++17, so a C++20 feature in csrc/ must fail here as well.
    cxx = ["-O3", CXX_STD]
    if platform.system() != "Windows":
        # GCC treats a float select as control flow under its default -ftrapping-math and then leaves
        # the cross-entropy's AVX2/SSE exp loops scalar (csrc/cpu/row_math.h); no kernel reads FP flags.
        cxx.append("-fno-trapping-math")
    link = []
    if platform.system() == "Linux":
        cxx.append("-fopenmp")
        link.append("-fopenmp")
    macros = []
    extension = CppExtension
    extra = {"cxx": cxx}
    if with_cuda:
        sources += [
            os.path.relpath(p, ROOT) for p in sorted(glob.glob(os.path.join(ROOT, "csrc", "cuda", "*.cu")))
        ]
        arch_list = cuda_arch_list(dict(os.environ), torch.cuda.is_available())
        if arch_list is not None:
            os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list  # read by torch's BuildExtension
            print(f"rotmem: compiling the CUDA kernels for TORCH_CUDA_ARCH_LIST={arch_list}")
        macros.append(("WITH_CUDA", None))
        extension = CUDAExtension
        extra["nvcc"] = ["-O3", CXX_STD, "--expt-relaxed-constexpr", "-lineinfo"]
    ext = extension(
        "rotmem._C",
        sources,
        define_macros=macros,
        extra_compile_args=extra,
        extra_link_args=link,
    )
    return {"ext_modules": [ext], "cmdclass": {"build_ext": BuildExtension}}


if __name__ == "__main__":
    setup(**native_extensions())
