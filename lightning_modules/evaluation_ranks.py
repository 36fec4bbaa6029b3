"""One evaluation epoch's ranks, gathered over DDP ranks with the sampler's padding removed.

Under DDP, Lightning's ``DistributedSampler`` gives every rank the same number of facts by repeating
a few; each rank ranks its facts. ``EvaluationRanks`` keeps each fact's ranks under its index in
the split, gathers them from every rank, drops the repeats and orders them by fact, so the metrics
are computed from the same numbers in the same order as in one process: exactly equal.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rotmem.evaluation.ranking import metrics_from_ranks

Key = tuple[str, str]  # (filter, tie rule)


class EvaluationRanks:
    """Ranks by fact index: ``add`` per batch, ``metrics`` once per epoch (then empty again)."""

    def __init__(self) -> None:
        self.index: list[torch.Tensor] = []
        self.ranks: dict[Key, list[torch.Tensor]] = {}

    def __bool__(self) -> bool:
        return bool(self.index)

    def add(self, index: torch.Tensor, ranks: dict[Key, torch.Tensor]) -> None:
        """``index [B]``: the facts' positions in the split; ``ranks``: ``[2B]`` each, tail queries
        then head queries (``rotmem.evaluation.ranking.batch_ranks``)."""
        batch = index.numel()
        self.index.append(index.detach().cpu())
        for key, value in ranks.items():
            self.ranks.setdefault(key, []).append(torch.stack([value[:batch], value[batch:]], 1).cpu())

    def metrics(
        self, all_gather: Callable[[torch.Tensor], torch.Tensor] | None = None
    ) -> dict[Key, dict[str, float]]:
        """MRR and Hits@k per key over every fact once. ``all_gather``: a function returning every
        rank's tensor stacked (``LightningModule.all_gather``), when each rank holds its own facts."""
        index = torch.cat(self.index)
        ranks = {key: torch.cat(parts) for key, parts in self.ranks.items()}
        self.index, self.ranks = [], {}
        if all_gather is not None:
            index = all_gather(index).reshape(-1).cpu()
            ranks = {key: all_gather(value).reshape(-1, 2).cpu() for key, value in ranks.items()}
        index, order = torch.sort(index, stable=True)
        first = torch.ones_like(index, dtype=torch.bool)
        first[1:] = index[1:] != index[:-1]  # a fact the sampler repeated counts once
        return {key: metrics_from_ranks(value[order][first].reshape(-1)) for key, value in ranks.items()}
