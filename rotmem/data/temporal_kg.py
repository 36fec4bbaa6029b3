"""Temporal knowledge graphs: parsing ``head<TAB>relation<TAB>tail<TAB>YYYY-MM-DD`` files.

Time is an integer ``day``: days since 1970-01-01 (UTC), the same number the model takes as ``tau``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import torch

from rotmem.errors import BadDateError, InputFileNotFoundError, UnknownNameError, UserInputError

SPLITS = ("train", "valid", "test")
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()


class DataFormatError(UserInputError, ValueError):
    """A data file could not be parsed; the message names the file and line."""


def day_of(date: str) -> int:
    """``"YYYY-MM-DD"`` -> days since 1970-01-01 (UTC); ``BadDateError`` (a ValueError) names a bad one."""
    try:
        return dt.date.fromisoformat(date).toordinal() - _EPOCH_ORDINAL
    except (TypeError, ValueError):
        raise BadDateError(f"date {date!r} does not parse: expected YYYY-MM-DD, e.g. 2014-06-01") from None


def date_of(day: int | float) -> str:
    """Days since 1970-01-01 -> ``"YYYY-MM-DD"`` (fractional days are floored)."""
    return dt.date.fromordinal(int(np.floor(day)) + _EPOCH_ORDINAL).isoformat()


@dataclass
class TemporalKG:
    """A temporal KG with a shared vocabulary over its splits.

    ``train``, ``valid`` and ``test`` are ``[M, 4]`` int64 tensors of ``(head, relation, tail, day)``
    (memory-mapped for a preprocessed graph, ``rotmem.data.arrays``); ``entities`` and ``relations``
    map ids to strings (the reverse maps are built on the first lookup by name).
    """

    name: str
    entities: list[str]
    relations: list[str]
    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor

    @cached_property
    def _entity_ids(self) -> dict[str, int]:
        return {e: i for i, e in enumerate(self.entities)}

    @cached_property
    def _relation_ids(self) -> dict[str, int]:
        return {r: i for i, r in enumerate(self.relations)}

    @property
    def num_entities(self) -> int:
        return len(self.entities)

    @property
    def num_relations(self) -> int:
        return len(self.relations)

    @property
    def all_facts(self) -> torch.Tensor:
        """``[M_train + M_valid + M_test, 4]``: every fact of every split."""
        return torch.cat([self.train, self.valid, self.test])

    @property
    def first_day(self) -> int:
        """The first day of the training split: the model's reference day tau0."""
        return int(self.train[:, 3].min())

    @property
    def num_days(self) -> int:
        """Distinct days over all splits."""
        return int(torch.unique(self.all_facts[:, 3]).numel())

    def split(self, name: str) -> torch.Tensor:
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; expected one of {SPLITS}")
        return getattr(self, name)

    def entity_id(self, name: str) -> int:
        return lookup(self._entity_ids, name, "entity", self.name)

    def relation_id(self, name: str) -> int:
        return lookup(self._relation_ids, name, "relation", self.name)

    day_of = staticmethod(day_of)
    date_of = staticmethod(date_of)


def lookup(ids: dict[str, int], name: str, kind: str, where: str) -> int:
    """``ids[name]``, or an ``UnknownNameError`` (a KeyError) that names the unknown string."""
    try:
        return ids[name]
    except KeyError:
        raise UnknownNameError(f"unknown {kind} {name!r} (not in the vocabulary of {where})") from None


def read_quadruples(path: Path) -> list[tuple[str, str, str, int]]:
    """Parse one split file (UTF-8; a byte-order mark at its start is dropped); errors name the file
    and 1-based line number: a line that is not UTF-8, not 4 fields, an empty name or a bad date."""
    rows: list[tuple[str, str, str, int]] = []
    days: dict[str, int] = {}
    with open(path, "rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise DataFormatError(
                    f"{path}:{line_no}: not UTF-8 text (byte {raw[error.start]:#04x} at column "
                    f"{error.start + 1}); save the file as UTF-8"
                ) from None
            line = line.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 4:
                raise DataFormatError(
                    f"{path}:{line_no}: expected 4 tab-separated fields "
                    f"(head, relation, tail, YYYY-MM-DD), got {len(fields)}: {line!r}"
                )
            head, relation, tail, date = fields
            for kind, value in (("head", head), ("relation", relation), ("tail", tail)):
                if not value.strip():
                    raise DataFormatError(f"{path}:{line_no}: empty {kind} name: {line!r}")
            if date not in days:
                try:
                    days[date] = day_of(date)
                except ValueError:
                    raise DataFormatError(
                        f"{path}:{line_no}: bad date {date!r}, expected YYYY-MM-DD"
                    ) from None
            rows.append((head, relation, tail, days[date]))
    if not rows:
        raise DataFormatError(f"{path}: file is empty, expected one fact per line")
    return rows


def check_split_files(directory: Path) -> None:
    """``InputFileNotFoundError`` naming the split files ``directory`` lacks (none: nothing)."""
    missing = [s for s in SPLITS if not (Path(directory) / f"{s}.txt").is_file()]
    if missing:
        raise InputFileNotFoundError(
            f"{directory}: missing {', '.join(f'{s}.txt' for s in missing)} "
            "(a dataset directory holds train.txt, valid.txt and test.txt)"
        )


def load_directory(directory: Path, name: str | None = None) -> TemporalKG:
    """Load ``train.txt``, ``valid.txt`` and ``test.txt`` from ``directory``.

    The vocabulary is built from all three splits (some entities occur only in valid/test),
    in order of first appearance.
    """
    directory = Path(directory)
    check_split_files(directory)
    parsed = {s: read_quadruples(directory / f"{s}.txt") for s in SPLITS}
    entity_ids: dict[str, int] = {}
    relation_ids: dict[str, int] = {}
    arrays = {}
    for split in SPLITS:
        rows = parsed[split]
        out = np.empty((len(rows), 4), dtype=np.int64)
        for i, (h, r, t, day) in enumerate(rows):
            out[i, 0] = entity_ids.setdefault(h, len(entity_ids))
            out[i, 1] = relation_ids.setdefault(r, len(relation_ids))
            out[i, 2] = entity_ids.setdefault(t, len(entity_ids))
            out[i, 3] = day
        arrays[split] = torch.from_numpy(out)
    return TemporalKG(
        name=name or directory.name,
        entities=list(entity_ids),
        relations=list(relation_ids),
        **arrays,
    )
