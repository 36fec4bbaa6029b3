"""The rows of a batch of sessions, queued on a ``SessionWriter`` (``TEMStore.add_sessions``).

``queue_sessions`` hands out session indexes and fact and passage ids (read under the write lock,
so they follow the rows already stored) and queues one ``sessions`` row per session, one ``facts``
row per fact (its version-group key, relation type, span and vector) and one ``passages`` row per
turn and summary, by column name; the caller flushes the writer and recomputes the touched groups'
status in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rotmem.memory.records import SessionResult, ValidSession
from rotmem.memory.storage.writer import SessionWriter
from rotmem.memory.tem.tables import join_sources, next_session_index


@dataclass
class QueuedBatch:
    """What ``queue_sessions`` queued: one result per session, the fact ids and relations and the
    passage ids and kinds in queue order, and the version groups the facts touch."""

    results: list[SessionResult] = field(default_factory=list)
    fact_ids: list[int] = field(default_factory=list)
    relations: list[str] = field(default_factory=list)
    passage_ids: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    touched: set[str] = field(default_factory=set)


def queue_sessions(
    writer: SessionWriter,
    batch: list[ValidSession],
    spans: list[list[tuple[int, int] | None]],
    vectors: np.ndarray | None,
    group_key: Callable[[str, str], str],
    relation_type: Callable[[str], str | None],
    now: float,
) -> QueuedBatch:
    """Queue ``batch`` (module docs); ``spans[i][j]``: fact ``j`` of session ``i``'s span in the
    text, or None; ``vectors``: the facts' unit rows first, then the passages', in batch order."""
    db = writer.db
    out = QueuedBatch()
    n_facts = sum(len(session.facts) for session in batch)
    next_index = next_session_index(db)
    fact_id, passage_id = db.next_id("facts"), db.next_id("passages")
    for session, found in zip(batch, spans, strict=True):
        index = next_index if session.session_index is None else session.session_index
        next_index = max(next_index, index + 1)
        writer.add(
            "sessions",
            session_id=session.session_id,
            session_index=index,
            text=session.text,
            created_at=now,
        )
        result = SessionResult(session.session_id, index)
        for fact, span in zip(session.facts, found, strict=True):
            key = group_key(fact.subject, fact.relation)
            out.touched.add(key)
            start, end = span if span is not None else (None, None)
            writer.add(
                "facts",
                id=fact_id,
                subject=fact.subject,
                relation=fact.relation,
                object=fact.object,
                group_key=key,
                relation_type=relation_type(fact.relation),
                session_id=session.session_id,
                session_index=index,
                span_start=start,
                span_end=end,
                created_at=now,
                vector=vectors[len(out.fact_ids)].tobytes(),
                source=join_sources(fact.sources),
            )
            out.fact_ids.append(fact_id)
            out.relations.append(fact.relation)
            result.record_ids.append(fact_id)
            result.fact_ids.append(fact_id)
            result.verified.append(span is not None)
            fact_id += 1
        for position, passage in enumerate(session.passages):
            writer.add(
                "passages",
                id=passage_id,
                kind=passage.kind,
                session_id=session.session_id,
                session_index=index,
                position=position,
                text=passage.text,
                created_at=now,
                vector=vectors[n_facts + len(out.passage_ids)].tobytes(),
                source=join_sources(passage.sources),
            )
            out.passage_ids.append(passage_id)
            out.kinds.append(passage.kind)
            result.passage_ids.append(passage_id)
            passage_id += 1
        out.results.append(result)
    return out
