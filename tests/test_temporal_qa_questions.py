"""The temporal-QA question generator: gold answers against brute force, determinism, coverage."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from benchmarks.datasets.temporal_qa import COUNTS, GRANULARITIES, QUESTION_TYPES, generate, period
from benchmarks.temporal_qa.phrasings import PHRASINGS
from rotmem.data import day_of
from rotmem.memory.temporal.time_expressions import extract_time

RELATIONS = ["Make a visit", "Criticize or denounce", "Consult", "Engage in negotiation"]
WINDOW = (day_of("2012-01-01"), day_of("2012-12-31"))
SMALL = {key: 12 for key in COUNTS}


def tiny_graph(seed: int = 0) -> list[tuple[str, str, str, int]]:
    """8 entities, 4 relations, 2011-2013, about 600 facts: small enough to brute-force."""
    rng = random.Random(seed)
    entities = [f"E{i}" for i in range(8)]
    facts = set()
    while len(facts) < 600:
        h, t = rng.sample(entities, 2)
        facts.add((h, rng.choice(RELATIONS), t, rng.randint(day_of("2011-01-01"), day_of("2013-12-31"))))
    return sorted(facts)


def brute_force_gold(q, facts) -> set[str]:
    """The gold answers recomputed from the question text and the fact list alone."""
    p = PHRASINGS[q.relation]
    matching = [f for f in facts if f[1] == q.relation]
    if q.answer_type == "time":
        days = sorted(f[3] for f in matching if (f[0], f[2]) == (q.head, q.tail))
        if " first " in q.text:
            days = days[:1]
        elif " last " in q.text:
            days = days[-1:]
        return {period(d, q.granularity) for d in days}
    if q.answer_side == "head":
        pairs = [(f[3], f[0]) for f in matching if f[2] == q.tail]
    else:
        pairs = [(f[3], f[2]) for f in matching if f[0] == q.head]
    if q.qtype == "current":
        asked = day_of(q.asked_on)
        pairs = [x for x in pairs if x[0] < asked]
        return {a for d, a in pairs if d == max(pairs)[0]}
    if q.qtype in ("after_first", "before_last"):
        anchor = re.match(r"(?:After|Before) (\w+),", q.text).group(1)
        start = min(d for d, a in pairs if a == anchor)
        if q.qtype == "after_first":
            later = [x for x in pairs if x[0] > start and x[1] != anchor]
            return {a for d, a in later if d == min(later)[0]}
        earlier = [x for x in pairs if x[0] < start and x[1] != anchor]
        return {a for d, a in earlier if d == max(earlier)[0]}
    if q.qtype == "equal_multi":
        a_head, a_past, a_tail = re.search(r" as (\w+) (.+) (\w+)\?$", q.text).groups()
        a_rel = next(r for r in RELATIONS if PHRASINGS[r].past == a_past)
        anchor_days = {period(f[3], q.granularity) for f in facts if f[:3] == (a_head, a_rel, a_tail)}
        assert len(anchor_days) == 1, q.text
        return {a for d, a in pairs if period(d, q.granularity) in anchor_days}
    span = extract_time(q.text, day_of(q.asked_on))
    if q.qtype == "before_after":
        after = f" after {span.text}" in q.text
        return {a for d, a in pairs if (d > span.end if after else d < span.start)}
    inside = sorted(x for x in pairs if span.start <= x[0] <= span.end)
    if q.qtype == "first_last":
        day = inside[-1][0] if f"{p.base} last" in q.text or "the last to" in q.text else inside[0][0]
        return {a for d, a in inside if d == day}
    assert q.qtype == "equal"
    return {a for _, a in inside}


@pytest.fixture(scope="module")
def tiny():
    facts = tiny_graph()
    return facts, generate(facts, WINDOW, seed=3, counts=SMALL)


def test_gold_answers_match_brute_force(tiny) -> None:
    facts, questions = tiny
    assert len(questions) > 60
    for q in questions:
        assert set(q.gold) == brute_force_gold(q, facts), q
        assert 1 <= len(q.gold) <= 10


def test_every_type_granularity_and_answer_type_present(tiny) -> None:
    _, questions = tiny
    assert {q.qtype for q in questions} == set(QUESTION_TYPES)
    assert {q.answer_type for q in questions} == {"entity", "time"}
    assert {q.granularity for q in questions} >= set(GRANULARITIES)
    assert {q.granularity for q in questions if q.answer_type == "time"} == set(GRANULARITIES)


def test_time_expressions_resolve_to_their_period(tiny) -> None:
    _, questions = tiny
    timed = [
        q
        for q in questions
        if q.qtype in ("equal", "before_after", "first_last") and q.answer_type == "entity"
    ]
    assert timed
    for q in timed:
        span = extract_time(q.text, day_of(q.asked_on))
        assert span is not None and period(span.start, q.granularity) == period(span.end, q.granularity), (
            q.text
        )
    forms = Counter(re.sub(r"\d+", "N", extract_time(q.text, 0).text) for q in timed)
    assert len(forms) >= 5  # several surface forms ("N May N", "May N, N", "Jun Nth, N", "N-N-N", ...)


def test_seeded_and_reproducible(tiny) -> None:
    facts, questions = tiny
    assert generate(facts, WINDOW, seed=3, counts=SMALL) == questions
    assert [q.text for q in generate(facts, WINDOW, seed=4, counts=SMALL)] != [q.text for q in questions]


def test_current_state_questions_have_a_superseded_value(tiny) -> None:
    facts, questions = tiny
    for q in (q for q in questions if q.qtype == "current"):
        older = {f[2] for f in facts if f[:2] == (q.head, q.relation) and WINDOW[0] <= f[3] <= WINDOW[1]}
        assert older - set(q.gold), q.text
        assert extract_time(q.text, day_of(q.asked_on)) is None
