"""Paraphrase anchors for the Semantic Speed Gate: the mechanism on fixed embeddings, and the files."""

from __future__ import annotations

import pytest
import torch

from benchmarks.temporal_qa.phrasings import PHRASINGS
from rotmem.gate import SemanticSpeedGate
from rotmem.gate.anchors import (
    AnchoredSpeeds,
    Paraphrase,
    anchors_for,
    choose_temperature,
    leave_one_out_gaps,
    read_paraphrases,
)

# Two relations far apart in embedding space, each with paraphrases near it.
VECTORS = {
    "Make a visit": [1.0, 0.0, 0.0],
    "travel to": [0.95, 0.3, 0.0],
    "pay a visit to": [0.9, 0.0, 0.4],
    "Threaten": [0.0, 1.0, 0.0],
    "menace": [0.3, 0.95, 0.0],
    "issue threats against": [0.0, 0.9, 0.4],
}


class FixedEncoder:
    """Looks up ``They <text>.`` sentences in ``VECTORS`` (the gate's template is stripped)."""

    name = "fixed"

    def encode(self, sentences: list[str]) -> torch.Tensor:
        return torch.tensor([VECTORS[s[len("They ") : -1]] for s in sentences])


@pytest.fixture
def gate() -> SemanticSpeedGate:
    torch.manual_seed(0)
    gate = SemanticSpeedGate(3, encoder="fixed")
    gate.use_encoder(FixedEncoder())
    with torch.no_grad():  # an MLP whose speed differs a lot between nearby texts
        gate.mlp[0].weight.copy_(torch.tensor([[8.0, -8.0, -20.0]] + [[0.0, 0.0, 0.0]] * 31))
        gate.mlp[0].bias.zero_()
        gate.mlp[2].weight.zero_()
        gate.mlp[2].weight[0, 0] = 1.0
        gate.mlp[2].bias.fill_(-4.0)
    return gate


PARAPHRASES = [
    Paraphrase("Make a visit", "travel to", "train", "diplomacy"),
    Paraphrase("Make a visit", "pay a visit to", "heldout", "diplomacy"),
    Paraphrase("Threaten", "issue threats against", "train", "confrontation"),
    Paraphrase("Threaten", "menace", "heldout", "confrontation"),
]


def test_anchors_give_paraphrases_their_relations_speed(gate) -> None:
    with torch.no_grad():
        plain = gate.alpha(["Make a visit", "pay a visit to", "Threaten", "menace"]).tolist()
    assert abs(plain[1] - plain[0]) > 0.5  # the plain MLP: one relation, very different speeds
    anchors = anchors_for(["Make a visit", "Threaten"], PARAPHRASES)
    assert anchors == {"Make a visit": "Make a visit", "Threaten": "Threaten", "travel to": "Make a visit",
                       "issue threats against": "Threaten"}  # fmt: skip
    speeds = AnchoredSpeeds(gate, anchors, temperature=0.02)
    visit, paraphrase, threaten, menace = speeds.alpha(
        ["Make a visit", "pay a visit to", "Threaten", "menace"]
    )
    assert abs(float(paraphrase - visit)) < 1e-3 and abs(float(menace - threaten)) < 1e-3
    assert float(visit) == pytest.approx(plain[0], abs=1e-6)  # a relation string keeps its own speed
    weights = speeds.weights(["travel to"], exclude=["travel to"])
    assert float(weights[0, speeds.texts.index("travel to")]) == 0.0


def test_leave_one_out_and_temperature_choice(gate) -> None:
    anchors = anchors_for(["Make a visit", "Threaten"], PARAPHRASES)
    gaps = leave_one_out_gaps(AnchoredSpeeds(gate, anchors, 0.02), PARAPHRASES)
    assert gaps.shape == (2,) and float(gaps.max()) < 1e-3
    best, scores = choose_temperature(gate, anchors, PARAPHRASES, temperatures=(0.02, 5.0))
    assert best == 0.02 and scores[5.0] > scores[0.02]  # a flat softmax mixes the two relations


def test_unknown_relation_in_a_file_is_named(gate) -> None:
    with pytest.raises(ValueError, match="Fly"):
        anchors_for(["Make a visit"], [Paraphrase("Fly", "take off", "train", "x")])


def test_bad_line_names_file_and_line(tmp_path) -> None:
    path = tmp_path / "family.tsv"
    path.write_text("# comment\nMake a visit\tvisit\ttrain\nMake a visit visit\n")
    with pytest.raises(ValueError, match="family.tsv:3"):
        read_paraphrases([path])


def test_packaged_files_hold_every_template_phrasing_held_out() -> None:
    paraphrases = read_paraphrases()
    held = {(p.relation, p.text) for p in paraphrases if p.split == "heldout"}
    assert {(r, p.base) for r, p in PHRASINGS.items()} <= held
    texts = [p.text for p in paraphrases]
    assert len(texts) == len(set(texts))  # one phrasing, one relation, one split
    assert {p.relation for p in paraphrases} <= set(PHRASINGS)
    assert len({p.family for p in paraphrases}) >= 4
