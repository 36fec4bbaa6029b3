"""The CUDA build's edges: the architectures ``setup.py`` compiles for, and the one-line error a CPU
tensor gets at a CUDA kernel's entry (the latter needs a CUDA build and a GPU)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from rotmem.ops import native


def load_setup():
    """``setup.py`` as a module (its ``setup()`` runs only as a script)."""
    spec = importlib.util.spec_from_file_location(
        "rotmem_setup", Path(__file__).resolve().parents[2] / "setup.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cuda_arch_list_defaults_to_a100_and_h100_without_a_gpu():
    setup = load_setup()
    assert setup.cuda_arch_list({}, gpu_visible=False) == "8.0;9.0+PTX"
    assert setup.cuda_arch_list({"TORCH_CUDA_ARCH_LIST": " "}, gpu_visible=False) == "8.0;9.0+PTX"
    assert setup.cuda_arch_list({}, gpu_visible=True) is None  # torch compiles for the visible GPU
    assert setup.cuda_arch_list({"TORCH_CUDA_ARCH_LIST": "9.0"}, gpu_visible=False) == "9.0"
    assert setup.cuda_arch_list({"TORCH_CUDA_ARCH_LIST": "8.6"}, gpu_visible=True) == "8.6"


needs_cuda_build = pytest.mark.skipif(
    not native.is_available("cuda"), reason=native.unavailable_reason("cuda") or "the native CUDA kernels run"
)


@needs_cuda_build
def test_a_cpu_tensor_at_a_cuda_kernel_is_named():
    q = torch.randn(4, 6, device="cuda")
    entity = torch.randn(9, 6)  # left on the CPU
    target = torch.tensor([0, 3, 8, 1], device="cuda")
    with pytest.raises(RuntimeError, match=r"cross_entropy_all: entity is on cpu but q is on cuda"):
        torch.ops.rotmem.cross_entropy_all(q, entity, target, "mean", 4, 9)
    with pytest.raises(RuntimeError, match=r"cross_entropy_all: q is on cpu but entity is on cuda"):
        torch.ops.rotmem.cross_entropy_all(q.cpu(), entity.cuda(), target, "mean", 4, 9)  # before the guard
    x, theta = torch.randn(3, 4, device="cuda"), torch.randn(3, 2)
    with pytest.raises(RuntimeError, match=r"rotmem::rotate: theta is on cpu but x is on cuda"):
        torch.ops.rotmem.rotate(x, theta)
    ptr, idx = torch.zeros(1, 5, dtype=torch.long), torch.zeros(0, dtype=torch.long, device="cuda")
    with pytest.raises(RuntimeError, match=r"filtered_rank_counts: filter_ptr is on cpu but q is on cuda"):
        torch.ops.rotmem.filtered_rank_counts(q, entity.cuda(), target, None, ptr, idx, 0, 4, 9)
