"""A model's memory of its training facts: what happened near the asked day.

For a query ``(e, r, ?, τ)`` and a candidate answer ``a``, three kinds of counts, each within
several windows of ``w`` days around ``τ``:

- *slot* counts: training facts ``(e, r, a, τ')`` with ``|τ − τ'| <= w`` (the same triple recurring);
- *pair* counts: training facts between ``e`` and ``a`` in any relation and either direction
  (the two entities interacting at the time, e.g. a visit that comes with statements and meetings);
- *rule* counts: the pair counts split by the relation ``r'`` of each fact between ``e`` and ``a``,
  so that each ``r' ⇒ r`` (a one-hop rule: "expressed intent to meet" the week before a "visit")
  has a say of its own.

The score adds ``Σ softplus(v_{r,k}) · log(1 + count_k)`` over the slot and pair windows ``k``, a
learned non-negative weight per relation and window, so a relation whose facts recur or come in
bursts can lean on them and one whose facts do not can ignore them; and ``Σ softplus(u_{r,r',k}) ·
log(1 + count_{r',k})`` over the rule windows, a weight per relation pair and window. Candidates
with no count get nothing: the term is sparse. It is a function of the real-valued ``τ``: any day
can be scored, and a day past the training range sees only the facts before it (temporal
extrapolation).

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
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

DAY_BITS = 20  # a key's days are packed below 2**20 in one int64 code (any range up to 1,400 years)
KINDS = ("slot", "pair")
PARTS = ("codes", "answers", "days")
BUFFERS = tuple(f"{kind}_{part}" for kind in KINDS for part in PARTS)
# windows up to this many days list their entries; longer ones search once per (query, answer)
LISTED_REACH = 60
MAX_RULE_WINDOW = 365  # rule windows always list their entries
SPLITS = ("train", "valid", "test")


def _windows(values: Sequence[int] | None, name: str, widest: int | None = None) -> list[int]:
    values = sorted(int(v) for v in (values or ()))
    if values and values[0] < 0:
        raise ValueError(f"{name} must be non-negative days, got {values}")
    if values and widest is not None and values[-1] > widest:
        raise ValueError(f"{name} must be at most {widest} days, got {values[-1]}")
    return values


class FactHistory(nn.Module):
    """The training facts of a graph, indexed for ``features``, plus the learned window weights.

    ``facts [M, 4]`` int64 ``(h, r, t, day)``; ``slot_windows``, ``pair_windows`` and
    ``rule_windows`` in days (e.g. ``(1, 3, 7, 30, 90, 365)``, ``(1, 3, 7, 30)`` and ``(1, 7, 30)``).
    Buffers (saved with the model): for each kind, entries sorted by ``(key, day)`` with their
    answers and days, and with rule windows each pair entry's relation. ``causal`` and
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
        rule_windows: Sequence[int] | None = None,
    ):
        super().__init__()
        slot, pair = _windows(slot_windows, "slot_windows"), _windows(pair_windows, "pair_windows")
        rules = _windows(rule_windows, "rule_windows", MAX_RULE_WINDOW)
        if not slot and not pair and not rules:
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
        self.rule_weight: nn.Parameter | None = None
        if rules:  # registered only when asked: a checkpoint without rules loads as before
            self.register_buffer("rule_windows", torch.tensor(rules, dtype=torch.int64))
            self.register_buffer("pair_relations", torch.zeros(0, dtype=torch.int64))
            # softplus(-4) = 0.018: each of the (2R)² relation pairs starts with less say than a window
            relations = 2 * num_relations
            self.rule_weight = nn.Parameter(torch.full((relations, relations, len(rules)), -4.0))
        self.first_day = 0
        self._group_cache: dict[str, tuple] = {}  # what _groups built, and from which index
        if facts is not None:
            self.index(facts)

    def get_extra_state(self) -> dict[str, int]:
        return {"first_day": self.first_day}

    def set_extra_state(self, state: dict[str, int]) -> None:
        self.first_day = int(state["first_day"])

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in self.index_buffers:  # their sizes come from the data
            if prefix + name in state_dict:
                setattr(self, name, torch.empty_like(state_dict[prefix + name]))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def index_buffers(self) -> list[str]:
        """The names of the buffers ``index`` fills."""
        return [*BUFFERS, "pair_relations"] if self.rule_weight is not None else list(BUFFERS)

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

    def index(self, facts: torch.Tensor) -> None:
        """Index ``facts [M, 4]`` (both directions) as the history."""
        facts = facts.long().cpu()
        h, r, t, day = facts.unbind(1)
        self.first_day = int(day.min()) if facts.shape[0] else 0
        if facts.shape[0] and int(day.max()) - self.first_day >= 1 << (DAY_BITS - 1):
            raise ValueError("the facts span more days than the history can index")
        # each fact twice: asked from h (answer t, relation r) and from t (answer h, relation R + r)
        asked, answers, days = torch.cat([h, t]), torch.cat([t, h]), torch.cat([day, day])
        relations = torch.cat([r, r + self.num_relations])
        device = self.weight.device
        for kind, key in (("slot", self.slot_key(asked, relations)), ("pair", asked)):
            code = self.code(key, days)
            order = torch.argsort(code, stable=True)
            for part, value in zip(PARTS, (code, answers, days), strict=True):
                setattr(self, f"{kind}_{part}", value[order].to(device))
            if kind == "pair" and self.rule_weight is not None:
                self.pair_relations = relations[order].to(device)

    def _entries(
        self,
        kind: str,
        key: torch.Tensor,
        day: torch.Tensor,
        reach: int,
        exclude: torch.Tensor | None,
        exclude_relation: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(rows, entries, gaps)``: every ``kind`` entry (its position in the index) within
        ``reach`` days of each query's day, without the query's own fact: one entry of answer
        ``exclude`` at gap 0, and of relation ``exclude_relation`` when given (pair entries)."""
        codes, days = getattr(self, f"{kind}_codes"), getattr(self, f"{kind}_days")
        low = torch.searchsorted(codes, self.code(key, day - reach))
        last = day - 1 if self.causal else day + reach
        high = torch.searchsorted(codes, self.code(key, last), right=True)
        count = high - low
        rows = torch.repeat_interleave(torch.arange(key.numel(), device=key.device), count)
        entry = torch.repeat_interleave(low - (torch.cumsum(count, 0) - count), count)
        entry = entry + torch.arange(rows.numel(), device=key.device)
        gaps = (days[entry] - day[rows]).abs()
        if exclude is not None:
            own = (gaps == 0) & (getattr(self, f"{kind}_answers")[entry] == exclude[rows])
            loop = self._self_loops(kind, key, exclude)
            if exclude_relation is not None:
                relation, asked = self.pair_relations[entry], exclude_relation[rows]
                mirror = (asked + self.num_relations) % (2 * self.num_relations)
                own &= (relation == asked) | (loop[rows] & (relation == mirror))
            own = own.nonzero().squeeze(1)
            # entries are sorted by row: a row's first own entry is the fact itself, and a self-loop's
            # first two are the fact and its mirror
            own_rows = rows[own]
            rank = torch.arange(own.numel(), device=key.device) - torch.searchsorted(own_rows, own_rows)
            keep = torch.ones_like(rows, dtype=torch.bool)
            keep[own[rank <= loop[own_rows].long()]] = False
            rows, entry, gaps = rows[keep], entry[keep], gaps[keep]
        return rows, entry, gaps

    def _self_loops(self, kind: str, key: torch.Tensor, exclude: torch.Tensor) -> torch.Tensor:
        """``[Q]`` bool: the queries whose own fact is a self-loop ``(e, r, e)``, which ``index``
        enters twice under ``e`` (as itself and as its mirror ``R + r``): in the pair entries, both
        are the query's own fact. Slot entries key on the relation too, so there it is one."""
        if kind != "pair":
            return torch.zeros_like(key, dtype=torch.bool)
        return key == exclude

    def _groups(self, kind: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``kind``'s entries grouped by ``(key, answer)``: ``(group_keys [G], group_answers [G],
        day_codes [M])``, groups sorted by key then answer and each group's days packed as
        ``(group, day)`` codes in order. Derived from the saved buffers, built on first use."""
        codes = getattr(self, f"{kind}_codes")
        cached = self._group_cache.get(kind)
        if cached is not None and cached[0] is codes and cached[1] == codes._version:
            return cached[2]
        answers, days = getattr(self, f"{kind}_answers"), getattr(self, f"{kind}_days")
        pair = (codes >> DAY_BITS) * self.num_entities + answers
        order = torch.argsort(pair, stable=True)  # entries come in day order within a key: kept
        pair, days = pair[order], days[order]
        group_pairs, group = torch.unique_consecutive(pair, return_inverse=True)
        groups = (group_pairs // self.num_entities, group_pairs % self.num_entities, self.code(group, days))
        self._group_cache[kind] = (codes, codes._version, groups)
        return groups

    def _group_counts(
        self,
        kind: str,
        key: torch.Tensor,
        day: torch.Tensor,
        windows: list[int],
        exclude: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(rows, answers, counts [P, len(windows)])``: every answer ``key`` ever had, with its
        count of entries within each of ``windows`` days of the query's day (the query's own fact
        left out as in ``_entries``); answers with no count in any window are dropped. For long
        windows, where listing the entries costs more than one search per (query, answer)."""
        group_keys, group_answers, day_codes = self._groups(kind)
        low = torch.searchsorted(group_keys, key)
        count = torch.searchsorted(group_keys, key, right=True) - low
        rows = torch.repeat_interleave(torch.arange(key.numel(), device=key.device), count)
        group = torch.repeat_interleave(low - (torch.cumsum(count, 0) - count), count)
        group = group + torch.arange(rows.numel(), device=key.device)
        asked = day[rows]
        counts = []
        for reach in windows:
            last = asked - 1 if self.causal else asked + reach
            high = torch.searchsorted(day_codes, self.code(group, last), right=True)
            counts.append(high - torch.searchsorted(day_codes, self.code(group, asked - reach)))
        counts = torch.stack(counts, 1)
        answers = group_answers[group]
        if exclude is not None and not self.causal:  # the own fact, at gap 0, is inside every window
            own = (answers == exclude[rows]).nonzero().squeeze(1)
            at_day = self.code(group[own], asked[own])
            on_day = torch.searchsorted(day_codes, at_day, right=True) > torch.searchsorted(day_codes, at_day)
            loop = self._self_loops(kind, key, exclude)[rows[own[on_day]]]
            counts[own[on_day]] -= 1 + loop.long().unsqueeze(1)
        keep = counts.any(1)
        return rows[keep], answers[keep], counts[keep]

    def features(
        self, e: torch.Tensor, rel: torch.Tensor, tau: torch.Tensor, exclude: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(rows [P], answers [P], features [P, W])`` for queries ``(e, rel, ?, tau)`` (``tau`` float
        days, floored): one row per (query, answer) with a count in some slot or pair window,
        ``log(1 + count)`` per window (slot windows, then pair windows). ``exclude [Q]``: the
        query's own answer at its own day is one training fact, left out of its counts. A
        ``causal`` history counts only the days before ``tau``."""
        day = tau.floor().long()
        width = self.slot_windows.numel() + self.pair_windows.numel()
        rows, answers, counts, column = [], [], [], 0
        for kind, key in (("slot", self.slot_key(e, rel)), ("pair", e)):
            windows = getattr(self, f"{kind}_windows").tolist()
            listed = [w for w in windows if w <= LISTED_REACH]  # sorted: the longer ones come last
            if listed:  # list the entries within reach, each inside the windows it falls in
                row, entry, gaps = self._entries(kind, key, day, listed[-1], exclude)
                inside = (gaps.unsqueeze(1) <= torch.tensor(listed, device=gaps.device)).to(torch.float32)
                rows.append(row)
                answers.append(getattr(self, f"{kind}_answers")[entry])
                counts.append(F.pad(inside, (column, width - column - len(listed))))
            if len(listed) < len(windows):  # the longer ones: one search per (query, answer, window)
                row, answer, found = self._group_counts(kind, key, day, windows[len(listed) :], exclude)
                start = column + len(listed)
                rows.append(row)
                answers.append(answer)
                counts.append(F.pad(found.to(torch.float32), (start, width - start - found.shape[1])))
            column += len(windows)
        keys = torch.cat(rows) * self.num_entities + torch.cat(answers)
        pair, which = torch.unique(keys, return_inverse=True)
        summed = torch.zeros(pair.numel(), width, device=day.device).index_add_(0, which, torch.cat(counts))
        return pair // self.num_entities, pair % self.num_entities, torch.log1p(summed)

    def rule_counts(
        self, e: torch.Tensor, rel: torch.Tensor, tau: torch.Tensor, exclude: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(rows [Q], answers [Q], known [Q], features [Q, K])`` of the rule counts: for each
        (query, answer, relation ``r'``) with facts ``(e, r', answer)`` near ``tau``, ``log(1 +
        count)`` per rule window ``k``. ``exclude``: as in ``features``; the own fact is the entry of
        the query's answer and relation at gap 0."""
        windows = self.rule_windows
        rows, entry, gaps = self._entries("pair", e, tau.floor().long(), int(windows[-1]), exclude, rel)
        answers, known = self.pair_answers[entry], self.pair_relations[entry]
        relations = 2 * self.num_relations
        keys = (rows * self.num_entities + answers) * relations + known
        triple, which = torch.unique(keys, return_inverse=True)
        inside = (gaps.unsqueeze(1) <= windows).to(torch.float32)
        counts = torch.zeros(triple.numel(), windows.numel(), device=e.device).index_add_(0, which, inside)
        pair, known = triple // relations, triple % relations
        return pair // self.num_entities, pair % self.num_entities, known, torch.log1p(counts)

    def counts(
        self, e: torch.Tensor, rel: torch.Tensor, tau: torch.Tensor, exclude: torch.Tensor | None = None
    ) -> HistoryCounts:
        """What the history knows of queries ``(e, rel, ?, tau)``, before any learned weight: the
        data-dependent half of ``bias`` (its sizes depend on the data, so on a GPU it would wait for
        the device; computed on the host where the batch is made, it never does)."""
        parts = []
        if self.weight.shape[1]:
            parts.append(self.features(e, rel, tau, exclude))
        rules = self.rule_counts(e, rel, tau, exclude) if self.rule_weight is not None else None
        if rules is not None:
            parts.append(rules[:2])
        keys = torch.cat([rows * self.num_entities + answers for rows, answers, *_ in parts])
        pair, which = torch.unique(keys, return_inverse=True)
        width = self.weight.shape[1]
        features = torch.zeros(pair.numel(), width, device=keys.device)
        if width:
            features[which[: parts[0][0].numel()]] = parts[0][2]
        empty = keys.new_zeros(0)
        rule_pairs, known, rule_features = empty, empty, features.new_zeros(0, 0)
        if rules is not None:
            rule_pairs, known, rule_features = which[keys.numel() - rules[0].numel() :], rules[2], rules[3]
        return HistoryCounts(
            pair // self.num_entities, pair % self.num_entities, features, rule_pairs, known, rule_features
        )

    def training_counts(self, facts: torch.Tensor) -> HistoryCounts:
        """``counts`` of the training queries of ``facts [B, 4]`` ``(h, r, t, day)``: tail queries
        then head queries (relation ``R + r``), each fact left out of its own counts, as
        ``rotmem.losses.one_vs_all_loss`` asks them. Made where the batch is made (the data
        loader, on the host), they spare a GPU step the waits of counting."""
        h, r, t, day = facts.long().unbind(1)
        known, rel = torch.cat([h, t]), torch.cat([r, r + self.num_relations])
        return self.counts(known, rel, torch.cat([day, day]).double(), exclude=torch.cat([t, h]))

    def bias_from(
        self, counts: HistoryCounts, rel: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(rows [P], answers [P], bias [P] >= 0)`` from ``counts`` (of queries of relations
        ``rel``): the learned half of ``bias``, fixed-size tensor ops only (no wait for a GPU)."""
        rows = counts.rows
        bias = counts.features.new_zeros(rows.numel())
        if self.weight.shape[1]:
            weight = F.softplus(self.weight).index_select(0, rel[rows])
            bias = (counts.features.to(weight.dtype) * weight).sum(1)
        if self.rule_weight is not None:
            asked = rel[rows[counts.rule_pairs]]
            weight = F.softplus(self.rule_weight[asked, counts.rule_relations])
            bias = bias.index_add(
                0, counts.rule_pairs, (counts.rule_features.to(weight.dtype) * weight).sum(1)
            )
        return rows, counts.answers, bias

    def bias(
        self, e: torch.Tensor, rel: torch.Tensor, tau: torch.Tensor, exclude: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(rows [P], answers [P], bias [P] >= 0)``: the history's score for each (query, answer)
        it has counts for, distinct pairs: ``Σ_k softplus(v_{rel,k}) · features_k`` over the slot and
        pair windows plus ``Σ_{r',k} softplus(u_{rel,r',k}) · rule_features_{r',k}`` over the rule
        windows; every other candidate gets 0. ``counts`` then ``bias_from``."""
        return self.bias_from(self.counts(e, rel, tau, exclude), rel)


class HistoryCounts(NamedTuple):
    """A batch's history counts (``FactHistory.counts``): pairs ``(rows [P], answers [P])`` of
    (query, answer) with ``features [P, W]`` (slot then pair windows), and the rule counts
    ``rule_features [Q, K]`` of pair ``rule_pairs [Q]`` through known relation ``rule_relations [Q]``.
    A batch may carry them (made on the host with the batch) to the step on any device."""

    rows: torch.Tensor
    answers: torch.Tensor
    features: torch.Tensor
    rule_pairs: torch.Tensor
    rule_relations: torch.Tensor
    rule_features: torch.Tensor

    def to(self, device: torch.device | str) -> HistoryCounts:
        return HistoryCounts(*(part.to(device, non_blocking=True) for part in self))


@contextmanager
def known_facts(model, kg) -> Iterator[None]:
    """While ``model`` is evaluated on ``kg``, its history (if any) knows the facts of
    its ``eval_splits`` instead of the training split; the training index is restored after.
    Nothing changes for a model without a history or with ``eval_splits == ("train",)``."""
    history = getattr(model, "history", None)
    if history is None or history.eval_splits == ("train",):
        yield
        return
    saved = {name: getattr(history, name) for name in history.index_buffers}
    first_day = history.first_day
    history.index(torch.cat([kg.split(name) for name in history.eval_splits]))
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(history, name, value)
        history.first_day = first_day
