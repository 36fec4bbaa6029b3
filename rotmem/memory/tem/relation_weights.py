"""Relation types, their retrieval weights, and the synonym table that maps phrases to types.

TEM weights a record's similarity by its relation type: residence 1.0, employer 1.0, occupation
0.9, possession 0.8, likes/dislikes 0.6. Relation phrases are mapped to a type by a small table
after normalisation (case-folded, ``_``/``-`` as spaces, whitespace collapsed): "lives in",
"moved to" and "resides in" are all ``residence``. A phrase the table does not know has no type,
weight ``unknown_weight`` (1.0) and forms its own version group. The type also defines version
groups: ``(Alice, lives in)`` and ``(Alice, moved to)`` are one group, so a move makes the old
residence historical. The table therefore lists only true synonyms: a state of its own ("drinks",
"favorite color") stays out, keeping its own group and weight 1.0 unless configured.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

DEFAULT_WEIGHTS: dict[str, float] = {
    "residence": 1.0,
    "employer": 1.0,
    "occupation": 0.9,
    "possession": 0.8,
    "likes": 0.6,
    "dislikes": 0.6,
}

_PHRASES: dict[str, tuple[str, ...]] = {
    "residence": (
        "residence", "lives in", "live in", "living in", "lived in", "resides in", "reside in",
        "moved to", "moves to", "move to", "relocated to", "relocates to", "lives at", "based in",
        "home", "home city", "current city", "city of residence", "address", "location",
    ),
    "employer": (
        "employer", "works for", "work for", "working for", "works at", "work at", "working at",
        "employed by", "employed at", "company", "job at",
    ),
    "occupation": (
        "occupation", "job", "job title", "profession", "works as", "work as", "working as",
        "career", "role", "position",
    ),
    "possession": ("possession", "owns", "own", "has", "have", "bought", "purchased", "possesses"),
    "likes": ("likes", "like", "loves", "love", "enjoys", "enjoy", "fan of"),
    "dislikes": (
        "dislikes", "dislike", "hates", "hate", "avoids", "avoid", "does not like", "doesn't like",
    ),
}  # fmt: skip
DEFAULT_SYNONYMS: dict[str, str] = {phrase: kind for kind, phrases in _PHRASES.items() for phrase in phrases}


@lru_cache(maxsize=1 << 16)  # called for every fact written and read; relation phrases repeat
def normalise_relation(relation: str) -> str:
    """Case-folded, ``_``/``-`` as spaces, whitespace collapsed: ``"Lives_In "`` → ``"lives in"``."""
    return re.sub(r"\s+", " ", re.sub(r"[_\-]+", " ", relation.casefold())).strip()


class RelationWeights:
    """Relation phrase → (type, weight).

    Args:
        weights: per-type (or per-normalised-phrase) weights, merged over ``DEFAULT_WEIGHTS``.
        synonyms: phrase → type, merged over ``DEFAULT_SYNONYMS`` (keys are normalised).
        unknown_weight: the weight of a phrase with no type and no weight of its own.
    """

    def __init__(
        self,
        weights: Mapping[str, float] | None = None,
        synonyms: Mapping[str, str] | None = None,
        unknown_weight: float = 1.0,
    ):
        self.weights = {
            **DEFAULT_WEIGHTS,
            **{normalise_relation(k): float(v) for k, v in (weights or {}).items()},
        }
        self.synonyms = {
            **DEFAULT_SYNONYMS,
            **{normalise_relation(k): normalise_relation(v) for k, v in (synonyms or {}).items()},
        }
        self.unknown_weight = float(unknown_weight)
        bad = {k: v for k, v in self.weights.items() if not v >= 0.0}
        if bad or not self.unknown_weight >= 0.0:
            raise ValueError(f"relation weights must be non-negative numbers, got {bad or unknown_weight}")

    def relation_type(self, relation: str) -> str | None:
        """The type of a relation phrase (``"moved to"`` → ``"residence"``), or None when unknown."""
        phrase = normalise_relation(relation)
        if phrase in self.synonyms:
            return self.synonyms[phrase]
        return phrase if phrase in DEFAULT_WEIGHTS or phrase in self.weights else None

    def weight(self, relation: str) -> float:
        """The retrieval weight of a relation phrase: its own, else its type's, else ``unknown_weight``."""
        phrase = normalise_relation(relation)
        if phrase in self.weights:
            return self.weights[phrase]
        kind = self.relation_type(phrase)
        return self.weights.get(kind, self.unknown_weight) if kind is not None else self.unknown_weight

    def group_relation(self, relation: str) -> str:
        """The relation part of a version-group key: the type when known, else the normalised phrase."""
        return self.relation_type(relation) or normalise_relation(relation)
