"""The deterministic label-aware reader of the state-update benchmark (no LLM)."""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rotmem.memory.temporal.time_expressions import QueryMode, as_day, extract_time, query_mode

READER_NAME = "label-aware rule reader (no LLM)"
_HEADER = re.compile(r"^\[session (\d{4}-\d{2}-\d{2})\]")
_DATE_PREFIX = re.compile(r"^(\d{4}-\d{2}-\d{2}):")
_SLOT_WORDS = (("drink", "drinks"), ("live", "lives in"), ("job", "works as"), ("work", "works as"))
_FAR_PAST = -(10**9)


@dataclass(frozen=True)
class Mention:
    value: str
    historical: bool | None
    day: int | None
    position: tuple[int, int]

    def key(self) -> tuple[int, tuple[int, int]]:
        return (_FAR_PAST if self.day is None else self.day, self.position)


class LabelAwareReader:
    """``reader(question, evidence) -> str`` by the rules in benchmarks/README.md.

    Args:
        personas: full names of the personas (the reader finds the question's subject among them).
        values: relation -> the values a slot can take (a reader's world knowledge: what is a city).
    """

    name = READER_NAME

    def __init__(self, personas: Sequence[str], values: Mapping[str, Sequence[str]]):
        self.personas = sorted(personas, key=len, reverse=True)
        self.values = {
            rel: [(v, re.compile(rf"(?<!\w){re.escape(v)}(?!\w)", re.IGNORECASE)) for v in vals]
            for rel, vals in values.items()
        }

    def __call__(self, question: str, evidence: str) -> str:
        subject = next((p for p in self.personas if p.lower() in question.lower()), None)
        relation = next((rel for word, rel in _SLOT_WORDS if word in question.lower()), None)
        if subject is None or relation is None or relation not in self.values:
            return "unknown"
        mentions = self._mentions(evidence, subject, relation)
        if not mentions:
            return "unknown"
        labelled = any(m.historical for m in mentions)
        current = [m for m in mentions if not m.historical] if labelled else mentions
        newest_current = max(current or mentions, key=Mention.key)
        q = question.lower()
        if "first talked" in q or "first met" in q:
            return min(mentions, key=Mention.key).value
        before = re.search(r"before (?:moving|switching|changing) to (.+?)\?*$", question, re.IGNORECASE)
        if before:
            named = before.group(1).strip().lower()
            others = [m for m in mentions if m.value.lower() != named]
            if not others:
                return "unknown"
            pool = [m for m in others if m.historical] or others
            return max(pool, key=Mention.key).value
        asked = query_mode(question, "2000-01-01")  # the dated questions name absolute months
        if asked.mode == QueryMode.EXPLICIT:
            dated = [m for m in mentions if m.day is not None]
            if dated:
                before_end = [m for m in dated if m.day <= asked.span.end]
                return (max(before_end, key=Mention.key) if before_end else min(dated, key=Mention.key)).value
            pool = [m for m in mentions if m.historical] or mentions
            return max(pool, key=Mention.key).value
        return newest_current.value

    def _mentions(self, evidence: str, subject: str, relation: str) -> list[Mention]:
        first_name = subject.split()[0].lower()
        mentions = []
        header_day: str | None = None
        about_subject = False  # an indented line continues the previous line's subject
        for line_no, line in enumerate(evidence.splitlines()):
            header = _HEADER.match(line)
            if header:
                header_day = header.group(1)
                about_subject = False
                continue
            lowered = line.lower()
            if not (line.startswith("  ") and about_subject):
                named = re.search(rf"\b{re.escape(first_name)}\b", lowered)
                about_subject = subject.lower() in lowered or bool(named)
            if not about_subject:
                continue
            prefix = _DATE_PREFIX.match(line)
            base = prefix.group(1) if prefix else header_day
            day = None
            if base is not None:
                found = extract_time(line[prefix.end() :] if prefix else line, base)
                day = int(found.start) if found is not None else as_day(base)
            historical = "[historical]" in line
            patterns = self.values[relation]
            hits = sorted((m.start(), value) for value, pattern in patterns for m in pattern.finditer(line))
            for i, (start, value) in enumerate(hits):
                older = day is not None and i < len(hits) - 1  # "from X to Y": X held before that day
                mentions.append(
                    Mention(value, historical, None if day is None else day - older, (line_no, start))
                )
        return mentions
