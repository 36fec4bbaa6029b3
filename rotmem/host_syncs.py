"""Count the operations that would make the host wait for a GPU, on any device (the CPU included).

On CUDA, an op whose result size or value the host must know before it can go on (``.item()``,
``nonzero``, ``unique``, boolean-mask indexing, ``repeat_interleave`` without ``output_size``,
``bincount``...) copies from the device and waits for every queued kernel: the GPU idles while the
host catches up, and CUDA graphs cannot capture the step. ``torch.cuda.set_sync_debug_mode`` reports
those on a GPU; this counter sees the same ops at the dispatcher, so a CPU test can pin a step at
zero.

    with HostSyncCounter() as syncs:
        loss = step(batch)
    assert not syncs.calls, syncs.summary()
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# aten ops (overload packets) that need the device's data on the host
SYNCING = {
    "_local_scalar_dense",  # .item(), bool(t), int(t), float(t), Python control flow on a tensor
    "nonzero",
    "_unique",
    "_unique2",
    "unique_consecutive",
    "unique_dim",
    "masked_select",
    "bincount",
    "equal",
    "is_nonzero",
    "histc",
    "_coalesce",  # a sparse gradient made dense-indexed: sorts and counts its distinct rows
}


_cpu_only_depth = 0


@contextmanager
def cpu_only() -> Iterator[None]:
    """Marks a readback in a branch that runs for CPU tensors only (an input check, a shortcut):
    it never waits for a GPU, so ``HostSyncCounter`` does not count it."""
    global _cpu_only_depth
    _cpu_only_depth += 1
    try:
        yield
    finally:
        _cpu_only_depth -= 1


def _syncs(func, args, kwargs) -> bool:
    name = func.overloadpacket.__name__
    if name in SYNCING:
        return True
    if name == "repeat_interleave":  # the output size is read from the repeats unless given
        return kwargs.get("output_size") is None and (len(args) < 4 or args[3] is None)
    if name in ("index", "index_put", "index_put_", "_index_put_impl_"):  # a boolean mask -> nonzero
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices or ())
    return False


class HostSyncCounter(TorchDispatchMode):
    """Within the ``with`` block, ``calls`` counts each syncing aten op by name."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not _cpu_only_depth and _syncs(func, args, kwargs):
            self.calls[func.overloadpacket.__name__] += 1
        return func(*args, **kwargs)

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def summary(self) -> str:
        """``"nonzero x3, _local_scalar_dense x1"`` (or ``"none"``)."""
        return ", ".join(f"{name} x{n}" for name, n in self.calls.most_common()) or "none"
