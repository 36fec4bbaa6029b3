"""``rotmem.memory.retrieval.constrain``: the constraint applied to hand-made dated facts."""

from __future__ import annotations

from rotmem.data import day_of
from rotmem.memory.records import Record
from rotmem.memory.retrieval.constrain import Candidate, apply_constraint, period
from rotmem.memory.retrieval.time_constraint import parse_time_constraint

NOW = "2013-01-01"
# (subject, relation, object, day or None, score): Ana's visits, one other slot, one undated fact
FACTS = [
    ("Bo", "visit", "Ana", "2012-01-10", 0.45),  # another slot: Ana as the object
    ("Ana", "visit", "Rome", "2012-03-01", 0.5),
    ("Ana", "visit", "Paris", "2012-06-01", 0.7),
    ("Ana", "visit", "Oslo", "2012-06-20", 0.4),
    ("Ana", "visit", "Lima", "2012-11-05", 0.6),
    ("Ana", "visit", "Kyiv", None, 0.3),  # undated: never filtered out
    ("Ana", "praise", "Bo", "2012-06-10", 0.8),  # another relation
]


def candidates() -> list[Candidate]:
    return [
        Candidate(Record(s, r, o, f"s{i}", i, False, score, id=i), None if d is None else day_of(d), score)
        for i, (s, r, o, d, score) in enumerate(FACTS)
    ]


def order(question: str) -> list[str]:
    ranked = apply_constraint(candidates(), parse_time_constraint(question, NOW))
    assert sorted(c.record.id for c in ranked) == list(range(len(FACTS)))  # nothing lost
    return [c.record.object for c in ranked]


def test_no_constraint_is_the_score_order() -> None:
    assert order("Whom did Ana visit?") == ["Bo", "Paris", "Lima", "Rome", "Ana", "Oslo", "Kyiv"]


def test_first_and_last_sort_the_asked_slot_by_date_inside_the_span() -> None:
    assert order("Whom did Ana visit first in 2012?")[:4] == ["Rome", "Paris", "Oslo", "Lima"]
    assert order("Whom did Ana visit last in June 2012?")[:2] == ["Oslo", "Paris"]


def test_during_keeps_the_span_first_and_moves_the_rest_to_the_end_by_score() -> None:
    # June: the slot's two facts by score, then the other kept facts (the undated one included)
    assert order("Whom did Ana visit in June 2012?") == ["Paris", "Oslo", "Bo", "Kyiv", "Lima", "Rome", "Ana"]


def test_before_puts_the_latest_fact_before_the_date_first_and_after_the_earliest_after() -> None:
    assert order("Whom did Ana visit before June 15, 2012?")[:2] == ["Paris", "Rome"]
    assert order("Whom did Ana visit after June 15, 2012?")[:2] == ["Oslo", "Lima"]


def test_as_of_and_current_prefer_the_version_valid_at_the_asked_time() -> None:
    assert order("Whom had Ana visited as of June 2012?")[:3] == ["Oslo", "Paris", "Rome"]
    assert order("Whom does Ana visit these days?")[0] == "Lima"


def test_the_slot_is_the_one_whose_relation_the_question_names() -> None:
    # "praise" is the best candidate naming Ana, but the question asks about visits
    assert order("Whom did Ana visit most recently?")[0] == "Lima"
    assert order("Whom did Ana praise most recently?")[0] == "Bo"


def test_an_undated_fact_is_kept_and_ranked_by_its_score() -> None:
    ranked = order("Whom did Ana visit before 2012-02-01?")
    assert ranked.index("Kyiv") < ranked.index("Rome")  # kept, while the dated visits are moved out


def test_an_entity_anchor_dates_the_question_by_the_anchors_first_fact() -> None:
    facts = [Candidate(Record(s, "visit", "Oslo", "x", i, False, id=i), day_of(d), 1.0 - i / 10)
             for i, (s, d) in enumerate([("Bo", "2012-05-01"), ("Cy", "2012-02-01"), ("Di", "2012-03-01"),
                                         ("Bo", "2012-01-01"), ("Ed", "2011-12-01")])]  # fmt: skip
    after = apply_constraint(facts, parse_time_constraint("After Bo, who was the first to visit Oslo?", NOW))
    assert [c.record.subject for c in after][:2] == ["Cy", "Di"]  # Bo first came on Jan 1
    before = apply_constraint(facts, parse_time_constraint("Before Bo, who was the last to visit Oslo?", NOW))
    assert before[0].record.subject == "Ed"


def test_an_event_anchor_keeps_the_period_of_the_event_day() -> None:
    constraint = parse_time_constraint("Whom did Ana visit in the same month as Bo praised Cy?", NOW)
    ranked = apply_constraint(candidates(), constraint, anchor_day=day_of("2012-06-10"))
    assert [c.record.object for c in ranked][:2] == ["Paris", "Oslo"]
    assert period(day_of("2012-02-10"), "month") == (day_of("2012-02-01"), day_of("2012-02-29"))
    assert period(day_of("2012-02-10"), "year") == (day_of("2012-01-01"), day_of("2012-12-31"))


def test_no_candidates_give_nothing() -> None:
    assert apply_constraint([], parse_time_constraint("Whom did Ana visit first in 2012?", NOW)) == []


def test_completion_adds_the_slots_facts_the_pool_missed_to_the_date_order() -> None:
    missed = Candidate(Record("Ana", "visit", "Baku", "s9", 9, False, id=99), day_of("2012-01-02"), -5.0)
    asked = []

    def complete(key):
        asked.append(key)
        return [missed, candidates()[1]]  # one new fact, one the pool holds already

    constraint = parse_time_constraint("Whom did Ana visit first in 2012?", NOW)
    ranked = apply_constraint(candidates(), constraint, complete=complete)
    assert asked == [("visit", "Ana", None)]
    assert [c.record.object for c in ranked][:2] == ["Baku", "Rome"] and len(ranked) == len(FACTS) + 1
