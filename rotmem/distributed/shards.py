"""Which rows of an entity table a rank holds."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class EntityShard:
    """Rows ``offset .. offset + rows - 1`` of a table of ``total`` rows, held by ``rank`` of ``world``.

    Contiguous and balanced: the first ``total % world`` ranks hold one row more than the others.
    """

    offset: int
    rows: int
    total: int
    rank: int
    world: int

    @classmethod
    def of(cls, total: int, rank: int, world: int) -> EntityShard:
        if world < 1 or not 0 <= rank < world:
            raise ValueError(f"rank {rank} is not in a world of {world}")
        if total < world:
            raise ValueError(f"{total} entities cannot be sharded over {world} ranks (each needs a row)")
        base, extra = divmod(total, world)
        return cls(rank * base + min(rank, extra), base + (rank < extra), total, rank, world)

    @classmethod
    def current(cls, total: int, group: dist.ProcessGroup | None = None) -> EntityShard:
        """This process's shard in ``group`` (the default group when None)."""
        return cls.of(total, dist.get_rank(group), dist.get_world_size(group))

    def owns(self, ids: torch.Tensor) -> torch.Tensor:
        """Which of the global ``ids`` lie in this shard: a bool tensor like ``ids``."""
        return (ids >= self.offset) & (ids < self.offset + self.rows)

    def local(self, ids: torch.Tensor) -> torch.Tensor:
        """Global ``ids`` as rows of this shard, clamped into it (mask with ``owns``)."""
        return (ids - self.offset).clamp(0, self.rows - 1)
