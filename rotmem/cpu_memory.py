"""Peak CPU memory of a call, as the PyTorch allocator sees it (for benchmarks and tests)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile


def cpu_peak_bytes(fn: Callable[[], object]) -> int:
    """Peak growth (bytes) of torch-allocated CPU memory during ``fn()``, from the profiler's
    allocator events: every tensor, including those native and compiled code allocate."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    cpu = torch._C._autograd.DeviceType.CPU
    events = [
        e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]" and e.device_type() == cpu
    ]
    current = peak = 0
    for event in sorted(events, key=lambda e: e.start_ns()):
        current += event.nbytes()
        peak = max(peak, current)
    return peak
