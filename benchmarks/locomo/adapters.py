"""A LoCoMo conversation (``rotmem.data.locomo``) written into a memory, one store session per
LoCoMo session, dated.
"""

import math
import re
from typing import Any

from rotmem.data.locomo import Conversation, Observation, Session
from rotmem.memory.records import ExtractedFact
from rotmem.memory.temporal.memory import TemporalMemory
from rotmem.memory.temporal.time_expressions import extract_time

SAID = "said"
_AUXILIARIES = {
    "is", "was", "are", "were", "has", "had", "have", "will", "would", "can", "could", "does", "did",
    "has been", "had been", "is not", "was not", "does not", "did not", "also", "recently", "often",
}  # fmt: skip
_DETERMINERS = {"a", "an", "the", "his", "her", "their", "its", "some", "no", "many", "two", "three"}
_PARTICLES = {"in", "at", "to", "for", "with", "of", "from", "on", "as", "about", "into", "up", "out"}


def observation_fact(observation: Observation, day: int) -> ExtractedFact:
    """The fact of one observation told on ``day`` (benchmarks/README.md)."""
    speaker, text = observation.speaker, observation.text.strip().rstrip(".").strip()
    name = next((n for n in (speaker, speaker.split()[0]) if text.startswith(n + " ")), None)
    found = extract_time(text, day)
    when = None if found is None else float(math.floor(found.midpoint))
    if name is None:
        return ExtractedFact(speaker, SAID, text, when, observation.evidence)
    words = text[len(name) :].split()
    if not words or words[0].lower() in ("and", "or", "&"):  # a compound subject: keep the sentence
        return ExtractedFact(speaker, SAID, text, when, observation.evidence)
    relation = []
    while words and len(relation) < 3 and words[0].lower() in _AUXILIARIES:
        if len(words) > 1 and words[1].lower() in _DETERMINERS:  # "has a dog": the auxiliary is the verb
            break
        relation.append(words.pop(0))
    if words:
        relation.append(words.pop(0))
    if words and words[0].lower() in _PARTICLES and len(words) > 1:
        relation.append(words.pop(0))
    if not words:  # a sentence too short to split: keep it whole
        return ExtractedFact(speaker, SAID, text, when, observation.evidence)
    return ExtractedFact(
        speaker, " ".join(relation), re.sub(r"\s+", " ", " ".join(words)), when, observation.evidence
    )


def turn_text(turn: Any) -> str:
    """The text stored for a turn: ``"<speaker>: <text>"``."""
    return f"{turn.speaker}: {turn.text}"


def session_input(
    conversation: Conversation, session: Session, *, observations: bool = True, summaries: bool = True
) -> dict[str, Any]:
    """``TemporalMemory.add_sessions`` input for one LoCoMo session."""
    return dict(
        session_id=f"{conversation.sample_id}/session_{session.n}",
        facts=[observation_fact(o, session.day) for o in session.observations] if observations else [],
        date=session.day,
        text=None,
        turns=[turn_text(t) for t in session.turns],
        turn_ids=[t.dia_id for t in session.turns],
        summaries=[session.summary] if summaries and session.summary else [],
    )


def add_conversation(
    memory: TemporalMemory, conversation: Conversation, *, observations: bool = True, summaries: bool = True
) -> None:
    """Write every session of ``conversation`` into ``memory`` (one batch, README). The memory's
    store should be opened with ``verify=False``: observations paraphrase the turns."""
    memory.add_sessions(
        session_input(conversation, s, observations=observations, summaries=summaries)
        for s in conversation.sessions
    )
