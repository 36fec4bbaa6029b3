"""Compact evidence text for a generator: one line per record, superseded ones labelled.

>>> print(render(records))
s2: Alice lives in Paris [historical]
s5: Alice moved to Berlin
>>> print(render(records, show_session=False, group_subjects=True))
Alice lives in Paris [historical]
  moved to Berlin
"""

from __future__ import annotations

from collections.abc import Iterable

from rotmem.memory.records import Passage, Record

HISTORICAL_LABEL = "[historical]"


def render(items: Iterable[Record | Passage], show_session: bool = True, group_subjects: bool = False) -> str:
    """One line per record (``subject relation object``, `` [historical]`` when superseded) or
    passage (a turn's text; ``summary: …`` for a summary), in the given order, each prefixed with
    ``s<session_index>:`` unless ``show_session`` is False. With ``group_subjects``, a record whose
    subject equals the previous line's is written without it, indented (fewer evidence tokens).
    Empty input gives ``""``."""
    lines = []
    previous_subject = None
    for item in items:
        if isinstance(item, Record):
            same = group_subjects and item.subject == previous_subject
            line = (
                f"  {item.relation} {item.object}"
                if same
                else f"{item.subject} {item.relation} {item.object}"
            )
            previous_subject = item.subject
            if item.historical:
                line += f" {HISTORICAL_LABEL}"
        elif isinstance(item, Passage):
            previous_subject = None
            line = f"summary: {item.text}" if item.kind == "summary" else item.text
        else:
            raise TypeError(f"render takes Record or Passage items, got {type(item).__name__}")
        lines.append(f"s{item.session_index}: {line}" if show_session else line)
    return "\n".join(lines)
