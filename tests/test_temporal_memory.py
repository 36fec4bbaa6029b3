"""TemporalMemory: timed append-only facts, query modes, dual-stream re-ranking, online Phase 2."""

from __future__ import annotations

import math

import pytest
import torch

from rotmem.data import day_of
from rotmem.memory import HashingEncoder
from rotmem.memory.temporal.fit import FitConfig
from rotmem.memory.temporal.memory import ALPHA_G, TemporalMemory
from rotmem.memory.temporal.time_expressions import happened_day

SESSIONS = [
    ("s1", "2018-01-10", "Ana: I live in Lisbon and I work as a nurse.", [("Ana", "lives in", "Lisbon"),
                                                                          ("Ana", "works as", "nurse")]),
    ("s2", "2019-06-01", "Ana: I moved to Porto two months ago.", [("Ana", "lives in", "Porto")]),
    ("s3", "2021-03-01", "Ana: I moved to Madrid last year. I am a pilot now.",
     [("Ana", "lives in", "Madrid"), ("Ana", "works as", "pilot", "2020-05-01")]),
]  # fmt: skip


@pytest.fixture
def memory() -> TemporalMemory:
    mem = TemporalMemory(encoder=HashingEncoder(128))
    for session_id, date, text, facts in SESSIONS:
        mem.add_session(session_id, facts, date=date, text=text)
    return mem


class FixedModel(torch.nn.Module):
    """A stand-in RoMem whose tail scores depend on time: ``score_tails`` favours one entity per era."""

    def __init__(self, entities: list[str], relations: list[str], eras: list[tuple[float, str]]):
        super().__init__()
        self.entity = torch.nn.Parameter(torch.zeros(len(entities), 2))
        self.entities, self.relations = entities, relations
        self.eras = eras  # (first day, favoured entity), ascending

    def score_tails(self, h, r, tau):
        out = torch.zeros(h.shape[0], len(self.entities))
        for row, day in enumerate(tau.tolist()):
            favoured = [name for start, name in self.eras if start <= day][-1]
            out[row, self.entities.index(favoured)] = 10.0
        return out


def test_times_are_stored_append_only_with_inferred_t_happen(memory: TemporalMemory) -> None:
    facts = {(f.head, f.relation, f.tail): f for f in memory.facts()}
    assert len(facts) == 5
    assert facts[("Ana", "lives in", "Lisbon")].t_happen == day_of("2018-01-10")
    porto = facts[("Ana", "lives in", "Porto")]
    assert (porto.t_happen, porto.t_obs, porto.source) == (day_of("2019-04-01"), day_of("2019-06-01"), "s2")
    assert facts[("Ana", "lives in", "Madrid")].t_happen == day_of("2020-07-01")  # middle of "last year"
    assert facts[("Ana", "works as", "pilot")].t_happen == day_of("2020-05-01")  # given explicitly
    assert memory.latest_observation() == day_of("2021-03-01")
    ids = [f.record_id for f in memory.facts()]
    assert ids == sorted(ids) and {r.id for r in memory.store.records()} == set(ids)


def test_happened_day_reads_only_the_sentence_of_the_object() -> None:
    text = "I moved to Porto two months ago. Back in 2012 I was in Lyon."
    assert happened_day("Porto", text, day_of("2019-06-01")) == day_of("2019-04-01")
    assert happened_day("Lyon", text, day_of("2019-06-01")) == math.floor(day_of("2012-07-01") + 0.5)
    assert happened_day("Oslo", text, 100) == 100
    assert happened_day("Porto", None, 100) == 100


def test_unverified_facts_are_stored_and_timed_and_bad_facts_write_nothing(memory: TemporalMemory) -> None:
    result = memory.add_session(
        "s4", [("Ana", "lives in", "Oslo")], date="2021-05-01", text="Ana: nothing new."
    )
    assert result.verified == [False] and len(memory.facts()) == 6
    assert memory.facts()[-1].record_id == result.fact_ids[0]
    with pytest.raises(ValueError, match="fact 0"):
        memory.add_session("s5", [("Ana", "lives in")], date="2021-05-01", text="x")
    with pytest.raises(ValueError, match="date is required"):
        memory.add_sessions([dict(session_id="s6", facts=[], text="x")])
    with pytest.raises(ValueError, match="bad date"):
        memory.add_session("s7", [], date="May 2021", text="x")
    with pytest.raises(ValueError, match="fact 0: bad t_happen 'soon'"):
        memory.add_session("s8", [("Ana", "lives in", "Oslo", "soon")], date="2021-05-01", text="Oslo")
    with pytest.raises(ValueError, match="finite"):
        memory.add_session("s8", [("Ana", "lives in", "Oslo", float("nan"))], date="2021-05-01", text="Oslo")
    assert len(memory.facts()) == 6 and len(memory.store.sessions()) == 4


def test_times_roll_back_with_the_store_batch(memory: TemporalMemory) -> None:
    with pytest.raises(ValueError, match="already stored"):
        memory.add_sessions(
            [dict(session_id="s9", facts=[("Ana", "lives in", "Rome")], date="2022-01-01", text="Rome"),
             dict(session_id="s1", facts=[], date="2022-01-02", text="dup")]
        )  # fmt: skip
    assert len(memory.facts()) == 5 and len(memory.store) == 5


def test_persists_in_the_store_database(tmp_path) -> None:
    path = str(tmp_path / "mem.db")
    with TemporalMemory(path, HashingEncoder(64)) as mem:
        mem.add_session("s1", [("Bo", "lives in", "Oslo")], date="2020-01-01", text="Bo lives in Oslo")
    with TemporalMemory(path, HashingEncoder(64)) as mem:
        [fact] = mem.facts()
        assert (fact.tail, fact.t_happen) == ("Oslo", day_of("2020-01-01"))
        assert mem.retrieve("Where does Bo live?", now="2020-02-01")[0].t_happen == day_of("2020-01-01")


