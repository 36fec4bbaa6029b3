"""``rotmem.memory.retrieval.slots``: which slot a question asks about."""

from __future__ import annotations

from rotmem.memory.records import Record
from rotmem.memory.retrieval.slots import Naming, asked_slot, relation_overlap


def record(subject: str, relation: str, obj: str, i: int = 0) -> Record:
    return Record(subject, relation, obj, "s", i, False, id=i)


def test_a_name_only_inside_a_longer_name_is_not_named() -> None:
    naming = Naming("In which month did Foreign Affairs (France) consult Israel?",
                    ["France", "Foreign Affairs (France)", "Israel", "Iran"])  # fmt: skip
    assert set(naming.named) == {"Foreign Affairs (France)", "Israel"}
    both = Naming(
        "Who did France and Foreign Affairs (France) visit?", ["France", "Foreign Affairs (France)"]
    )
    assert set(both.named) == {"France", "Foreign Affairs (France)"}  # France also stands alone


def test_roles_subject_after_an_auxiliary_or_by_else_object() -> None:
    naming = Naming("When did Laos first host Japan?", ["Laos", "Japan"])
    assert (naming.role("Laos"), naming.role("Japan"), naming.role("Peru")) == ("subject", "object", None)
    assert Naming("Who was visited by Laos?", ["Laos"]).role("Laos") == "subject"
    assert Naming("Who visited Laos?", ["Laos"]).role("Laos") == "object"


def test_relation_words_match_by_prefix_outside_the_named_entities() -> None:
    naming = Naming("Who denied responsibility toward Human Rights Watch?", ["Human Rights Watch"])
    assert relation_overlap("Deny responsibility", naming) == 1.0
    assert relation_overlap("Accuse of human rights abuses", naming) == 0.0  # the words are the name's
    assert relation_overlap("Make a visit", Naming("Who visited Laos?", ["Laos"])) == 1.0  # "make" is plain
    assert relation_overlap("Host a visit", Naming("Who visited Laos?", ["Laos"])) == 0.5


def test_the_asked_slot_takes_the_closest_relation_and_the_question_roles() -> None:
    records = [record("Laos", "Host a visit", "Japan", 0), record("Peru", "Make a visit", "Laos", 1)]
    naming = Naming("Who visited Laos first?", ["Laos", "Japan", "Peru"])
    assert asked_slot(records, naming) == ("Make a visit", None, "Laos")
    closer = {"Host a visit": 0.9, "Make a visit": 0.1}.__getitem__  # a similarity that says otherwise
    assert asked_slot(records, naming, closer) == ("Host a visit", None, "Laos")
    assert asked_slot([], naming) is None
    unnamed = [record("Bo", "Praise", "Cy")]
    assert asked_slot(unnamed, Naming("Who praised whom?", ["Bo", "Cy"])) == ("Praise", None, None)
