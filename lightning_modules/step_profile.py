"""A callback that profiles a few training steps and counts the host syncs in them.

    rotmem fit --config icews05-15-romem-complex-rules --trainer.max_epochs 1 \
        --trainer.callbacks+=lightning_modules.step_profile.StepProfile

From step ``start`` (the first steps compile and warm up) for ``steps`` steps: ``torch.profiler``'s
table of the top ``rows`` ops by device time and by host time, and the syncs: on a GPU the waits
``torch.cuda.set_sync_debug_mode("warn")`` reports (Lightning's own included: a progress bar that
shows the loss reads it back), on the CPU the syncing ops ``rotmem.host_syncs`` counts.
Printed at the end of the window, and written to ``out`` when given.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytorch_lightning as pl
import torch
from torch.profiler import ProfilerActivity, profile

from rotmem.host_syncs import HostSyncCounter


class StepProfile(pl.Callback):
    def __init__(self, start: int = 50, steps: int = 20, rows: int = 15, out: str | None = None):
        self.start, self.steps, self.rows, self.out = start, steps, rows, out
        self._profiler: profile | None = None
        self._warnings: warnings.catch_warnings | None = None
        self._caught: list = []
        self._counter: HostSyncCounter | None = None
        self.report = ""

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        if trainer.global_step != self.start or self._profiler is not None:
            return
        cuda = next(module.parameters()).is_cuda
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        self._profiler = profile(activities=activities)
        self._profiler.__enter__()
        if cuda:
            self._warnings = warnings.catch_warnings(record=True)
            self._caught = self._warnings.__enter__()
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
        else:
            self._counter = HostSyncCounter().__enter__()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        if self._profiler is None or self.report or trainer.global_step < self.start + self.steps:
            return
        if self._counter is not None:
            self._counter.__exit__(None, None, None)
            syncs = f"{self._counter.total} syncing ops ({self._counter.summary()})"
        else:
            torch.cuda.set_sync_debug_mode("default")
            self._warnings.__exit__(None, None, None)
            found = [w for w in self._caught if "synchroniz" in str(w.message)]
            syncs = f"{len(found)} synchronizations reported by torch.cuda.set_sync_debug_mode"
        self._profiler.__exit__(None, None, None)
        averages = self._profiler.key_averages()
        tables = [f"{self.steps} training steps from step {self.start}: {syncs}"]
        if self._warnings is not None:
            tables.append(averages.table(sort_by="self_cuda_time_total", row_limit=self.rows))
        tables.append(averages.table(sort_by="self_cpu_time_total", row_limit=self.rows))
        self.report = "\n".join(tables)
        print(self.report, flush=True)
        if self.out:
            Path(self.out).parent.mkdir(parents=True, exist_ok=True)
            Path(self.out).write_text(self.report + "\n")
