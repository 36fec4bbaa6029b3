"""TEM's presentation order for present- and past-tense questions (``rotmem.memory.tem.tense``): after
"Alice lives in Paris" (session 1) and "Alice lives in Berlin" (session 2) the current Berlin comes
first for "where does Alice live", and the version valid at the asked time for a past question."""

from __future__ import annotations

import pytest

from rotmem.memory import HashingEncoder, TemporalMemory
from rotmem.memory.tem.tense import asks_about_past
from rotmem.memory.temporal.time_expressions import TimeSpan, as_day


@pytest.fixture
def memory():
    with TemporalMemory(encoder=HashingEncoder(64)) as memory:
        memory.add_session(
            "s1", [("Alice", "lives in", "Paris", "2023-01-10"), ("Alice", "likes", "tea")], date="2023-02-01"
        )
        memory.add_session("s2", [("Alice", "lives in", "Berlin", "2024-02-01")], date="2024-03-01")
        yield memory


def objects(memory: TemporalMemory, question: str, **options) -> list[tuple[str, bool]]:
    return [(r.record.object, r.record.historical) for r in memory.retrieve(question, k=3, **options)]


def test_a_present_tense_question_gets_the_current_version_first(memory):
    assert objects(memory, "where does Alice live") == [("Berlin", False), ("Paris", True), ("tea", False)]
    assert memory.render(memory.retrieve("Where does Alice live now?", k=2)).splitlines()[0] == (
        "2024-02-01: Alice lives in Berlin"
    )


def test_a_question_naming_a_past_time_gets_the_version_valid_then_first(memory):
    assert objects(memory, "where did Alice live in May 2023")[0] == ("Paris", True)
    # the same time named in the present tense still asks about May 2023, which has ended
    assert objects(memory, "where does Alice live in May 2023")[0] == ("Paris", True)
    # a time after the move: Berlin is the version valid then
    assert objects(memory, "where did Alice live in March 2024", now="2024-06-01")[0] == ("Berlin", False)


def test_a_past_tense_question_without_a_time_keeps_the_order_it_was_told(memory):
    assert objects(memory, "where did Alice use to live") == [
        ("Paris", True), ("tea", False), ("Berlin", False)
    ]  # fmt: skip


def test_asks_about_past():
    now = as_day("2024-06-01")
    assert not asks_about_past("Where does Alice live?")
    assert not asks_about_past("What is Bob's job these days?")
    for question in ("Where did Alice live?", "Where was Bob working?", "Who lived in Rome previously?"):
        assert asks_about_past(question), question
    assert asks_about_past("Where is Alice in May", TimeSpan(as_day("2024-05-01"), as_day("2024-05-31")), now)
    assert not asks_about_past("Where is Alice in June", TimeSpan(now, as_day("2024-06-30")), now)
