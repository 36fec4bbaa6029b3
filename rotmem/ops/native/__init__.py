"""The native backend: C++ (CPU, OpenMP) and CUDA kernels from ``csrc/``, built as ``rotmem._C``.

Same functions as ``rotmem.ops.reference`` (the shapes and the math are written there), one per op
of ``rotmem.ops.registry``. One op per module, as in ``rotmem.ops.triton``: its wrapper with the
reference's signature (broadcasting, dtype promotion) over its ``torch.ops.rotmem.*`` operators
(schemas in ``csrc/rotmem.cpp``). Their fake (shape) implementations and autograd formulas are
those ``rotmem.ops.registry`` derives from its entries, registered here through ``torch.library``
(the fakes by this package, as torch requires) so ``torch.compile`` and ``torch.library.opcheck``
see them. Loading the extension and
choosing the CPU instruction set is ``_extension``.

Where the results differ from the reference by design:

- Sines, cosines and products are computed in float32 (float64 for float64 inputs) and rounded
  once to the input dtype; for bfloat16/float16 this is more accurate than the reference, which
  rounds every intermediate. Tables' gradients are summed in float32 and rounded once.
- ``cross_entropy_all`` and ``n3`` return float32, or float64 for float64 inputs (the reference
  always returns float32).
- Indices must lie in ``[0, rows)``; negative indices raise instead of wrapping around. The first
  bad one is named in an ``IndexError`` before any kernel runs, on the CPU and on CUDA (one
  ``aminmax`` and a 16-byte readback: ``csrc/checks.h``, docs/kernels.md "Bad input"). With
  ``ROTMEM_CHECK_IDS=0`` CUDA skips that readback, and the kernels' device-side asserts name op and
  input, asynchronously, as with torch's own indexing (``CUDA_LAUNCH_BLOCKING=1`` pins it).
"""

from __future__ import annotations

import torch

from rotmem.ops import registry
from rotmem.ops.native._extension import (
    _C,
    LIB,
    LOADED,
    cpu_isa,
    forced_cpu_isa,
    is_available,
    set_cpu_isa,
    supported_cpu_isas,
    unavailable_reason,
)
from rotmem.ops.native.cross_entropy import cross_entropy_tiled
from rotmem.ops.native.inner_products import inner_products, inner_products_fake
from rotmem.ops.native.rank_counts import filtered_rank_counts_tiled
from rotmem.ops.native.top_inner_products import top_inner_products, top_inner_products_fake

if LOADED:
    # The fakes and autograd formulas of ``rotmem.ops.registry``, registered from here: torch checks
    # that a C++ op's fakes come from the module its library names
    # (``m.set_python_module("rotmem.ops.native")`` in csrc/rotmem.cpp).
    for _name, _fake in registry.fakes("native").items():
        torch.library.register_fake(LIB + _name, _fake)
    registry.register_autograd("native")
    torch.library.register_fake(LIB + "inner_products", inner_products_fake)  # a search: no gradient
    torch.library.register_fake(LIB + "top_inner_products", top_inner_products_fake)

# One function per op of ``rotmem.ops.registry.OPS`` (``score_all``: the reference's dense product).
globals().update(registry.functions("native"))

__all__ = [
    "_C",
    "cpu_isa",
    "cross_entropy_tiled",
    "filtered_rank_counts_tiled",
    "forced_cpu_isa",
    "inner_products",
    "is_available",
    "set_cpu_isa",
    "supported_cpu_isas",
    "top_inner_products",
    "unavailable_reason",
    *registry.NAMES,
]
