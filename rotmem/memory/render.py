"""Compact evidence text for a generator: one line per record, superseded ones labelled.

>>> print(render(records))
s2: Alice lives in Paris [historical]
s5: Alice moved to Berlin
"""

from __future__ import annotations

from collections.abc import Iterable

from rotmem.memory.records import Passage, Record

HISTORICAL_LABEL = "[historical]"


def render(items: Iterable[Record | Passage], show_session: bool = True) -> str:
    """One line per record (``subject relation object``, `` [historical]`` when superseded) or
    passage (a turn's text; ``summary: …`` for a summary), in the given order, each prefixed with
    ``s<session_index>:`` unless ``show_session`` is False. Empty input gives ``""``."""
    lines = []
    for item in items:
        if isinstance(item, Record):
            line = f"{item.subject} {item.relation} {item.object}"
            if item.historical:
                line += f" {HISTORICAL_LABEL}"
        elif isinstance(item, Passage):
            line = f"summary: {item.text}" if item.kind == "summary" else item.text
        else:
            raise TypeError(f"render takes Record or Passage items, got {type(item).__name__}")
        lines.append(f"s{item.session_index}: {line}" if show_session else line)
    return "\n".join(lines)
