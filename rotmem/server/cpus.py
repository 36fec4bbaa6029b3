"""CPU sets for ``rotmem serve --encoder-cpus``: the text encoder's worker on CPUs of its own, the
server on the others it may use (Linux).

On a small machine the server, the encoder's worker and anything else on it share the cores, and
the encoder, the service's bound, loses turns to them: on a 2-core Intel Xeon its worker was busy
0.87-0.90 of a core under load, and 0.93-0.99 with a core of its own (docs/memory.md, "Under load").
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection


def parse_cpu_list(text: str) -> frozenset[int]:
    """The CPUs of a list like ``1``, ``2-3`` or ``0,2-3`` (Linux's cpuset format); ValueError
    naming ``text`` when it is not one."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            first, dash, last = part.strip().partition("-")
            low = int(first)
            high = int(last) if dash else low
            if low < 0 or high < low:
                raise ValueError
            cpus.update(range(low, high + 1))
    except ValueError:
        raise ValueError(f"--encoder-cpus: {text!r} is not a CPU list (like 1, 2-3 or 0,2-3)") from None
    return frozenset(cpus)


def usable_cpus() -> frozenset[int]:
    """The CPUs this process may run on; ValueError where the system cannot pin (not Linux)."""
    if not hasattr(os, "sched_getaffinity"):
        raise ValueError("--encoder-cpus needs Linux (os.sched_setaffinity); leave it out elsewhere")
    return frozenset(os.sched_getaffinity(0))


def split_cpus(encoder: Collection[int]) -> frozenset[int]:
    """The server's CPUs when the encoder's worker takes ``encoder``: the others this process may
    use. ValueError when ``encoder`` names a CPU this process may not use, or leaves none."""
    usable = usable_cpus()
    allowed = format_cpu_list(usable)
    if unknown := sorted(set(encoder) - usable):
        raise ValueError(f"--encoder-cpus: CPU {unknown[0]} is not one this process may use: {allowed}")
    if not (rest := usable - set(encoder)):
        raise ValueError(f"--encoder-cpus {format_cpu_list(encoder)} leaves the server no CPU of {allowed}")
    return rest


def pin_process(cpus: Collection[int]) -> None:
    """Every thread of this process (and what it starts later) on ``cpus`` only: Linux keeps one CPU
    mask per thread, so each running thread is set, not only the caller."""
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task), cpus)


def format_cpu_list(cpus: Collection[int]) -> str:
    """``cpus`` as a list ``parse_cpu_list`` reads: ``0,2,3``."""
    return ",".join(map(str, sorted(cpus)))
