"""Which backend runs each op on a CUDA tensor: the fastest in measured figures kept here.

Each entry is one measurement of the op on a GPU, every backend that was timed beside the others in
one run (``python -m benchmarks.kernels --device cuda``). ``cuda_order(op)`` puts the measured
backends fastest first, then the ones not measured in ``UNMEASURED_ORDER`` (native before Triton:
native was ahead wherever both were timed). An op with no entry uses ``UNMEASURED_ORDER``.

What a figure measured matters: ``torch.compile`` of a whole training step is not a per-op backend,
so the step's compile figure (2.55 ms) is not credited to the ops inside it. The figures below were
taken before the CUDA cross-entropy moved to cuBLAS products (``rotmem.ops.linear_cross_entropy``):
``native``'s step figure is the old hand-written kernel's, so its place is kept, and the next GPU
lease re-measures it (``python -m benchmarks.gpu_check`` writes the rows this table is copied from).
"""

from __future__ import annotations

from dataclasses import dataclass

UNMEASURED_ORDER = ("native", "triton", "torch")
GPU = "one NVIDIA H200, CUDA 13.0, torch 2.11.0+cu130, Triton 3.6 (main at 4a73c05, issue 33)"


@dataclass(frozen=True)
class Measured:
    """One op's figure per backend: ``value`` in ``unit``, higher better when ``higher_is_better``."""

    what: str
    unit: str
    values: dict[str, float]
    higher_is_better: bool = False

    def fastest_first(self) -> tuple[str, ...]:
        sign = -1.0 if self.higher_is_better else 1.0
        return tuple(sorted(self.values, key=lambda name: sign * self.values[name]))


STEP = Measured(  # harness.step: unrotated_query_indexed, cross_entropy_all and n3, float32
    "the ICEWS05-15 step (1,000 facts, n = 249, N = 10,488), forward + backward",
    "ms",
    {"native": 3.58, "torch": 4.14, "triton": 5.65},
)

MEASURED: dict[str, Measured] = {
    "rotate": Measured(
        "rotate of 5,000 x 498 float32 (the time-contrastive loss's shape)",
        "GB/s",
        {"triton": 1901.0, "compile": 1657.0, "torch": 658.0},
        higher_is_better=True,
    ),
    # the step's three ops were timed together; the cross-entropy is most of it
    "unrotated_query_indexed": STEP,
    "cross_entropy_all": STEP,
    "n3": STEP,
}


def cuda_order(op: str | None) -> tuple[str, ...]:
    """Backends to try for ``op`` on a CUDA tensor, first choice first."""
    measured = MEASURED.get(op) if op is not None else None
    if measured is None:
        return UNMEASURED_ORDER
    first = measured.fastest_first()
    return first + tuple(name for name in UNMEASURED_ORDER if name not in first)
