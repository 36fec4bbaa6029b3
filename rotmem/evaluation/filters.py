"""Known true answers per query, for filtered ranking, as a sorted CSR index (no Python loops)."""

from __future__ import annotations

import torch

FILTERS = ("time-aware", "static")


class AnswerFilter:
    """True answers of queries ``(entity, relation[, day])`` in one direction.

    ``direction="tail"``: queries ``(h, r, ?, day)``; ``"head"``: ``(?, r, t, day)``.
    ``kind="time-aware"`` keys on ``(entity, relation, day)``; ``"static"`` on
    ``(entity, relation)`` at any time. ``facts`` is ``[M, 4]`` ``(h, r, t, day)``.
    """

    def __init__(self, facts: torch.Tensor, direction: str, kind: str):
        if kind not in FILTERS:
            raise ValueError(f"unknown filter {kind!r}; expected one of {FILTERS}")
        if direction not in ("tail", "head"):
            raise ValueError(f"unknown direction {direction!r}; expected 'tail' or 'head'")
        facts = facts.cpu()
        self.time_aware = kind == "time-aware"
        self.direction = direction
        self.num_relations = int(facts[:, 1].max()) + 1
        self.day_min = int(facts[:, 3].min())
        self.num_days = int(facts[:, 3].max()) - self.day_min + 1
        query_entity, answer = (
            (facts[:, 0], facts[:, 2]) if direction == "tail" else (facts[:, 2], facts[:, 0])
        )
        keys = self.key(query_entity, facts[:, 1], facts[:, 3])
        pairs = torch.unique(torch.stack([keys, answer], dim=1), dim=0)  # sorted by key, then answer
        self.keys, counts = torch.unique_consecutive(pairs[:, 0], return_counts=True)
        self.counts = counts
        self.offsets = torch.cumsum(counts, 0) - counts
        self.answers = pairs[:, 1].contiguous()

    def key(self, entity: torch.Tensor, relation: torch.Tensor, day: torch.Tensor) -> torch.Tensor:
        """One int64 key per query."""
        key = entity * self.num_relations + relation
        if self.time_aware:
            key = key * self.num_days + (day - self.day_min)
        return key

    def to(self, device: torch.device) -> AnswerFilter:
        for name in ("keys", "counts", "offsets", "answers"):
            setattr(self, name, getattr(self, name).to(device))
        return self

    def known_answers(
        self, entity: torch.Tensor, relation: torch.Tensor, day: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(row, answer)`` index pairs: every known answer of every query in the batch."""
        key = self.key(entity, relation, day)
        pos = torch.searchsorted(self.keys, key).clamp(max=self.keys.numel() - 1)
        found = self.keys[pos] == key
        count = torch.where(found, self.counts[pos], torch.zeros_like(pos))
        rows = torch.repeat_interleave(torch.arange(key.numel(), device=key.device), count)
        within = torch.arange(rows.numel(), device=key.device) - torch.repeat_interleave(
            torch.cumsum(count, 0) - count, count
        )
        return rows, self.answers[self.offsets[pos][rows] + within]

    def known_answers_csr(
        self, entity: torch.Tensor, relation: torch.Tensor, day: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(ptr [B+1], answers)``: query ``b``'s known answers are ``answers[ptr[b] : ptr[b+1]]``,
        in increasing order (the CSR rows ``rotmem.ops.filtered_rank_counts`` takes)."""
        rows, answers = self.known_answers(entity, relation, day)
        ptr = torch.zeros(entity.numel() + 1, dtype=torch.int64, device=entity.device)
        ptr[1:] = torch.cumsum(torch.bincount(rows, minlength=entity.numel()), 0)
        return ptr, answers