def test_without_a_model_the_ranking_is_the_semantic_one(memory: TemporalMemory) -> None:
    records = memory.retrieve("Where does Ana live?", k=3, now="2021-04-01")
    tem = memory.store.retrieve("Where does Ana live?", k=3)
    assert [r.record.id for r in records] == [r.id for r in tem]
    assert all(r.s_kge == 0.0 and r.tau is None and r.score == r.s_sem for r in records)


def _fixed(memory: TemporalMemory, eras: list[tuple[str, str]]) -> None:
    names = sorted({f.head for f in memory.facts()} | {f.tail for f in memory.facts()})
    relations = sorted({f.relation for f in memory.facts()})
    memory.use_model(FixedModel(names, relations, [(day_of(d), e) for d, e in eras]))


@pytest.mark.parametrize(
    "question, favoured, tau",
    [
        ("Where did Ana live in 2019?", "Porto", day_of("2019-07-02")),  # explicit: the span's middle
        ("Where does Ana live?", "Madrid", day_of("2021-04-01")),  # time-agnostic: now
    ],
)
def test_query_modes_choose_the_scoring_day(memory, question: str, favoured: str, tau: float) -> None:
    _fixed(memory, [("2000-01-01", "Lisbon"), ("2019-01-01", "Porto"), ("2020-01-01", "Madrid")])
    records = memory.retrieve(question, k=5, now="2021-04-01")
    residences = {r.record.object: r for r in records if r.record.relation == "lives in"}
    assert residences[favoured].s_kge == pytest.approx(1.0, abs=1e-3)
    assert residences[favoured].tau == pytest.approx(tau, abs=0.5)
    for name, r in residences.items():
        assert r.score == pytest.approx(r.s_sem * (1 + ALPHA_G * r.s_kge))
        if name != favoured:
            assert r.s_kge < 1e-3


def test_time_seeking_scores_each_candidate_at_its_own_time(memory) -> None:
    _fixed(memory, [("2000-01-01", "Lisbon"), ("2019-01-01", "Porto"), ("2020-01-01", "Madrid")])
    records = memory.retrieve("When did Ana move to Porto?", k=5, now="2021-04-01")
    for r in records:
        if r.record.relation == "lives in":
            assert r.tau == r.t_happen and r.s_kge == pytest.approx(1.0, abs=1e-3)


def test_temporal_stream_only_amplifies_and_reorders(memory) -> None:
    _fixed(memory, [("2000-01-01", "Lisbon")])
    memory.alpha_g = 100.0  # make the temporal stream decide between equally similar records
    top = memory.retrieve("Ana lives in", k=1, now="2021-04-01")
    assert top[0].record.object == "Lisbon"
    assert all(r.score >= r.s_sem for r in memory.retrieve("Ana lives in", k=5, now="2021-04-01"))


def test_retrieve_validates_input_and_needs_a_now_on_an_empty_memory() -> None:
    mem = TemporalMemory(encoder=HashingEncoder(32))
    assert mem.retrieve("Where?") == []
    with pytest.raises(ValueError, match="holds no facts"):
        mem.fit()
    mem.add_session("s1", [], date="2020-01-01", text="hello")
    with pytest.raises(ValueError, match="k must be"):
        mem.retrieve("Where?", k=0)
    with pytest.raises(ValueError, match="either an open store"):
        TemporalMemory(store=mem.store, encoder=HashingEncoder(32))


def test_speeds_from_a_mapping_and_out_of_range_values(memory) -> None:
    memory.speeds = {"lives in": 0.5}
    assert memory.relation_speeds(["lives in", "works as"]).tolist() == [0.5, 1.0]
    memory.speeds = {"lives in": 1.5}
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        memory.relation_speeds(["lives in"])


def test_online_fit_learns_the_stored_facts(memory) -> None:
    memory.speeds = {"works as": 0.0}  # a frozen, static relation
    stats = memory.fit(FitConfig(epochs=30, dim=16, lr=0.3))
    assert stats["facts"] == 5 and math.isfinite(stats["loss"])
    model = memory.model
    assert model.speed.source == "gate" and model.speed.table[model.relations.index("works as")] == 0.0
    # each stored residence is the most probable city at the day it happened
    for f in memory.facts():
        if f.relation != "lives in":
            continue
        [record] = [r for r in memory.store.records("Ana", "lives in") if r.id == f.record_id]
        scores = {
            city: memory.temporal_scores(
                [record.__class__(**{**record.__dict__, "object": city})], [f.t_happen]
            )[0]
            for city in ("Lisbon", "Porto", "Madrid")
        }
        assert max(scores, key=scores.get) == f.tail
    records = memory.retrieve("Where does Ana live?", k=5, now="2021-04-01")
    assert any(r.s_kge > 0 for r in records)


def test_speeds_from_a_gate_file_go_through_relation_speeds(memory, monkeypatch, tmp_path) -> None:
    calls = []

    def fake_relation_speeds(path, relations):
        calls.append((path, list(relations)))
        return torch.full((len(relations),), 0.25)

    monkeypatch.setattr("rotmem.gate.relation_speeds", fake_relation_speeds)
    memory.speeds = tmp_path / "gate.pt"
    assert memory.relation_speeds(["lives in", "works as"]).tolist() == [0.25, 0.25]
    assert calls == [(tmp_path / "gate.pt", ["lives in", "works as"])]
