"""Which slot ``(relation, subject, object)`` a question asks about, read from its candidate facts.

A fact *names* an entity of the question when its subject or object occurs in the question as
whole words (case-insensitive), and not only inside a longer name that also occurs there
("France" inside "Foreign Affairs (France)" is not named by itself). A fact's slot is
``(relation, subject if named, object if named)``.

The question's role for a named entity: the *subject* when the name follows an auxiliary or "by"
("When did **X** first visit Y?", "Who does **X** negotiate with?", "Who was visited by **X**?"),
else the *object* ("Who visited **X**?"). A word of a relation and a word of the question outside
the named entities (not a plain word such as "make") match when they share a prefix of all but the
last letter of the shorter, at least ``STEM`` letters ("deny" ~ "denied", "visit" ~ "visited").

``asked_slot``: the relation (semantic similarity, word overlap, the candidates' votes) with the
named entities in their question roles.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from rotmem.memory.records import Record

Slot = tuple[str, str | None, str | None]  # (relation, subject or None, object or None)
OVERLAP = 0.1  # weight of the relation words the question names, next to the similarity
VOTE = 0.1  # weight of the relation's share of the candidates' votes
STEM = 3  # the shortest shared prefix that makes a relation word match a question word
_PLAIN = {"make", "made", "the", "and", "for", "with", "into", "from", "such", "other", "not"}
_SUBJECT_BEFORE = re.compile(
    r"\b(?:did|does|do|has|have|had|is|was|were|are|will|would|can|could|by)\s+$", re.IGNORECASE
)


def _matches(name: str, text: str, lowered: str) -> list[tuple[int, int]]:
    """The spans of ``name`` as whole words in ``text`` (case-insensitive); ``lowered``: ``text.lower()``."""
    if not name or name.lower() not in lowered:  # most candidates' names: no pattern to compile
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
        self._lowered = text.lower()
        self._seen: set[str] = set()  # every name considered
        self._spans: dict[str, list[tuple[int, int]]] = {}  # the names that occur in the text: their spans
        self.named: dict[str, tuple[int, int]] = {}  # name -> its first span not inside a longer one
        self._words: set[str] = set()
        self._read_names()
        self.add(names)

    def add(self, names: Iterable[str]) -> None:
        """Consider ``names`` too (candidates' subjects and objects)."""
        found = False
        for name in names:
            if name not in self._seen:
                self._seen.add(name)
                spans = _matches(name, self.text, self._lowered)
                if spans:
                    self._spans[name] = spans
                    found = True
        if found:
            self._read_names()

    def _read_names(self) -> None:
        """``named`` and the question's words outside the named entities, from the names found."""
        found = [(n, s) for n, spans in self._spans.items() for s in spans]
        self.named = {}
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


def relation_overlap(relation: str, naming: Naming) -> float:
    """The share of ``relation``'s words (not plain ones) the question names (module docs)."""
    words = [w for w in re.findall(r"\w+", relation.lower()) if len(w) >= STEM and w not in _PLAIN]
    return sum(any(_shares_stem(w, q) for q in naming._words) for w in words) / len(words) if words else 0.0


def asked_slot(
    by_score: Sequence[Record], naming: Naming, similarity: Callable[[str], float] | None = None
) -> Slot | None:
    """The asked slot (module docs) from records best first; None without records.

    The relation: of the relations of the records that name an entity, the largest
    ``similarity(relation)`` (e.g. the cosine of the question and the relation's embeddings; 0
    without it) + ``OVERLAP`` x the share of its words the question names + ``VOTE`` x its share of
    the records' reciprocal-rank votes. The entities: those the question names in the subject and in
    the object role (the first of each), so that the slot need not be among the records.
    Without a named entity, the best record's slot."""
    votes: dict[str, float] = {}
    named = naming.named
    for rank, record in enumerate(by_score):
        if record.subject in named or record.object in named:  # a named entity in its slot
            votes[record.relation] = votes.get(record.relation, 0.0) + 1.0 / (rank + 1)
    if not votes:
        return naming.slot(by_score[0]) if by_score else None
    total = sum(votes.values())
    relation = max(
        votes,
        key=lambda r: (
            (similarity(r) if similarity else 0.0)
            + OVERLAP * relation_overlap(r, naming)
            + VOTE * votes[r] / total
        ),
    )
    roles = sorted((span, name) for name, span in naming.named.items())
    subject = next((n for _, n in roles if naming.role(n) == "subject"), None)
    obj = next((n for _, n in roles if naming.role(n) == "object"), None)
    return relation, subject, obj
