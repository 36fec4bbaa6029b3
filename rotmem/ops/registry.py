"""The list of ``rotmem.ops``: one entry per op, and everything else derived from it.

An entry names the op's reference (``rotmem.ops.reference.<name>``: its math, its signature, its
docstring with the shapes) and the module that holds its kernels in each fused backend,
``rotmem/ops/native/<kernels>.py`` and ``rotmem/ops/triton/<kernels>.py``. Those modules carry the
op's shape functions (fake implementations) and gradients (autograd formulas) beside its kernels:
``register()`` of the native module (its ``torch.ops.rotmem.*`` operators, schemas in
``csrc/rotmem.cpp``, kernels in ``csrc/cpu/<op>.cpp`` and ``csrc/cuda/<op>.cu``), the
``torch.library`` registrations of the Triton one.

Derived from ``OPS``: the public, dispatched functions of ``rotmem.ops``, the function tables of
``rotmem.ops.native``, ``rotmem.ops.triton`` and ``rotmem.ops.compiled`` (each backend module has
one function per op, with the reference's name and signature), and the list of native modules
whose fakes and autograd formulas are registered. Adding an op: its reference, an entry here, its
kernel modules (and, for native, its schemas and C++/CUDA files).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

from rotmem.ops import reference


@dataclass(frozen=True)
class Op:
    """One op: ``name`` is its function in ``rotmem.ops`` and in every backend module."""

    name: str
    # The module of rotmem.ops.native and rotmem.ops.triton with its kernels, shape functions and
    # gradient (several ops may share one); None: no fused kernels, every backend runs the reference.
    kernels: str | None
    # Under torch.autocast its first two inputs (q [B, D], entity [N, D]) are cast to the autocast
    # dtype before dispatch, as autocast casts a matrix product's inputs (rotmem.ops.autocast_inputs).
    autocast: bool = False
    reference: Callable = field(init=False, repr=False, compare=False)
    params: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fn = getattr(reference, self.name)
        object.__setattr__(self, "reference", fn)
        object.__setattr__(self, "params", tuple(inspect.signature(fn).parameters))

    def implementation(self, backend: str) -> Callable:
        """The op's function in ``rotmem.ops.<backend>`` (``native`` or ``triton``): its kernel
        module's, or the reference for an op without kernels."""
        if self.kernels is None:
            return self.reference
        return getattr(kernel_module(backend, self.kernels), self.name)


OPS: tuple[Op, ...] = (
    Op("rotate", kernels="rotate"),
    Op("unrotated_query", kernels="unrotated_query"),
    Op("unrotated_query_indexed", kernels="unrotated_query_indexed"),
    Op("score_all", kernels=None, autocast=True),  # one dense product (BLAS, cuBLAS) serves every backend
    Op("cross_entropy_all", kernels="cross_entropy", autocast=True),
    Op("filtered_rank_counts", kernels="rank_counts"),
    Op("target_scores", kernels="rank_counts"),
    Op("n3", kernels="n3"),
)
NAMES: tuple[str, ...] = tuple(op.name for op in OPS)


def kernel_module(backend: str, kernels: str) -> ModuleType:
    """``rotmem.ops.<backend>.<kernels>``."""
    return importlib.import_module(f"rotmem.ops.{backend}.{kernels}")


def kernel_modules(backend: str) -> list[ModuleType]:
    """Every kernel module of ``backend``, once each, in ``OPS`` order."""
    names = dict.fromkeys(op.kernels for op in OPS if op.kernels is not None)
    return [kernel_module(backend, name) for name in names]


def functions(backend: str) -> dict[str, Callable]:
    """``{name: function}`` of every op in ``rotmem.ops.<backend>``: a backend module's table."""
    return {op.name: op.implementation(backend) for op in OPS}
