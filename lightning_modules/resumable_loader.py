"""A training DataLoader that Lightning can checkpoint mid-epoch and resume exactly where it stopped.

Phase 2's batches are random twice over: the shuffle (a ``DistributedSampler`` seeded by the seed
and the epoch, which Lightning sets) and the negative samples of each batch, drawn while the batch
is collated from the data module's one ``torch.Generator`` (the DataLoader's ``generator``). A run
resumed from a mid-epoch checkpoint must see the rest of the same epoch, with the same negatives,
and continue the generator from the same state; a plain DataLoader would restart the epoch.

``ResumableDataLoader`` is a DataLoader (so Lightning can still swap in a distributed sampler) with
``state_dict`` / ``load_state_dict``, so Lightning saves its state in every checkpoint (with the loop
state) and restores it before iterating again. The state is the generator's state at the start of
the epoch and the number of batches handed out since; resuming sets the generator back and replays
those batches (their sampling only: they are collated and dropped), which leaves the shuffle, the
generator and so every later batch exactly as in a run that was never stopped. Lightning does not
prefetch from a loader with a length, so the batches handed out when a checkpoint is written are the
batches trained on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import DataLoader


class ResumableDataLoader(DataLoader):
    """A DataLoader whose randomness all comes from its ``generator``, with a resumable state."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if self.generator is None:
            raise ValueError("ResumableDataLoader needs generator=: its state is what a checkpoint saves")
        self._epoch_start = self.generator.get_state()
        self._handed_out = 0
        self._resume: dict[str, Any] | None = None

    def __iter__(self) -> Iterator[Any]:
        return self._batches()

    def _batches(self) -> Iterator[Any]:
        skip = 0
        if self._resume is not None:
            self.generator.set_state(self._resume["generator"])
            skip = int(self._resume["batches"])
            self._resume = None
        self._epoch_start = self.generator.get_state()
        self._handed_out = skip
        batches = super().__iter__()
        for _ in range(skip):  # replayed for their draws from the generator, not trained on again
            next(batches)
        for batch in batches:
            self._handed_out += 1
            yield batch

    def state_dict(self) -> dict[str, Any]:
        """Where the epoch stands: its generator state at the start and the batches handed out since
        (at the end of an epoch: the generator now, and none, so a resumed run starts the next one)."""
        if self._handed_out >= len(self):
            return {"generator": self.generator.get_state(), "batches": 0}
        return {"generator": self._epoch_start, "batches": self._handed_out}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._resume = state
