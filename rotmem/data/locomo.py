"""LoCoMo (Maharana et al., ACL 2024): long conversations with dated sessions and evidence-labelled
questions, read into plain records.

The file is ``locomo10.json`` (CC BY-NC 4.0; never shipped with rotmem), found as ``path`` when it is
a file, else ``<path>/locomo10.json``, ``$ROTMEM_DATA_DIR/locomo/locomo10.json`` or the user cache's
``locomo/locomo10.json``. Each conversation becomes a ``Conversation``:

- ``sessions``: the sessions that have turns, in order, each with its date (``"1:56 pm on 8 May,
  2023"`` -> days since 1970-01-01), its ``Turn`` items (dialogue id ``"D<session>:<k>"``, speaker,
  text, image caption), its ``Observation`` items (a fact sentence about a speaker and the dialogue
  ids it came from) and its summary;
- ``questions``: question, answer (``adversarial_answer`` for category 5), evidence dialogue ids,
  category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial) and the day it is
  asked (the last session's date).

Evidence ids are normalised where the file spells one id oddly (``"D:11:26"``, ``"D30:05"``) or
packs several in one string (``"D8:6; D9:17"``); an id that names no turn of the conversation is
kept in ``Question.unknown_evidence`` and left out of ``evidence``. A missing or malformed field
raises ``LocomoFormatError`` naming the conversation and the key.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rotmem.data.registry import cache_root

FILE_NAME = "locomo10.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_SESSION_KEY = re.compile(r"session_(\d+)")
_DATE = re.compile(r"^\s*\d{1,2}:\d{2}\s*[ap]m\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.IGNORECASE)
_EVIDENCE_ID = re.compile(r"D:?(\d+):0*(\d+)")


class LocomoFormatError(ValueError):
    """A LoCoMo field is missing or malformed; the message names the conversation and the key."""


@dataclass(frozen=True)
class Turn:
    """One dialogue turn; ``caption`` is the BLIP caption of a shared image (None without one)."""

    dia_id: str
    speaker: str
    text: str
    caption: str | None = None


@dataclass(frozen=True)
class Observation:
    """A generated fact sentence about ``speaker`` and the dialogue ids it was read from."""

    speaker: str
    text: str
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Session:
    """A session: its number ``n`` (``session_<n>``), date (days since 1970-01-01) and contents."""

    n: int
    day: int
    date_text: str
    turns: tuple[Turn, ...]
    observations: tuple[Observation, ...]
    summary: str | None


@dataclass(frozen=True)
class Question:
    """A question with its evidence dialogue ids, category (``CATEGORIES``) and the day it is asked."""

    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int
    asked_day: int
    unknown_evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    def turn_ids(self) -> set[str]:
        return {turn.dia_id for session in self.sessions for turn in session.turns}


def find_locomo(path: str | Path | None = None) -> Path:
    """The ``locomo10.json`` to read (module docs); FileNotFoundError lists where it looked."""
    candidates = []
    if path is not None:
        path = Path(path)
        candidates += [path] if path.suffix == ".json" else [path / FILE_NAME, path / "locomo" / FILE_NAME]
    if os.environ.get("ROTMEM_DATA_DIR"):
        candidates.append(Path(os.environ["ROTMEM_DATA_DIR"]) / "locomo" / FILE_NAME)
    candidates.append(cache_root() / "locomo" / FILE_NAME)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    searched = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(
        f"LoCoMo not found (searched {searched}); put {FILE_NAME} from the LoCoMo release "
        "(CC BY-NC 4.0) in $ROTMEM_DATA_DIR/locomo/"
    )


def load_locomo(path: str | Path | None = None) -> list[Conversation]:
    """Every conversation of the LoCoMo file (module docs)."""
    file = find_locomo(path)
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise LocomoFormatError(f"{file}: not valid JSON ({error})") from None
    if not isinstance(raw, list):
        raise LocomoFormatError(f"{file}: expected a JSON list of conversations, got {type(raw).__name__}")
    return [parse_conversation(item, f"{file}: conversation {i}") for i, item in enumerate(raw)]


def parse_conversation(item: Any, where: str = "conversation") -> Conversation:
    """One conversation object of the file (module docs)."""
    sample_id = _field(item, "sample_id", str, where)
    where = f"{where} ({sample_id})"
    conversation = _field(item, "conversation", dict, where)
    speakers = (
        _field(conversation, "speaker_a", str, f"{where} conversation"),
        _field(conversation, "speaker_b", str, f"{where} conversation"),
    )
    observations = _field(item, "observation", dict, where)
    summaries = _field(item, "session_summary", dict, where)
    sessions = []
    for key in sorted(
        (k for k in conversation if _SESSION_KEY.fullmatch(k)), key=lambda k: int(k.split("_")[1])
    ):
        n = int(key.split("_")[1])
        raw_turns = _field(conversation, key, list, f"{where} conversation")
        if not raw_turns:
            continue
        date_text = _field(conversation, f"{key}_date_time", str, f"{where} conversation")
        turns = tuple(_turn(t, f"{where} conversation.{key}[{i}]") for i, t in enumerate(raw_turns))
        session_obs = observations.get(f"{key}_observation", {})
        sessions.append(
            Session(
                n=n,
                day=parse_session_date(date_text, f"{where} conversation.{key}_date_time"),
                date_text=date_text,
                turns=turns,
                observations=_observations(session_obs, f"{where} observation.{key}_observation"),
                summary=summaries.get(f"{key}_summary"),
            )
        )
    if not sessions:
        raise LocomoFormatError(f"{where}: no session with turns")
    known = {turn.dia_id for session in sessions for turn in session.turns}
    asked = sessions[-1].day
    questions = tuple(
        _question(q, known, asked, f"{where} qa[{i}]") for i, q in enumerate(_field(item, "qa", list, where))
    )
    return Conversation(sample_id, speakers, tuple(sessions), questions)


def parse_session_date(text: str, where: str = "date") -> int:
    """``"1:56 pm on 8 May, 2023"`` -> days since 1970-01-01 (the time of day is dropped)."""
    match = _DATE.match(text)
    if match is None:
        raise LocomoFormatError(
            f"{where}: cannot read the date {text!r} (expected like '1:56 pm on 8 May, 2023')"
        )
    day, month, year = match.groups()
    try:
        date = dt.datetime.strptime(f"{day} {month[:3]} {year}", "%d %b %Y").date()
    except ValueError:
        raise LocomoFormatError(f"{where}: cannot read the date {text!r}") from None
    return date.toordinal() - _EPOCH_ORDINAL


def normalise_evidence(value: str) -> list[str]:
    """Dialogue ids in one evidence string: ``"D8:6; D9:17"`` -> ``["D8:6", "D9:17"]``,
    ``"D:11:26"`` -> ``["D11:26"]``, ``"D30:05"`` -> ``["D30:5"]``."""
    return [f"D{m.group(1)}:{m.group(2)}" for m in _EVIDENCE_ID.finditer(value)]


def _field(obj: Any, key: str, kind: type, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise LocomoFormatError(f"{where}: missing key {key!r}")
    value = obj[key]
    if not isinstance(value, kind):
        raise LocomoFormatError(
            f"{where}: key {key!r} should be a {kind.__name__}, got {type(value).__name__}"
        )
    return value


def _turn(raw: Any, where: str) -> Turn:
    caption = raw.get("blip_caption") if isinstance(raw, dict) else None
    return Turn(
        dia_id=_field(raw, "dia_id", str, where),
        speaker=_field(raw, "speaker", str, where),
        text=_field(raw, "text", str, where),
        caption=caption if isinstance(caption, str) and caption.strip() else None,
    )


def _observations(raw: Any, where: str) -> tuple[Observation, ...]:
    if not isinstance(raw, dict):
        raise LocomoFormatError(f"{where}: should map speaker -> [[text, dialogue id], ...]")
    out = []
    for speaker, items in raw.items():
        if not isinstance(items, list):
            raise LocomoFormatError(f"{where}.{speaker}: should be a list of [text, dialogue id]")
        for i, entry in enumerate(items):
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
                raise LocomoFormatError(
                    f"{where}.{speaker}[{i}]: expected [text, dialogue id], got {entry!r}"
                )
            ids = entry[1] if isinstance(entry[1], list) else [entry[1]]
            evidence = tuple(e for value in ids if isinstance(value, str) for e in normalise_evidence(value))
            if not evidence:
                raise LocomoFormatError(f"{where}.{speaker}[{i}]: no dialogue id in {entry[1]!r}")
            out.append(Observation(speaker, entry[0], evidence))
    return tuple(out)


def _question(raw: Any, known: set[str], asked: int, where: str) -> Question:
    question = _field(raw, "question", str, where)
    category = _field(raw, "category", int, where)
    if category not in CATEGORIES:
        raise LocomoFormatError(
            f"{where}: key 'category' should be one of {sorted(CATEGORIES)}, got {category}"
        )
    answer = raw.get("answer", raw.get("adversarial_answer"))
    if answer is None:
        raise LocomoFormatError(f"{where}: missing key 'answer' (or 'adversarial_answer')")
    ids = [e for value in _field(raw, "evidence", list, where) for e in normalise_evidence(str(value))]
    ids = list(dict.fromkeys(ids))
    return Question(
        question=question,
        answer=str(answer),
        evidence=tuple(e for e in ids if e in known),
        category=category,
        asked_day=asked,
        unknown_evidence=tuple(e for e in ids if e not in known),
    )
