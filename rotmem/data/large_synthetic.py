"""Synthetic temporal KGs of any size, streamed to disk in the preprocessed format (``rotmem.data.arrays``).

Every field of fact ``i`` is a pure function of ``(seed, i)`` (a counter-based generator: the
splitmix64 mix of the seed, the fact's index and the field), so a graph is reproducible by seed, is
the same whatever the chunk size it is written in, and is written a chunk at a time (a few hundred
MB at most, whatever its size).

The graph has structure a model can learn. Heads follow a power law (entity ``⌊N·u²⌋``, scattered
over the id range by a fixed bijection, so popular entities do not crowd one shard of an
entity-parallel table). A quarter of the relations are static: the tail is a hash of
``(head, relation)``. The others are dynamic with a period of 30 to 480 days: the tail is a hash of
``(head, relation, period index)``, so the answer changes on known days. One fact in ten has a
random tail (noise). Days are uniform over the span. The last 5% + 5% of facts are the valid and
test splits (facts are independent draws, so this is a random split).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from rotmem.data.arrays import ArrayWriter
from rotmem.data.temporal_kg import SPLITS, day_of

CHUNK_FACTS = 1 << 20
NOISE = 0.1
HELD_OUT_FRACTION = 0.05  # of the facts, each for valid and test
PERIODS_DAYS = (30, 60, 120, 240, 480)


def mix(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser: a bijection of uint64 that scatters every input bit over the output."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):  # products wrap modulo 2**64 by design
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def relation_names(num_relations: int) -> list[str]:
    """``static_<r>`` for the first quarter, ``dynamic_<r>_every_<p>_days`` for the rest."""
    static = max(1, num_relations // 4)
    return [
        f"static_{r}" if r < static else f"dynamic_{r}_every_{PERIODS_DAYS[r % len(PERIODS_DAYS)]}_days"
        for r in range(num_relations)
    ]


class SyntheticGraph:
    """The fact generator: ``facts(start, stop)`` gives facts ``start .. stop - 1`` as int64 ``[m, 4]``."""

    def __init__(
        self,
        num_entities: int,
        num_relations: int = 20,
        seed: int = 0,
        first_date: str = "2005-01-01",
        last_date: str = "2015-12-31",
    ):
        if num_entities < 2 or num_relations < 1:
            raise ValueError(
                f"need at least 2 entities and 1 relation, got {num_entities} and {num_relations}"
            )
        self.num_entities, self.num_relations, self.seed = num_entities, num_relations, seed
        self.first_day, self.last_day = day_of(first_date), day_of(last_date)
        if self.last_day < self.first_day:
            raise ValueError(f"last date {last_date} is before first date {first_date}")
        static = max(1, num_relations // 4)
        periods = [0 if r < static else PERIODS_DAYS[r % len(PERIODS_DAYS)] for r in range(num_relations)]
        self.period = np.array(periods, dtype=np.int64)  # 0: static
        # scatter: h -> (h * stride + 1) mod N, a bijection because gcd(stride, N) = 1
        stride = 0x9E3779B1 % num_entities or 1
        while math.gcd(stride, num_entities) != 1:
            stride += 1
        self.stride = stride
        self.salt = int(mix(np.uint64(seed & 0xFFFFFFFFFFFFFFFF)))

    def _uniform(self, index: np.ndarray, field: int) -> np.ndarray:
        """A float64 in [0, 1) per fact index and field, from ``(seed, index, field)`` alone."""
        key = (index.astype(np.uint64) * np.uint64(8) + np.uint64(field)) ^ np.uint64(self.salt)
        return (mix(key) >> np.uint64(11)).astype(np.float64) * 2.0**-53

    def _below(self, index: np.ndarray, field: int, n: int) -> np.ndarray:
        return np.minimum((self._uniform(index, field) * n).astype(np.int64), n - 1)

    def facts(self, start: int, stop: int) -> np.ndarray:
        """Facts ``start .. stop - 1``: int64 ``[stop - start, 4]`` of ``(head, relation, tail, day)``."""
        n_ent = self.num_entities
        index = np.arange(start, stop, dtype=np.int64)
        popular = np.minimum((n_ent * self._uniform(index, 0) ** 2).astype(np.int64), n_ent - 1)
        head = (popular * self.stride + 1) % n_ent
        relation = self._below(index, 1, self.num_relations)
        day = self.first_day + self._below(index, 2, self.last_day - self.first_day + 1)
        period = self.period[relation]
        epoch = np.where(period > 0, (day - self.first_day) // np.maximum(period, 1), 0)
        slot = (
            head.astype(np.uint64) * np.uint64(self.num_relations) + relation.astype(np.uint64)
        ) ^ np.uint64(self.salt)
        tail = (mix(mix(slot) + epoch.astype(np.uint64)) % np.uint64(n_ent)).astype(np.int64)
        noisy = self._uniform(index, 3) < NOISE
        tail = np.where(noisy, self._below(index, 4, n_ent), tail)
        return np.stack([head, relation, tail, day], axis=1)


def split_sizes(num_facts: int) -> dict[str, int]:
    """Facts per split: 5% valid, 5% test, the rest train."""
    held_out = int(num_facts * HELD_OUT_FRACTION)
    return {"train": num_facts - 2 * held_out, "valid": held_out, "test": held_out}


def write_synthetic_graph(
    out: str | Path,
    num_entities: int,
    num_facts: int,
    num_relations: int = 20,
    seed: int = 0,
    first_date: str = "2005-01-01",
    last_date: str = "2015-12-31",
    chunk_facts: int = CHUNK_FACTS,
) -> Path:
    """Generate the graph chunk by chunk into folder ``out`` (``rotmem.data.arrays`` format)."""
    graph = SyntheticGraph(num_entities, num_relations, seed, first_date, last_date)
    sizes = split_sizes(num_facts)
    if sizes["train"] < 1:
        raise ValueError(f"{num_facts} facts leave no training fact")
    out = Path(out)
    name = f"synthetic-{num_entities}e-{num_facts}f-seed{seed}"
    writer = ArrayWriter(out, name, sizes)
    start = 0
    for split in SPLITS:
        stop_split = start + sizes[split]
        for chunk in range(start, stop_split, chunk_facts):
            writer.write(split, graph.facts(chunk, min(chunk + chunk_facts, stop_split)))
        start = stop_split
    writer.write_names(
        "entities",
        (
            (f"e{i}" for i in range(lo, min(lo + chunk_facts, num_entities)))
            for lo in range(0, num_entities, chunk_facts)
        ),
    )
    writer.write_names("relations", [relation_names(num_relations)])
    writer.close()
    return out
