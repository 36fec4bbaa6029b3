"""``romem-hybrid`` (rotmem.memory.retrieval.baselines.best, ``BestMemory`` without the time constraint):
the hybrid pool re-ranked by ``+ beta * S_kge``."""

from __future__ import annotations

import pytest

from rotmem.data import day_of
from rotmem.memory.retrieval.baselines import best, hybrid
from tests.test_temporal_memory import _fixed
from tests.test_temporal_memory import memory as memory  # noqa: F401 - the fixture

pytestmark = pytest.mark.slow


def test_beta_zero_is_the_hybrid_order_and_a_large_beta_puts_the_favoured_object_first(memory) -> None:
    _fixed(memory, [("2000-01-01", "Lisbon"), ("2019-01-01", "Porto"), ("2020-01-01", "Madrid")])
    question, now = "Where did Ana live in 2019?", day_of("2021-04-01")
    vector = memory.store.encode([question])[0]
    assert best(memory, 0.0, constrain=False)(question, vector, now) == hybrid(memory)(question, vector, now)
    ranked = best(memory, 100.0, constrain=False)(question, vector, now)
    assert memory.store.record(ranked[0]).object == "Porto"  # RoMem's tail at mid-2019
    assert sorted(ranked) == sorted(hybrid(memory)(question, vector, now))  # same pool, reordered


def test_symbolic_named_sorts_the_facts_naming_the_question_first() -> None:
    # two visits in 2012: the earliest of the pool is someone else's; the earliest naming Ana is Mar 1
    from rotmem.memory import HashingEncoder
    from rotmem.memory.retrieval.baselines import symbolic
    from rotmem.memory.temporal.memory import TemporalMemory

    memory = TemporalMemory(encoder=HashingEncoder(128), verify=False)
    memory.add_session("s1", [("Bo", "visit", "Oslo")], date="2012-01-10")
    memory.add_session("s2", [("Ana", "visit", "Rome")], date="2012-03-01")
    memory.add_session("s3", [("Ana", "visit", "Paris")], date="2012-06-01")
    question, now = "Whom did Ana visit first in 2012?", day_of("2013-01-01")
    vector = memory.store.encode([question])[0]
    plain = [memory.store.record(i).object for i in symbolic(memory)(question, vector, now)]
    named = [memory.store.record(i).object for i in symbolic(memory, named_first=True)(question, vector, now)]
    assert plain == ["Oslo", "Rome", "Paris"]  # the whole pool by date
    assert named == ["Rome", "Paris", "Oslo"]  # Ana's facts by date, then the rest
