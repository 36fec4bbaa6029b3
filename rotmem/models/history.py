"""A model's memory of its training facts: how often the asked triple happened near the asked day.

For a query ``(e, r, ?, τ)`` and each answer ``a`` that the slot ``(e, r)`` took in training within
``max(windows)`` days of ``τ``, the features are ``log(1 + c_w)``, ``c_w`` the number of training
facts ``(e, r, a, τ')`` with ``|τ − τ'| <= w`` days, one per window ``w``. The score adds
``Σ_w softplus(v_{r,w}) · log(1 + c_w)``, a learned non-negative weight per relation and window,
so a relation whose facts recur (a visit that lasts a week) can lean on them and one whose facts
do not can ignore them. It is a function of the real-valued ``τ``: any day can be scored, and a
day past the training range sees only the facts before it (temporal extrapolation).

While training, the fact being learned is left out of its own features (it is not there at test
time). Head queries use the reciprocal relation ``R + r``, as the model families do.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

DAY_BITS = 20  # days of a slot are packed below 2**20 in one int64 code (any range up to 2,800 years)


class FactHistory(nn.Module):
    """The training facts of a graph, indexed for ``features``, plus the learned window weights.

    ``facts [M, 4]`` int64 ``(h, r, t, day)``; ``windows`` in days (e.g. ``(1, 3, 7, 30, 90, 365)``).
    Buffers (saved with the model): entries sorted by ``(slot, day)`` with their answers and days.
    """

    def __init__(
        self, num_entities: int, num_relations: int, windows: Sequence[int], facts: torch.Tensor | None
    ):
        super().__init__()
        if not windows or min(windows) < 0:
            raise ValueError(f"history windows must be non-negative days, got {list(windows)}")
        self.num_entities, self.num_relations = num_entities, num_relations
        self.register_buffer("windows", torch.tensor(sorted(windows), dtype=torch.int64))
        # softplus(-3) = 0.05: the history starts with a small say and earns the rest
        self.weight = nn.Parameter(torch.full((2 * num_relations, len(windows)), -3.0))
        empty = torch.zeros(0, dtype=torch.int64)
        for name in ("codes", "answers", "days"):
            self.register_buffer(name, empty.clone())
        self.first_day = 0
        if facts is not None:
            self.index(facts)

    def get_extra_state(self) -> dict[str, int]:
        return {"first_day": self.first_day}

    def set_extra_state(self, state: dict[str, int]) -> None:
        self.first_day = int(state["first_day"])

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in ("codes", "answers", "days"):  # buffers whose size comes from the data
            if prefix + name in state_dict:
                setattr(self, name, torch.empty_like(state_dict[prefix + name]))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def slot_key(self, e: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
        """One int64 per slot ``(e, rel)``; ``rel`` counts reciprocal relations as ``R + r``."""
        return e * (2 * self.num_relations) + rel

    def code(self, key: torch.Tensor, day: torch.Tensor) -> torch.Tensor:
        """``(slot, day)`` packed in one sortable int64; days far outside the range are clamped
        so that a code never reaches into a neighbouring slot."""
        reach = 1 << (DAY_BITS - 1)
        return (key << DAY_BITS) + (day - self.first_day).clamp(-reach, reach)

    def index(self, facts: torch.Tensor) -> None:
        """Index ``facts [M, 4]`` (both directions) as the history."""
        facts = facts.long().cpu()
        h, r, t, day = facts.unbind(1)
        self.first_day = int(day.min()) if facts.shape[0] else 0
        if facts.shape[0] and int(day.max()) - self.first_day >= 1 << (DAY_BITS - 1):
            raise ValueError("the facts span more days than the history can index")
        key = torch.cat([self.slot_key(h, r), self.slot_key(t, r + self.num_relations)])
        answers, days = torch.cat([t, h]), torch.cat([day, day])
        code = self.code(key, days)
        order = torch.argsort(code, stable=True)
        device = self.windows.device
        self.codes, self.answers, self.days = (
            code[order].to(device),
            answers[order].to(device),
            days[order].to(device),
        )

    def features(
        self, e: torch.Tensor, rel: torch.Tensor, tau: torch.Tensor, exclude: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(rows [P], answers [P], features [P, W])`` for queries ``(e, rel, ?, tau)`` (``tau``
        float days; windows reach ``floor``-ed days): one entry per (query, answer) with a training
        fact within the widest window. ``exclude [Q]``: each query's own answer at its own day is
        left out (a training fact learning from itself)."""
        day = tau.floor().long()
        key = self.slot_key(e, rel)
        widest = int(self.windows[-1])
        low = torch.searchsorted(self.codes, self.code(key, day - widest))
        high = torch.searchsorted(self.codes, self.code(key, day + widest), right=True)
        count = high - low
        rows = torch.repeat_interleave(torch.arange(key.numel(), device=key.device), count)
        starts = torch.repeat_interleave(low - (torch.cumsum(count, 0) - count), count)
        entry = starts + torch.arange(rows.numel(), device=key.device)
        answers, gap = self.answers[entry], (self.days[entry] - day[rows]).abs()
        if exclude is not None:
            keep = (gap != 0) | (answers != exclude[rows])
            rows, answers, gap = rows[keep], answers[keep], gap[keep]
        pair, which = torch.unique(rows * self.num_entities + answers, return_inverse=True)
        inside = (gap.unsqueeze(1) <= self.windows).to(torch.float32)
        counts = torch.zeros(pair.numel(), self.windows.numel(), device=key.device).index_add_(
            0, which, inside
        )
        return pair // self.num_entities, pair % self.num_entities, torch.log1p(counts)

    def bias(
        self, e: torch.Tensor, rel: torch.Tensor, tau: torch.Tensor, exclude: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(rows [P], answers [P], bias [P] >= 0)``: the history's score for each (query, answer)
        it has features for (``features``); every other candidate gets 0."""
        rows, answers, features = self.features(e, rel, tau, exclude)
        weight = F.softplus(self.weight).index_select(0, rel[rows])
        return rows, answers, (features.to(weight.dtype) * weight).sum(1)
