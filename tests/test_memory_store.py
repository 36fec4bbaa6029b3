"""TEMStore: versioned facts, status per version group, weighted retrieval, side store, bad input."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from rotmem.memory import DuplicateSessionError, HashingEncoder, Record, RelationWeights, Session, TEMStore
from rotmem.memory.tem.store import fact_text
from rotmem.memory.temporal.tables import session_dates
from tests.postgres_server import new_namespace


@pytest.fixture(params=["sqlite", "postgres"])
def store(request):
    """The same suite on both backends: SQLite in memory and a namespace on a real Postgres server."""
    if request.param == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        with TEMStore(dsn, encoder=HashingEncoder(128), namespace=new_namespace()) as s:
            yield s
    else:
        with TEMStore(encoder=HashingEncoder(128)) as s:
            yield s


def statuses(store: TEMStore, subject: str, relation: str) -> list[tuple[str, bool]]:
    return [(r.object, r.historical) for r in store.records(subject, relation)]


def test_new_value_makes_the_old_one_historical_without_deleting_it(store):
    store.add_session("s1", [("Alice", "lives in", "Paris")], text="Alice: I live in Paris.")
    assert statuses(store, "Alice", "lives in") == [("Paris", False)]
    store.add_session("s2", [("Alice", "moved to", "Berlin")], text="Alice: we moved to Berlin")
    assert statuses(store, "Alice", "lives in") == [("Paris", True), ("Berlin", False)]
    store.add_session("s3", [("alice", "Lives_In", "Rome")], text="I live in Rome now")
    assert statuses(store, "ALICE", "residence") == [("Paris", True), ("Berlin", True), ("Rome", False)]
    assert len(store) == 3  # append-only


def test_status_is_recomputed_for_the_whole_group_and_follows_session_index(store):
    store.add_session("late", [("Bo", "works for", "Acme")], session_index=10)
    store.add_session("early", [("Bo", "works for", "Initech")], session_index=3)  # arrives later
    assert statuses(store, "Bo", "employer") == [("Initech", True), ("Acme", False)]
    store.add_session("next", [("Bo", "employer", "Globex")])  # default index: 11
    assert store.records("Bo", "employer")[-1].session_index == 11
    assert statuses(store, "Bo", "employer") == [("Initech", True), ("Acme", True), ("Globex", False)]


def test_several_values_in_one_session_are_all_current(store):
    store.add_session("s1", [("Cy", "likes", "tea")])
    store.add_session("s2", [("Cy", "likes", "coffee"), ("Cy", "loves", "cocoa")])
    assert statuses(store, "Cy", "likes") == [("tea", True), ("coffee", False), ("cocoa", False)]


def test_other_groups_are_untouched(store):
    store.add_session(
        "s1", [("Di", "lives in", "Oslo"), ("Di", "works as", "nurse"), ("Ed", "lives in", "Oslo")]
    )
    store.add_session("s2", [("Di", "lives in", "Bergen")])
    assert statuses(store, "Di", "occupation") == [("nurse", False)]
    assert statuses(store, "Ed", "lives in") == [("Oslo", False)]
    assert [r.object for r in store.records("Di")] == ["Oslo", "nurse", "Bergen"]


def test_unknown_relation_has_weight_one_and_its_own_group(store):
    store.add_session("s1", [("Fay", "plays", "chess"), ("Fay", "lives in", "Lima")])
    store.add_session("s2", [("Fay", "plays", "go")])
    assert statuses(store, "Fay", "plays") == [("chess", True), ("go", False)]
    assert statuses(store, "Fay", "lives in") == [("Lima", False)]
    record = store.records("Fay", "plays")[0]
    assert record.weight == 1.0 and record.relation_type is None


def test_retrieve_is_the_weighted_top_k_in_presentation_order():
    weights = RelationWeights({"likes": 0.5})
    store = TEMStore(encoder=HashingEncoder(64), relation_weights=weights)
    rng = np.random.default_rng(0)
    words = ["paris", "tea", "berlin", "nurse", "acme", "coffee", "dog", "car", "rome", "oslo"]
    relations = ["lives in", "likes", "works for", "owns", "works as", "plays"]
    sessions = [
        Session(
            f"s{i}",
            [("u", str(rng.choice(relations)), f"{rng.choice(words)} {rng.choice(words)}") for _ in range(4)],
        )
        for i in range(30)
    ]
    store.add_sessions(sessions)
    question = "where does the user live paris"
    got = store.retrieve(question, k=15)
    everything = store.records()
    vectors = store.encode([fact_text(r.subject, r.relation, r.object) for r in everything])
    scores = (
        vectors @ store.encode([question])[0] * np.array([weights.weight(r.relation) for r in everything])
    )
    best = np.sort(scores)[::-1][:15]  # hashed words tie often: compare the scores, not the ids
    np.testing.assert_allclose(sorted((r.score for r in got), reverse=True), best, atol=1e-5)
    # a present-tense question: each version group where it first appears, its current version first
    groups = [store.version_group(r) for r in got]
    assert all(g not in groups[:i] or groups[i - 1] == g for i, g in enumerate(groups))  # groups contiguous
    for group in set(groups):
        versions = [r for r in got if store.version_group(r) == group]
        assert [r.historical for r in versions] == sorted(r.historical for r in versions)
    past = store.retrieve(question.replace("does", "did"), k=15)
    assert [(r.session_index, r.id) for r in past] == sorted((r.session_index, r.id) for r in past)
    by_id = {r.id: s for r, s in zip(everything, scores, strict=True)}
    assert all(r.score == pytest.approx(by_id[r.id], abs=1e-5) for r in got)


def test_relation_weight_changes_the_ranking():
    facts = [("Gus", "likes", "green tea"), ("Gus", "plays", "green tea")]
    for weights, winner in (({"likes": 0.1}, "plays"), ({"plays": 0.1}, "likes")):
        store = TEMStore(encoder=HashingEncoder(64), relation_weights=weights)
        store.add_session("s1", facts)
        assert max(store.retrieve("green tea", k=2), key=lambda r: r.score).relation == winner


def test_empty_store_retrieves_nothing(store):
    assert store.retrieve("where does anyone live?") == []
    assert store.retrieve_turns("anything") == []
    assert store.render([]) == "" and len(store) == 0


def test_render_labels_historical_versions(store):
    store.add_session("s1", [("Alice", "lives in", "Paris")])
    store.add_session("s2", [("Alice", "moved to", "Berlin")], summaries="Alice moved house")
    text = store.render(store.retrieve("Alice live", k=5))
    assert text == "s1: Alice moved to Berlin\ns0: Alice lives in Paris [historical]"
    text = store.render(store.retrieve("Where did Alice live", k=5))
    assert text == "s0: Alice lives in Paris [historical]\ns1: Alice moved to Berlin"
    assert (
        store.render(store.retrieve_turns("moved house", k=1), show_session=False)
        == "summary: Alice moved house"
    )


def test_facts_are_checked_against_the_session_text(store):
    text = "Hana: I just moved to New  York! I drink espresso. My Parisian friend visited."
    facts = [("Hana", "moved to", "new york"), ("Hana", "drinks", "espresso"), ("Hana", "lives in", "Paris")]
    result = store.add_session("s1", facts, text=text)
    assert result.verified == [True, True, False]  # "Paris" is not inside "Parisian"
    kept = store.records("Hana")
    assert [(r.object, r.verified) for r in kept] == [
        ("new york", True),
        ("espresso", True),
        ("Paris", False),
    ]
    assert text[slice(*kept[0].span)] == "New  York" and kept[2].span is None
    assert result.record_ids == result.fact_ids == [r.id for r in kept]


def test_without_text_or_with_verify_off_facts_are_kept_unverified():
    store = TEMStore(encoder=HashingEncoder(32), verify=False)
    assert store.add_session("s1", [("Ian", "lives in", "Cairo")], text="nothing here").verified == [False]
    assert store.add_session("s2", [("Ian", "lives in", "Lagos")]).record_ids == [1]
    assert store.records("Ian")[1].span is None


def test_turns_and_summaries_live_in_a_side_store(store):
    text = "Jo: I adopted a puppy named Rex.\n\nSam: Lovely!\n"
    result = store.add_session("s1", [("Jo", "owns", "puppy")], text=text, summaries=["Jo adopted a puppy"])
    assert len(result.passage_ids) == 3
    assert [(p.kind, p.position) for p in store.passages()] == [("turn", 0), ("turn", 1), ("summary", 2)]
    assert (
        store.retrieve_turns("puppy named Rex", k=1, kind="turn")[0].text
        == "Jo: I adopted a puppy named Rex."
    )
    assert [p.kind for p in store.retrieve_turns("adopted puppy", k=1, kind="summary")] == ["summary"]
    assert len(store.retrieve_turns("puppy", k=10)) == 3
    store.add_session("s2", [], text="Jo: hi", turns=())
    assert len(store.passages("turn")) == 2
    with pytest.raises(ValueError, match="kind must be one of"):
        store.retrieve_turns("puppy", kind="event")


@pytest.mark.parametrize(
    "bad_fact",
    [("a", "b"), ("a", "b", ""), ("a", " ", "c"), ("a", "b", 3), "a|b|c", None, ("a", "b", "c", "d")],
)
def test_malformed_facts_raise_and_write_nothing(store, bad_fact):
    store.add_session("ok", [("Kim", "lives in", "Seoul")])
    with pytest.raises(ValueError, match="session 'bad', fact 1"):
        store.add_session("bad", [("Kim", "likes", "tea"), bad_fact])
    assert [s[0] for s in store.sessions()] == ["ok"] and len(store) == 1
    store.add_session("bad", [("Kim", "likes", "tea")])  # the id is still free
    assert len(store) == 2


def test_duplicate_session_id_raises_and_loses_nothing(store):
    store.add_session("s1", [("Lu", "lives in", "Kyiv")], text="Lu lives in Kyiv")
    before = store.records()
    with pytest.raises(DuplicateSessionError, match="already stored: \\['s1'\\]"):
        store.add_session("s1", [("Lu", "lives in", "Riga")])
    with pytest.raises(DuplicateSessionError, match="repeat within the batch"):
        store.add_sessions([Session("s2"), Session("s2")])
    assert store.records() == before and len(store.sessions()) == 1
    assert store.retrieve("Lu lives", k=5)[0].object == "Kyiv"


def test_a_batch_is_all_or_nothing(store):
    with pytest.raises(ValueError, match="session 's3'"):
        store.add_sessions([Session("s1", [("M", "lives in", "A")]), {"session_id": "s3", "facts": [("M",)]}])
    assert store.sessions() == [] and len(store) == 0


def test_add_sessions_batches_and_returns_one_result_per_session(store):
    sessions = [
        Session(f"s{i}", [("Ned", "lives in", f"town{i}")], text=f"I live in town{i}") for i in range(5)
    ]
    results = store.add_sessions(sessions + [{"session_id": "x", "facts": [("Ned", "works as", "cook")]}])
    assert [r.session_index for r in results] == [0, 1, 2, 3, 4, 5]
    assert statuses(store, "Ned", "lives in")[-1] == ("town4", False)
    assert sum(h for _, h in statuses(store, "Ned", "lives in")) == 4


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"session_id": ""}, "session_id must be a non-empty string"),
        ({"session_id": 5}, "session_id must be a non-empty string"),
        ({"session_id": "a", "session_index": "3"}, "session_index must be an int"),
        ({"session_id": "a", "text": b"bytes"}, "text must be a string"),
        ({"session_id": "a", "turns": ["", "x"]}, "every turn must be a non-empty string"),
        ({"session_id": "a", "facts": "s|r|o"}, "facts must be a sequence"),
    ],
)
def test_bad_sessions_raise_clear_errors(store, kwargs, message):
    with pytest.raises(ValueError, match=message):
        store.add_sessions([kwargs])
    with pytest.raises(ValueError, match="question must be a non-empty string"):
        store.retrieve("  ")


def test_records_need_a_subject_for_a_relation(store):
    with pytest.raises(ValueError, match="needs a subject"):
        store.records(relation="lives in")


def test_records_are_frozen_dataclasses(store):
    store.add_session("s1", [("Oz", "lives in", "Perth")])
    record = store.retrieve("Perth")[0]
    assert isinstance(record, Record) and record.session_id == "s1" and record.created_at > 0
    with pytest.raises(AttributeError):
        record.historical = True


def test_without_faiss_the_torch_index_gives_the_same_answers(monkeypatch):
    sessions = [
        Session(f"s{i}", [("P", "lives in", f"city {i}"), ("P", "likes", f"dish {i % 3}")]) for i in range(20)
    ]
    with_default = TEMStore(encoder=HashingEncoder(64))
    with_default.add_sessions(sessions)
    monkeypatch.setitem(sys.modules, "faiss", None)  # ``import faiss`` now fails, as on the GPU machine
    without_faiss = TEMStore(encoder=HashingEncoder(64))
    without_faiss.add_sessions(sessions)
    assert type(without_faiss.index()).__name__ == "TorchIndex"
    for question in ("city 7", "dish 2", "where does P live"):  # hashed words tie: compare scores
        want = sorted(round(r.score, 5) for r in with_default.retrieve(question, k=5))
        assert sorted(round(r.score, 5) for r in without_faiss.retrieve(question, k=5)) == want


def test_before_commit_writes_atomically_with_the_batch(store):
    def extra(writer, written):
        for session, result in written:
            writer.add("session_dates", session_id=session.session_id, t_obs=100.0 + result.fact_ids[0])

    store.add_sessions([Session("s1", [("Q", "lives in", "Quito")])], before_commit=extra)
    assert session_dates(store.db) == {"s1": 100.0}

    def failing(writer, written):
        extra(writer, written)
        raise RuntimeError("layer above failed")

    with pytest.raises(RuntimeError, match="layer above failed"):
        store.add_sessions([Session("s2", [("Q", "lives in", "Lima")])], before_commit=failing)
    assert [s[0] for s in store.sessions()] == ["s1"] and len(store) == 1
    assert session_dates(store.db) == {"s1": 100.0}
    assert [r.historical for r in store.records("Q", "lives in")] == [False]


def test_a_failed_first_write_leaves_no_width_and_a_store_of_another_width_can_follow(store):
    """The width and encoder name are kept once read; a first write that rolls back keeps neither."""

    def failing(writer, written):
        raise RuntimeError("layer above failed")

    assert store.dim is None
    with pytest.raises(RuntimeError, match="layer above failed"):
        store.add_sessions([Session("s1", [("Q", "lives in", "Quito")])], before_commit=failing)
    assert store.dim is None and store.db.get_meta("dim") is None
    store.add_session("s2", [("Q", "lives in", "Lima")])
    assert store.dim == 128 and store.db.get_meta("encoder") == "hashing:128"
    store.add_session("s3", [("Q", "lives in", "Lund")])  # the kept width: no meta read
    assert [r.object for r in store.records("Q", "lives in")] == ["Lima", "Lund"]


def test_fact_ids_give_the_record_of_every_input_fact_none_is_dropped(store):
    facts = [
        ("Ro", "lives in", "Oslo"),
        ("Ro", "likes", "tea"),
        ("Ro", "works as", "cook"),
        (" Ro ", "likes", "jazz "),
    ]
    [result] = store.add_sessions([Session("s1", facts, text="Ro lives in Oslo and works as a cook. jazz")])
    assert result.fact_ids == result.record_ids == [0, 1, 2, 3]
    assert result.verified == [True, False, True, True]
    stored = {r.id: (r.object, r.verified) for r in store.records()}
    assert [stored[i] for i in result.fact_ids] == [
        ("Oslo", True),
        ("tea", False),
        ("cook", True),
        ("jazz", True),
    ]


def test_group_keys_are_kept_up_to_a_bound(monkeypatch):
    """``group_key`` keeps what it computed (the same keys), started afresh past ``GROUP_KEYS_KEPT``."""
    import rotmem.memory.tem.store as store_module

    monkeypatch.setattr(store_module, "GROUP_KEYS_KEPT", 2)
    with TEMStore(encoder=HashingEncoder(16)) as store:
        pairs = [
            ("The  User", "lives in"),
            ("the user", "Moved_To"),
            ("Ann", "likes"),
            ("The  User", "lives in"),
        ]
        keys = [store.group_key(subject, relation) for subject, relation in pairs]
        assert keys[0] == keys[1] == keys[3] == "the user\x1fresidence" and keys[2] == "ann\x1flikes"
        assert len(store._group_keys) <= 2
