"""The state-update benchmark: generator invariants, reader rules, metrics, and a tiny end-to-end run."""

from __future__ import annotations

import csv
import datetime as dt
from collections import Counter

import pytest

from benchmarks.datasets.state_update import CITIES, DRINKS, OCCUPATION, OCCUPATIONS, RESIDENCE, generate
from benchmarks.state_update import CONFIGS, Item, LabelAwareReader, gold_labelled, gold_present, main
from rotmem.data import day_of
from rotmem.memory.tem.verification import object_span


@pytest.fixture(scope="module")
def bench():
    return generate()


def test_generator_has_the_published_shape(bench) -> None:
    assert len(bench.personas) == len(set(bench.personas)) == 60
    assert len(bench.sessions) == 600 and len({s.session_id for s in bench.sessions}) == 600
    assert Counter(q.qtype for q in bench.questions) == {"current": 180, "historical": 180, "pre_move": 60}
    assert [s.index for s in bench.sessions] == list(range(600))
    assert [s.date for s in bench.sessions] == sorted(s.date for s in bench.sessions)
    assert bench.now > bench.sessions[-1].date


def test_no_slot_value_contains_another_of_its_kind() -> None:
    """Substring scoring (gold present, reader hit) would be ambiguous if one value held another."""
    for values in (CITIES, OCCUPATIONS, DRINKS):
        lowered = [v.lower() for v in values]
        assert not [(a, b) for a in lowered for b in lowered if a != b and a in b]


def test_generator_is_seeded(bench) -> None:
    again = generate()
    assert [s.text for s in again.sessions] == [s.text for s in bench.sessions]
    assert [q.gold for q in again.questions] == [q.gold for q in bench.questions]
    assert [s.text for s in generate(seed=1).sessions] != [s.text for s in bench.sessions]


def test_every_fact_is_in_its_session_text_and_happens_by_the_session_day(bench) -> None:
    for session in bench.sessions:
        assert session.facts
        for fact in session.facts:
            assert object_span(fact.object, session.text) is not None, (session.session_id, fact)
            assert fact.subject == session.persona and fact.day <= session.day


def test_gold_answers_follow_the_timeline(bench) -> None:
    timeline: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for session in bench.sessions:
        for f in session.facts:
            history = timeline.setdefault((f.subject, f.relation), [])
            if not history or history[-1][1] != f.object:
                history.append((f.day, f.object))
    for q in bench.questions:
        values = [v for _, v in timeline[(q.persona, q.relation)]]
        assert tuple(values) == q.slot_values and len(set(values)) == len(values)
        assert q.gold_historical == (q.gold != values[-1])
        if q.subtype == "pre_move_residence":
            assert q.relation == RESIDENCE and len(values) >= 3 and q.gold == values[-2]
        if q.subtype == "first_residence":
            assert q.gold == values[0]
        if q.subtype == "occupation_at_date":
            month = dt.datetime.strptime(q.text.rsplit(" in ", 1)[1].rstrip("?"), "%B %Y").date()
            first = day_of(month.isoformat())
            held = [v for day, v in timeline[(q.persona, OCCUPATION)] if day <= first]
            assert q.gold == held[-1] and q.gold_historical


def _reader() -> LabelAwareReader:
    return LabelAwareReader(
        ["Ana Silva"], {RESIDENCE: ["Lisbon", "Porto", "Madrid"], OCCUPATION: ["nurse", "pilot"]}
    )


TEM_EVIDENCE = (
    "Ana Silva lives in Lisbon [historical]\nAna Silva lives in Porto [historical]\n"
    "Ana Silva works as nurse [historical]\nAna Silva lives in Madrid\nAna Silva works as pilot"
)


@pytest.mark.parametrize(
    "question, answer",
    [
        ("Where does Ana Silva live now?", "Madrid"),
        ("Where did Ana Silva live just before moving to Madrid?", "Porto"),
        ("Where did Ana Silva live when we first talked?", "Lisbon"),
        ("What does Ana Silva do for work these days?", "pilot"),
        ("What was Ana Silva's job in March 2019?", "nurse"),  # no dates: newest historical one
    ],
)
def test_reader_uses_labels_and_order(question: str, answer: str) -> None:
    assert _reader()(question, TEM_EVIDENCE) == answer


def test_reader_uses_dates_and_relative_expressions_in_turns() -> None:
    evidence = (
        "[session 2019-06-01]\nAna Silva: I moved from Lisbon to Porto two months ago.\n"
        "[session 2020-02-01]\nAna Silva: I started a new job as a pilot a month ago.\n"
        "Ana Silva: I finally moved to Madrid."
    )
    reader = _reader()
    assert reader("Where does Ana Silva live now?", evidence) == "Madrid"
    assert reader("Where did Ana Silva live in March 2019?", evidence) == "Lisbon"
    assert reader("Where did Ana Silva live in May 2019?", evidence) == "Porto"
    assert reader("Where does Ana Silva live now?", "") == "unknown"


def test_gold_metrics_on_hand_made_evidence(bench) -> None:
    q = next(q for q in bench.questions if q.subtype == "pre_move_residence")
    old, current = q.gold, q.slot_values[-1]
    labelled = [Item(q.persona, q.relation, old, True), Item(q.persona, q.relation, current, False)]
    assert gold_present(q, labelled) and gold_labelled(q, labelled)
    unlabelled = [Item(q.persona, q.relation, old, None), Item(q.persona, q.relation, current, None)]
    assert gold_present(q, unlabelled) and not gold_labelled(q, unlabelled)
    other_persona = [Item("Someone Else", q.relation, old, True)]
    assert not gold_present(q, other_persona)
    turn = [Item(q.persona, None, f"I moved from {old} to {current}.", None)]
    assert gold_present(q, turn) and not gold_labelled(q, turn)
    now = next(x for x in bench.questions if x.persona == q.persona and x.subtype == "current_residence")
    assert gold_labelled(now, [Item(q.persona, q.relation, current, None)])  # alone: unambiguous
    assert not gold_labelled(now, unlabelled)  # a stale version reads as current too


def test_end_to_end_tiny_run(tmp_path) -> None:
    out = tmp_path / "results"
    args = ["--personas", "3", "--encoder", "hashing", "--fit-epochs", "2", "--out", str(out), "--name", "t"]
    assert main(args) == 0
    with open(out / "t.csv") as handle:
        rows = {(r["config"], r["question_type"]): r for r in csv.DictReader(handle)}
    assert set(rows) == {(c, t) for c in CONFIGS for t in ("current", "historical", "pre_move", "all")}
    assert float(rows["overwrite", "pre_move"]["gold_present_pct"]) == 0.0  # history was overwritten
    for config in ("tem", "tem-dated", "romem"):  # labels are always right where the gold is present
        assert rows[config, "pre_move"]["gold_labelled_pct"] == rows[config, "pre_move"]["gold_present_pct"]
    for config in ("naive-rag", "session-rag", "unmarked"):  # no labels: a historical gold is never marked
        assert float(rows[config, "historical"]["gold_labelled_pct"]) == 0.0
    assert all(float(r["evidence_tokens"]) > 0 for r in rows.values())
    text = (out / "t.md").read_text()
    assert "label-aware rule reader (no LLM)" in text and "python -m benchmarks.state_update" in text
