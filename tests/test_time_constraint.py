"""``rotmem.memory.retrieval.time_constraint``: the time constraint of a question, per phrase kind."""

from __future__ import annotations

import math

import pytest

from rotmem.data import day_of
from rotmem.memory.retrieval.time_constraint import EVER, TimeConstraint, parse_time_constraint
from rotmem.memory.temporal.time_expressions import find_times

NOW = "2013-01-01"


def parse(question: str) -> TimeConstraint:
    return parse_time_constraint(question, NOW)


def test_during_a_month_and_a_year_keep_that_span_and_order_by_score() -> None:
    month = parse("Who visited Iran in May of 2012?")
    assert (month.relation, month.order) == ("during", None)
    assert month.window == (day_of("2012-05-01"), day_of("2012-05-31"))
    year = parse("Who did Iran criticise during 2012?")
    assert year.window == (day_of("2012-01-01"), day_of("2012-12-31")) and year.span.text == "2012"


def test_before_and_after_a_date_are_open_windows_with_the_nearest_fact_first() -> None:
    before = parse("Who visited Iran before Jun 25th, 2012?")
    assert before.relation == "before" and before.order == "latest"
    assert before.window == (-math.inf, day_of("2012-06-25") - 1)
    after = parse("Who visited Iran after May 2012?")
    assert after.relation == "after" and after.order == "earliest"
    assert after.window == (day_of("2012-05-31") + 1, math.inf)
    since = parse("Who has Iran met since 2012-03-04?")
    assert since.window == (day_of("2012-03-04"), math.inf) and since.order == "earliest"
    assert parse("Who visited Iran prior to 2012-03-04?").relation == "before"


def test_first_and_last_order_inside_the_span_and_last_of_a_date_is_not_an_order() -> None:
    first = parse("Who was the first to visit Iran in May 2012?")
    assert first.order == "earliest" and first.window == (day_of("2012-05-01"), day_of("2012-05-31"))
    assert parse("Who did Iran visit last in 2012?").order == "latest"
    assert parse("Whom did Iran meet most recently?").order == "latest"
    last_year = parse("Who visited Iran last year?")  # "last" belongs to the date
    assert last_year.order is None and last_year.window == (day_of("2012-01-01"), day_of("2012-12-31"))


def test_an_order_word_overrides_the_default_order_of_before() -> None:
    assert parse("Before 2012-06-01, who was the first to visit Iran?").order == "earliest"


def test_as_of_and_now_keep_everything_up_to_the_day_latest_first() -> None:
    as_of = parse("Where did Alice live as of May 2023?")
    assert as_of.relation == "as_of" and as_of.order == "latest"
    assert as_of.window == (-math.inf, day_of("2023-05-31"))
    for question in ("Who does Iran negotiate with these days?", "Nowadays, who does Iran meet?",
                     "Where does Alice live now?", "Who is Alice's current employer?"):  # fmt: skip
        now = parse(question)
        assert (now.relation, now.order, now.window) == ("current", "latest", (-math.inf, day_of(NOW)))


def test_in_which_month_seeks_a_month_and_filters_nothing() -> None:
    month = parse("In which month did Iran visit China?")
    assert month.seeks == "month" and month.window == EVER and not month
    assert parse("In what year did Iran visit China?").seeks == "year"
    first = parse("When did Iran first visit China?")
    assert first.seeks == "day" and first.order == "earliest" and first


def test_event_anchors_name_the_event_and_strip_it_from_the_question() -> None:
    after = parse("After Japan, who was the first to visit China?")
    assert (after.anchor, after.anchor_kind, after.order) == ("Japan", "after", "earliest")
    assert after.main == "who was the first to visit China?"
    before = parse("Before Japan, who was the last to visit China?")
    assert (before.anchor_kind, before.order) == ("before", "latest")
    same = parse("Who visited China in the same month as Japan praised Iran?")
    assert (same.anchor, same.anchor_kind, same.main) == (
        "Japan praised Iran",
        "same_month",
        "Who visited China?",
    )
    dated = parse("After May 2012, who visited China?")  # a date, not an event
    assert dated.anchor is None and dated.relation == "after"


@pytest.mark.parametrize("question", ["", "   ", "?!", "Where does Alice live?", "Feb 30, 2012 was odd",
                                      "Who played Cyberpunk 2077?", "this may take a while"])  # fmt: skip
def test_odd_inputs_give_no_constraint_or_a_harmless_one(question: str) -> None:
    found = parse(question)
    assert found.anchor is None and found.order is None
    if question == "Feb 30, 2012 was odd":  # no such day: the year is still read
        assert found.window == (day_of("2012-01-01"), day_of("2012-12-31"))
    else:
        assert found.window == EVER and not found


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="question must be a string"):
        parse_time_constraint(None, NOW)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bad date"):
        parse_time_constraint("Who visited Iran in 2012?", "soon")


def test_find_times_says_where_each_expression_starts() -> None:
    text = "Met on 3 May 2011, left in 2012"
    assert [(s.text, s.at, text[s.at : s.at + len(s.text)]) for s in find_times(text, 0)] == [
        ("3 May 2011", 7, "3 May 2011"), ("2012", 27, "2012"),
    ]  # fmt: skip
