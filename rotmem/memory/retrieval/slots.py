"""Which slot ``(relation, subject, object)`` a question asks about, read from its candidate facts.

A fact *names* an entity of the question when its subject or object occurs in the question as
whole words (case-insensitive), and not only inside a longer name that also occurs there
("France" inside "Foreign Affairs (France)" is not named by itself). A fact's slot is
``(relation, subject if named, object if named)``.

The question's role for a named entity: the *subject* when the name follows an auxiliary or "by"
("When did **X** first visit Y?", "Who does **X** negotiate with?", "Who was visited by **X**?"),
else the *object* ("Who visited **X**?"). The question names a relation when a word of it and a
word of the question outside the named entities (not a plain word such as "make") share a prefix
of all but the last letter of the shorter, at least ``STEM`` letters ("deny" ~ "denied", "Make a
visit" ~ "visited").

``asked_slot``: among the slots of the candidates that name an entity, the first by (relation
named, roles as in the question, entities named, reciprocal-rank vote of its candidates).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from rotmem.memory.records import Record

Slot = tuple[str, str | None, str | None]  # (relation, subject or None, object or None)
STEM = 3  # the shortest shared prefix that makes a relation word match a question word
_PLAIN = {"make", "made", "the", "and", "for", "with", "into", "from", "such", "other", "not"}
_SUBJECT_BEFORE = re.compile(
    r"\b(?:did|does|do|has|have|had|is|was|were|are|will|would|can|could|by)\s+$", re.IGNORECASE
)


def _matches(name: str, text: str) -> list[tuple[int, int]]:
    if not name:
        return []
    return [m.span() for m in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE)]


def _shares_stem(a: str, b: str) -> bool:
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return common >= max(STEM, min(len(a), len(b)) - 1)


def _inside(span: tuple[int, int], outer: tuple[int, int]) -> bool:
    return outer[0] <= span[0] and span[1] <= outer[1]


class Naming:
    """The entities a question names, their roles, and the slots of facts (module docs)."""

    def __init__(self, text: str, names: Iterable[str] = ()):
        self.text = text
        self._spans: dict[str, list[tuple[int, int]]] = {}
        self.add(names)

    def add(self, names: Iterable[str]) -> None:
        """Consider ``names`` too (candidates' subjects and objects)."""
        for name in names:
            if name not in self._spans:
                self._spans[name] = _matches(name, self.text)
        found = [(n, s) for n, spans in self._spans.items() for s in spans]
        self.named: dict[str, tuple[int, int]] = {}  # name -> its first span not inside a longer one
        for name, spans in self._spans.items():
            free = [s for s in spans if not any(_inside(s, t) and len(o) > len(name) for o, t in found)]
            if free:
                self.named[name] = free[0]
        taken = sorted(self.named.values())
        rest, last = [], 0
        for start, end in taken:
            rest.append(self.text[last:start])
            last = max(last, end)
        rest.append(self.text[last:])
        self._words = {w.lower() for w in re.findall(r"\w+", " ".join(rest)) if len(w) >= STEM}

    def role(self, name: str) -> str | None:
        """``"subject"``, ``"object"`` or None (not named)."""
        if name not in self.named:
            return None
        return "subject" if _SUBJECT_BEFORE.search(self.text[: self.named[name][0]]) else "object"

    def slot(self, record: Record) -> Slot:
        return (
            record.relation,
            record.subject if record.subject in self.named else None,
            record.object if record.object in self.named else None,
        )

    def names_relation(self, relation: str) -> bool:
        words = [w for w in re.findall(r"\w+", relation.lower()) if len(w) >= STEM and w not in _PLAIN]
        return any(_shares_stem(w, q) for w in words for q in self._words)

    def roles_agree(self, key: Slot) -> bool:
        return (key[1] is None or self.role(key[1]) == "subject") and (
            key[2] is None or self.role(key[2]) == "object"
        )


def asked_slot(by_score: Sequence[Record], naming: Naming) -> Slot | None:
    """The asked slot (module docs) from records best first; without a named entity, the best
    record's slot; None without records."""
    votes: dict[Slot, float] = {}
    for rank, record in enumerate(by_score):
        key = naming.slot(record)
        if any(key[1:]):
            votes[key] = votes.get(key, 0.0) + 1.0 / (rank + 1)
    if votes:
        return max(
            votes,
            key=lambda k: (
                naming.names_relation(k[0]),
                naming.roles_agree(k),
                sum(map(bool, k[1:])),
                votes[k],
            ),
        )
    return naming.slot(by_score[0]) if by_score else None
