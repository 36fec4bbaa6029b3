"""What every Triton op here shares: the launcher, precise sin/cos, dtype and block-size rules."""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from torch._subclasses.fake_tensor import is_fake
from torch.library import custom_op, triton_op, wrap_triton
from triton.language.extra import libdevice

from rotmem.ops import registry
from rotmem.ops.id_checks import check_ids


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


# ``@triton.jit`` decides at decoration time whether a kernel is compiled or interpreted, so the
# mode is fixed when this package is first imported.
INTERPRETED = _interpreting()
_INTERPRET = tl.constexpr(INTERPRETED)

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


@triton.jit
def sincos(x):
    """``sin(x), cos(x)`` with full range reduction: angles reach thousands of radians."""
    if _INTERPRET:
        return tl.sin(x), tl.cos(x)
    else:
        # tl.sin/tl.cos may lower to the approximate hardware instructions, whose error grows
        # with |x|; libdevice reduces the argument exactly.
        return libdevice.sin(x), libdevice.cos(x)


@triton.jit
def cast_for(x, P):
    """``x`` in the element type of pointer ``P``, rounded to nearest even (as a compiled cast is).

    The interpreter truncates float32 -> bfloat16; there the rounding is done on the bits first.
    """
    if _INTERPRET:  # noqa: SIM102 (nested: the outer test prunes the branch when compiled)
        if P.dtype.element_ty == tl.bfloat16:
            bits = x.to(tl.float32).to(tl.uint32, bitcast=True)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
            x = bits.to(tl.float32, bitcast=True)
    return x.to(P.dtype.element_ty)


@triton.jit
def upcast(x, FP64: tl.constexpr):
    """``x`` in the compute precision: float64 for float64 inputs, float32 for every other dtype."""
    if FP64:
        return x.to(tl.float64)
    else:
        return x.to(tl.float32)


def is_fp64(*tensors: torch.Tensor | None) -> bool:
    """Whether the kernels should compute in float64 (any input is float64)."""
    return any(t is not None and t.dtype == torch.float64 for t in tensors)


def check_float(name: str, tensor: torch.Tensor) -> None:
    """Raise a ValueError naming ``name`` unless ``tensor`` has a dtype the kernels handle."""
    if tensor.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"{name} has dtype {tensor.dtype}; the Triton ops support {SUPPORTED_DTYPES}")


def check_same_device(**tensors: torch.Tensor | None) -> None:
    """Raise a ValueError naming the tensors when they are not all on one device."""
    devices = {name: t.device for name, t in tensors.items() if t is not None}
    if len(set(devices.values())) > 1:
        raise ValueError(f"tensors must share a device, got {devices}")


def kernel_op(name: str):
    """Register the decorated function, whose body launches Triton kernels, as op ``name``
    (``rotmem_triton::<operator>``), with the fake implementation of ``rotmem.ops.registry`` (its
    operator's shape function, shared with the native backend); the registry also derives its
    autograd formula (``rotmem.ops.triton`` registers those).

    Compiled kernels: a ``triton_op``, which ``torch.compile`` traces into. Under the CPU
    interpreter a kernel is Python that reads tensor data, which tracing cannot follow: the op is
    then opaque (``custom_op``).
    """

    def register(fn):
        op = triton_op(name, fn, mutates_args=()) if not INTERPRETED else custom_op(name, fn, mutates_args=())
        namespace, operator = name.split("::")
        op.register_fake(registry.fake(namespace, operator))
        return op

    return register


def launch(kernel, grid: tuple[int, ...], *args, **kwargs) -> None:
    """Launch ``kernel`` through ``wrap_triton`` (so ``torch.compile`` and export can trace it).

    Under the interpreter the op is opaque (see ``kernel_op``), so the kernel is called directly
    (torch < 2.13's ``wrap_triton`` rejects interpreted kernels), and a launch on fake tensors (the
    fake implementation) does nothing: the outputs already have the right shapes, all a fake run
    computes.
    """
    if not INTERPRETED:
        wrap_triton(kernel)[grid](*args, **kwargs)
    elif not any(isinstance(a, torch.Tensor) and is_fake(a) for a in args):
        kernel[grid](*args, **kwargs)


def pow2(n: int, low: int = 1, high: int = 1 << 30) -> int:
    """``next_power_of_2(n)`` clipped to ``[low, high]``: a block size covering ``n``."""
    return max(low, min(high, triton.next_power_of_2(max(n, 1))))


def check_index(
    op: str, name: str, index: torch.Tensor, size: int, what: str, ignore: int | None = None
) -> None:
    """Fail, naming op and ``index``, when an id is outside ``[0, size)`` (kernels would read out of
    bounds): ``rotmem.ops.id_checks.check_ids`` after the dtype check. ``ignore``: one more allowed
    id, the cross-entropy's -100."""
    if index.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"{name} must hold int64 (or int32) ids, got {index.dtype}")
    check_ids(op, name, index, size, what, ignore=ignore)


def promoted(*items: torch.Tensor | torch.dtype | None) -> torch.dtype:
    """The dtype eager PyTorch gives an expression mixing these tensors or dtypes (``None`` skipped)."""
    dtype = None
    for item in items:
        if item is not None:
            item = item if isinstance(item, torch.dtype) else item.dtype
            dtype = item if dtype is None else torch.promote_types(dtype, item)
    return dtype
