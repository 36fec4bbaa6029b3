"""``romem-hybrid`` (benchmarks.temporal_qa.memories): the hybrid pool re-ranked by ``+ beta * S_kge``."""

from __future__ import annotations

import pytest

from benchmarks.temporal_qa.memories import hybrid, romem_hybrid
from rotmem.data import day_of
from tests.test_temporal_memory import _fixed
from tests.test_temporal_memory import memory as memory  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow


def test_beta_zero_is_the_hybrid_order_and_a_large_beta_puts_the_favoured_object_first(memory) -> None:
    _fixed(memory, [("2000-01-01", "Lisbon"), ("2019-01-01", "Porto"), ("2020-01-01", "Madrid")])
    question, now = "Where did Ana live in 2019?", day_of("2021-04-01")
    vector = memory.store.encode([question])[0]
    assert romem_hybrid(memory, 0.0)(question, vector, now) == hybrid(memory)(question, vector, now)
    ranked = romem_hybrid(memory, 100.0)(question, vector, now)
    assert memory.store.record(ranked[0]).object == "Porto"  # RoMem's tail at mid-2019
    assert sorted(ranked) == sorted(hybrid(memory)(question, vector, now))  # same pool, reordered
