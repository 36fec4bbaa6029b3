"""A model's memory of its training facts: what happened near the asked day.

For a query ``(e, r, ?, τ)`` and a candidate answer ``a``, two kinds of counts, each within several
windows of ``w`` days around ``τ``:

- *slot* counts: training facts ``(e, r, a, τ')`` with ``|τ − τ'| <= w`` (the same triple recurring);
- *pair* counts: training facts between ``e`` and ``a`` in any relation and either direction
  (the two entities interacting at the time, e.g. a visit that comes with statements and meetings).

The score adds ``Σ softplus(v_{r,k}) · log(1 + count_k)`` over the windows ``k`` of both kinds, a
learned non-negative weight per relation and window, so a relation whose facts recur or come in
bursts can lean on them and one whose facts do not can ignore them. Candidates with no count get
nothing: the term is sparse. It is a function of the real-valued ``τ``: any day can be scored, and a
day past the training range sees only the facts before it (temporal extrapolation).

While training, the fact being learned is left out of its own counts (it is not there at test
time). Head queries use the reciprocal relation ``R + r``, as the model families do.

Two options serve temporal extrapolation (asking about days after every training fact):

- ``causal``: count only facts dated *before* the asked day (``τ' < ⌊τ⌋``), in training as at test
  time, so the model learns the same term it will see past the training range;
- ``eval_splits``: the splits a model's history knows while it is evaluated (``known_facts``), e.g.
  ``("train", "valid", "test")`` for the usual extrapolation protocol, where a question about day
  ``τ`` may use every fact of the days before ``τ``. A split other than ``train`` needs ``causal``:
  otherwise the asked fact itself would be counted.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

DAY_BITS = 20  # a key's days are packed below 2**20 in one int64 code (any range up to 1,400 years)
BUFFERS = ("slot_codes", "slot_answers", "slot_days", "pair_codes", "pair_answers", "pair_days")
SPLITS = ("train", "valid", "test")


def _windows(values: Sequence[int] | None, name: str) -> list[int]:
    values = sorted(int(v) for v in (values or ()))
    if values and values[0] < 0:
        raise ValueError(f"{name} must be non-negative days, got {values}")
    return values


class FactHistory(nn.Module):
    """The training facts of a graph, indexed for ``features``, plus the learned window weights.

    ``facts [M, 4]`` int64 ``(h, r, t, day)``; ``slot_windows`` and ``pair_windows`` in days (e.g.
    ``(1, 3, 7, 30, 90, 365)`` and ``(1, 3, 7, 30)``). Buffers (saved with the model): for each
    kind, entries sorted by ``(key, day)`` with their answers and days. ``causal`` and
    ``eval_splits``: module docstring.
    """

    def __init__(
        self,
        num_entities: int,
        num_relations: int,
        slot_windows: Sequence[int] | None,
        pair_windows: Sequence[int] | None = None,
        facts: torch.Tensor | None = None,
        causal: bool = False,
        eval_splits: Sequence[str] = ("train",),
    ):
        super().__init__()
        slot, pair = _windows(slot_windows, "slot_windows"), _windows(pair_windows, "pair_windows")
        if not slot and not pair:
            raise ValueError("a history needs at least one window")
        self.causal, self.eval_splits = bool(causal), tuple(eval_splits)
        unknown = [name for name in self.eval_splits if name not in SPLITS]
        if unknown or "train" not in self.eval_splits:
            raise ValueError(
                f"history eval_splits must include 'train' and come from {SPLITS}, got {eval_splits!r}"
            )
        if not self.causal and self.eval_splits != ("train",):
            raise ValueError(
                f"history eval_splits {self.eval_splits!r} need causal=True: a non-causal history "
                "would count the evaluated fact itself"
            )
        self.num_entities, self.num_relations = num_entities, num_relations
        self.register_buffer("slot_windows", torch.tensor(slot, dtype=torch.int64))
        self.register_buffer("pair_windows", torch.tensor(pair, dtype=torch.int64))
        # softplus(-3) = 0.05: the history starts with a small say and earns the rest
        self.weight = nn.Parameter(torch.full((2 * num_relations, len(slot) + len(pair)), -3.0))
        for name in BUFFERS:
            self.register_buffer(name, torch.zeros(0, dtype=torch.int64))
        self.first_day = 0
        if facts is not None:
            self.index(facts)

    def get_extra_state(self) -> dict[str, int]:
        return {"first_day": self.first_day}

    def set_extra_state(self, state: dict[str, int]) -> None:
        self.first_day = int(state["first_day"])

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in BUFFERS:  # their sizes come from the data
            if prefix + name in state_dict:
                setattr(self, name, torch.empty_like(state_dict[prefix + name]))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def is_empty(self) -> bool:
        return self.slot_codes.numel() == 0 and self.pair_codes.numel() == 0

    def slot_key(self, e: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
        """One int64 per slot ``(e, rel)``; ``rel`` counts reciprocal relations as ``R + r``."""
        return e * (2 * self.num_relations) + rel

    def code(self, key: torch.Tensor, day: torch.Tensor) -> torch.Tensor:
        """``(key, day)`` packed in one sortable int64; days far outside the range are clamped so
        that a code never reaches into a neighbouring key."""
        reach = 1 << (DAY_BITS - 1)
        return (key << DAY_BITS) + (day - self.first_day).clamp(-reach, reach)

    def _sorted(self, key: torch.Tensor, answers: torch.Tensor, days: torch.Tensor):
        code = self.code(key, days)
        order = torch.argsort(code, stable=True)
        device = self.slot_windows.device
        return code[order].to(device), answers[order].to(device), days[order].to(device)

    def index(self, facts: torch.Tensor) -> None:
        """Index ``facts [M, 4]`` (both directions) as the history."""
        facts = facts.long().cpu()
        h, r, t, day = facts.unbind(1)
        self.first_day = int(day.min()) if facts.shape[0] else 0
        if facts.shape[0] and int(day.max()) - self.first_day >= 1 << (DAY_BITS - 1):
            raise ValueError("the facts span more days than the history can index")
        answers, days = torch.cat([t, h]), torch.cat([day, day])
        slots = torch.cat([self.slot_key(h, r), self.slot_key(t, r + self.num_relations)])
        self.slot_codes, self.slot_answers, self.slot_days = self._sorted(slots, answers, days)
        self.pair_codes, self.pair_answers, self.pair_days = self._sorted(torch.cat([h, t]), answers, days)

    def _entries(self, kind: str, key: torch.Tensor, day: torch.Tensor, reach: int, exclude):
        """``(rows, answers, gaps)`` of every ``kind`` entry within ``reach`` days of each query's
        day, without the query's own fact (one entry of ``exclude`` at gap 0) when given."""
        codes, answers, days = (getattr(self, f"{kind}_{part}") for part in ("codes", "answers", "days"))
        low = torch.searchsorted(codes, self.code(key, day - reach))
        last = day - 1 if self.causal else day + reach
        high = torch.searchsorted(codes, self.code(key, last), right=True)
        count = high - low
        rows = torch.repeat_interleave(torch.arange(key.numel(), device=key.device), count)
        entry = torch.repeat_interleave(low - (torch.cumsum(count, 0) - count), count)
        entry = entry + torch.arange(rows.numel(), device=key.device)
        answers, gaps = answers[entry], (days[entry] - day[rows]).abs()
        if exclude is not None:
            own = ((gaps == 0) & (answers == exclude[rows])).nonzero().squeeze(1)
            # entries are sorted by row: the first of each row's own entries is the fact itself
            first = torch.ones_like(own, dtype=torch.bool)
            first[1:] = rows[own[1:]] != rows[own[:-1]]
            keep = torch.ones_like(rows, dtype=torch.bool)
            keep[own[first]] = False
            rows, answers, gaps = rows[keep], answers[keep], gaps[keep]
        return rows, answers, gaps

    def features(
        self, e: torch.Tensor, rel: torch.Tensor, tau: torch.Tensor, exclude: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(rows [P], answers [P], features [P, W])`` for queries ``(e, rel, ?, tau)`` (``tau`` float
        days, floored): one row per (query, answer) with a count in some window, ``log(1 + count)``
        per window (slot windows, then pair windows). ``exclude [Q]``: the query's own answer at its
        own day is one training fact, left out of its counts. A ``causal`` history counts only the
        days before ``tau``."""
        day = tau.floor().long()
        parts = []
        for kind, key, windows in (
            ("slot", self.slot_key(e, rel), self.slot_windows),
            ("pair", e, self.pair_windows),
        ):
            if windows.numel():
                rows, answers, gaps = self._entries(kind, key, day, int(windows[-1]), exclude)
                parts.append((rows, answers, (gaps.unsqueeze(1) <= windows).to(torch.float32)))
        width = self.slot_windows.numel() + self.pair_windows.numel()
        columns, offset = [], 0
        for rows, answers, inside in parts:  # place each kind's windows in its own columns
            wide = inside.new_zeros(inside.shape[0], width)
            wide[:, offset : offset + inside.shape[1]] = inside
            columns.append((rows, answers, wide))
            offset += inside.shape[1]
        rows = torch.cat([c[0] for c in columns])
        answers = torch.cat([c[1] for c in columns])
        inside = torch.cat([c[2] for c in columns])
        pair, which = torch.unique(rows * self.num_entities + answers, return_inverse=True)
        counts = inside.new_zeros(pair.numel(), width).index_add_(0, which, inside)
        return pair // self.num_entities, pair % self.num_entities, torch.log1p(counts)

    def bias(
        self, e: torch.Tensor, rel: torch.Tensor, tau: torch.Tensor, exclude: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(rows [P], answers [P], bias [P] > 0)``: the history's score for each (query, answer)
        it has counts for (``features``); every other candidate gets 0."""
        rows, answers, features = self.features(e, rel, tau, exclude)
        weight = F.softplus(self.weight).index_select(0, rel[rows])
        return rows, answers, (features.to(weight.dtype) * weight).sum(1)


@contextmanager
def known_facts(model, kg) -> Iterator[None]:
    """While ``model`` is evaluated on ``kg``, its history (if any) knows the facts of
    its ``eval_splits`` instead of the training split; the training index is restored after.
    Nothing changes for a model without a history or with ``eval_splits == ("train",)``."""
    history = getattr(model, "history", None)
    if history is None or history.eval_splits == ("train",):
        yield
        return
    saved = {name: getattr(history, name) for name in BUFFERS}
    first_day = history.first_day
    history.index(torch.cat([kg.split(name) for name in history.eval_splits]))
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(history, name, value)
        history.first_day = first_day
