"""Run a function on several real ``torch.distributed`` ranks (gloo, CPU processes) from a test.

``run_on_ranks(fn, world, *args)`` spawns ``world`` processes, initialises a gloo process group in
each through a file in a temporary folder, calls ``fn(rank, world, *args)`` and returns each rank's
return value (saved with ``torch.save``). An exception on any rank fails the call with its traceback.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _entry(rank: int, world: int, folder: str, fn: Callable[..., Any], args: tuple) -> None:
    torch.set_num_threads(1)  # two ranks share the CI machine's two cores
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=rank, world_size=world)
    try:
        result = fn(rank, world, *args)
        torch.save(result, Path(folder) / f"result-{rank}.pt")
    finally:
        dist.destroy_process_group()


def run_on_ranks(fn: Callable[..., Any], world: int, *args: Any) -> list[Any]:
    """``[fn(0, world, *args), .., fn(world - 1, world, *args)]``, each run on its own gloo rank."""
    with tempfile.TemporaryDirectory() as folder:
        mp.start_processes(
            _entry, args=(world, folder, fn, args), nprocs=world, join=True, start_method="spawn"
        )
        return [torch.load(Path(folder) / f"result-{rank}.pt", weights_only=False) for rank in range(world)]
