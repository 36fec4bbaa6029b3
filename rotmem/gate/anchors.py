"""Paraphrase anchors: one speed for the many words of one relation.

The Semantic Speed Gate's MLP reads a sentence embedding, so two phrasings of one relation ("Make a
visit", "travel to") can land on speeds far apart: it was fitted on one text per relation. Anchors
fix that by kernel regression over known phrasings: every relation string and its training
paraphrases (``paraphrases/*.tsv``, one file per relation family) is an anchor carrying its
relation's gate speed, and any text gets

    alpha(text) = sum_j softmax_j(cos(phi(text), phi(anchor_j)) / T) * alpha_gate(relation_j)

with ``phi`` the gate's own embedding (its template and encoder); an anchor text itself keeps its
speed. A paraphrase close to its relation's anchors takes that relation's speed; a relation string
keeps the gate's own; an
unknown relation gets the speeds of its nearest known phrasings. ``T`` is chosen by leave-one-out
on the training paraphrases only (``choose_temperature``); the held-out phrasings of the files (the
temporal-QA question templates' phrasings among them) are never anchors.

File format: ``relation<TAB>phrasing<TAB>split`` per line (``split`` is ``train`` or ``heldout``),
``#`` comments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from rotmem.gate.speed_gate import SemanticSpeedGate

PARAPHRASE_DIR = Path(__file__).resolve().parent / "paraphrases"
SPLITS = ("train", "heldout")
TEMPERATURES = (0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3)


@dataclass(frozen=True)
class Paraphrase:
    """One phrasing of a relation, from the family file ``family`` (its stem)."""

    relation: str
    text: str
    split: str
    family: str


def read_paraphrases(paths: Iterable[str | Path] | None = None) -> list[Paraphrase]:
    """Every line of the paraphrase files (default: the packaged ``paraphrases/*.tsv``)."""
    out = []
    for path in sorted(Path(p) for p in paths) if paths is not None else sorted(PARAPHRASE_DIR.glob("*.tsv")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 3 or fields[2] not in SPLITS or not fields[0].strip() or not fields[1].strip():
                raise ValueError(
                    f"{path}:{number}: expected relation<TAB>phrasing<TAB>train|heldout, got {line!r}"
                )
            out.append(Paraphrase(fields[0], fields[1], fields[2], path.stem))
    return out


class AnchoredSpeeds:
    """Speeds of any text from a gate and anchor phrasings (module docs).

    Args:
        gate: a trained ``SemanticSpeedGate``.
        anchors: phrasing -> the relation whose speed it carries (each relation string maps to
            itself; ``anchors_for`` builds this).
        temperature: ``T`` of the softmax over cosines.
    """

    def __init__(self, gate: SemanticSpeedGate, anchors: Mapping[str, str], temperature: float = 0.03):
        if not anchors:
            raise ValueError("AnchoredSpeeds needs at least one anchor phrasing")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature!r}")
        self.gate, self.temperature = gate, float(temperature)
        self.texts = list(anchors)
        relations = sorted(set(anchors.values()))
        with torch.no_grad():
            relation_alpha = dict(zip(relations, gate.alpha(relations).tolist(), strict=True))
        self.alpha_of_anchor = torch.tensor([relation_alpha[anchors[t]] for t in self.texts])
        self.embeddings = self._unit(self.texts)

    def _unit(self, texts: Sequence[str]) -> torch.Tensor:
        with torch.no_grad():
            return torch.nn.functional.normalize(self.gate.embed(list(texts)).float().cpu(), dim=1)

    def weights(self, texts: Sequence[str], exclude: Sequence[str] = ()) -> torch.Tensor:
        """``[len(texts), anchors]`` softmax weights; ``exclude``: anchor texts left out (leave-one-out)."""
        cos = self._unit(texts) @ self.embeddings.T
        if exclude:
            out = torch.tensor([t in set(exclude) for t in self.texts])
            cos = cos.masked_fill(out, float("-inf"))
        return torch.softmax(cos / self.temperature, dim=1)

    def alpha(self, texts: Sequence[str], exclude: Sequence[str] = ()) -> torch.Tensor:
        """Speeds ``[len(texts)]`` in (0, 1); a text that is itself an anchor (and not excluded) keeps
        its anchor's speed exactly, so every relation string keeps the gate's own speed."""
        if isinstance(texts, str):
            raise TypeError("alpha expects a list of strings, got a single string")
        out = self.weights(texts, exclude) @ self.alpha_of_anchor
        position = {t: i for i, t in enumerate(self.texts)}
        for i, text in enumerate(texts):
            if text in position and text not in exclude:
                out[i] = self.alpha_of_anchor[position[text]]
        return out


def anchors_for(relations: Sequence[str], paraphrases: Sequence[Paraphrase]) -> dict[str, str]:
    """Anchor phrasings: every relation string, and the ``train`` paraphrases of known relations."""
    known = set(relations)
    unknown = sorted({p.relation for p in paraphrases} - known)
    if unknown:
        raise ValueError(f"paraphrase files name relations not in the graph: {unknown}")
    anchors = {r: r for r in relations}
    anchors.update({p.text: p.relation for p in paraphrases if p.split == "train" and p.text not in anchors})
    return anchors


def leave_one_out_gaps(speeds: AnchoredSpeeds, paraphrases: Sequence[Paraphrase]) -> torch.Tensor:
    """``|alpha(p) - alpha(relation)|`` of each training paraphrase with itself left out of the anchors."""
    train = [p for p in paraphrases if p.split == "train"]
    gaps = []
    for p in train:
        own = speeds.alpha([p.relation])[0]
        gaps.append(float((speeds.alpha([p.text], exclude=[p.text])[0] - own).abs()))
    return torch.tensor(gaps)


def choose_temperature(
    gate: SemanticSpeedGate,
    anchors: Mapping[str, str],
    paraphrases: Sequence[Paraphrase],
    temperatures: Sequence[float] = TEMPERATURES,
) -> tuple[float, dict[float, float]]:
    """The ``T`` with the smallest leave-one-out max gap on the training paraphrases (ties: the median),
    and each candidate's max gap."""
    scores = {}
    for t in temperatures:
        gaps = leave_one_out_gaps(AnchoredSpeeds(gate, anchors, t), paraphrases)
        scores[t] = (float(gaps.max()), float(gaps.median()))
    best = min(scores, key=lambda t: scores[t])
    return best, {t: s[0] for t, s in scores.items()}
