"""Checking extracted facts against the session text before they are written (TEM's write path).

Rule: a fact is kept when its **object** occurs in the text as whole words, case-insensitively,
with any run of whitespace matching any other (``"New  York"`` matches ``"new york"``; ``"Paris"``
does not match inside ``"Parisian"``). The subject is not checked (it is usually "user" or a
speaker's name that the text never spells out), nor the relation (extractors normalise it).
The match gives the fact's source span. Without a text nothing can be checked: every fact is kept
with no span.
"""

from __future__ import annotations

import re

from rotmem.memory.records import DroppedFact, Fact

NOT_IN_TEXT = "object not found in the session text"


def object_span(obj: str, text: str) -> tuple[int, int] | None:
    """``(start, end)`` of the first whole-word, case-insensitive occurrence of ``obj`` in ``text``."""
    pattern = r"\s+".join(re.escape(token) for token in obj.split())
    match = re.search(rf"(?<!\w){pattern}(?!\w)", text, flags=re.IGNORECASE)
    return match.span() if match else None


def verify_facts(
    facts: list[Fact], text: str | None
) -> tuple[list[tuple[Fact, tuple[int, int] | None]], list[DroppedFact]]:
    """Split ``facts`` into ``(kept [(fact, span)], dropped)`` by the rule above."""
    if text is None:
        return [(fact, None) for fact in facts], []
    kept, dropped = [], []
    for fact in facts:
        span = object_span(fact[2], text)
        if span is None:
            dropped.append(DroppedFact(fact, NOT_IN_TEXT))
        else:
            kept.append((fact, span))
    return kept, dropped
