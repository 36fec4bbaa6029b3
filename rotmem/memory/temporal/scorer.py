"""``KGEScorer``: ``S_kge``, a fitted model's probability of a record's object at a day.

``S_kge`` of a record ``(subject, relation, object)`` at day ``tau`` is the model's softmax over
**all** entities as the tail of ``(subject, relation, ?, tau)``, taken at the object: in [0, 1]
and comparable across questions. A record the model cannot score (no model yet, no day, or a
string outside the model's vocabulary) gets None.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rotmem.memory.records import Record
from rotmem.models import RoMem


class KGEScorer:
    """The model a memory re-ranks with, and its vocabulary (module docs)."""

    def __init__(self) -> None:
        self.model: RoMem | None = None
        self.entity_ids: dict[str, int] = {}
        self.relation_ids: dict[str, int] = {}

    def use(self, model: RoMem) -> None:
        """Score with ``model`` from now on: a RoMem with a vocabulary (``model.entities`` and
        ``model.relations``, as ``rotmem.load_model`` or a fit give it), put in eval mode."""
        if getattr(model, "entities", None) is None or getattr(model, "relations", None) is None:
            raise ValueError("the model has no vocabulary: use rotmem.load_model or RoMem.set_vocabulary")
        self.model = model.eval()
        self.entity_ids = {e: i for i, e in enumerate(model.entities)}
        self.relation_ids = {r: i for i, r in enumerate(model.relations)}

    def scores(self, records: Sequence[Record], taus: Sequence[float | None]) -> list[float | None]:
        """``S_kge`` of each record at its day in ``taus``; None where it cannot be scored."""
        out: list[float | None] = [None] * len(records)
        if self.model is None:
            return out
        entity_ids, relation_ids = self.entity_ids, self.relation_ids
        rows = [
            (i, entity_ids[r.subject], relation_ids[r.relation], entity_ids[r.object], tau)
            for i, (r, tau) in enumerate(zip(records, taus, strict=True))
            if tau is not None
            and r.subject in entity_ids
            and r.object in entity_ids
            and r.relation in relation_ids
        ]
        if not rows:
            return out
        index, h, rel, t, tau = zip(*rows, strict=True)
        device = self.model.entity.device
        with torch.no_grad():
            logits = self.model.score_tails(
                torch.tensor(h, device=device),
                torch.tensor(rel, device=device),
                torch.tensor(tau, dtype=torch.float64, device=device),
            )
            probs = torch.softmax(logits.float(), dim=-1).gather(1, torch.tensor(t, device=device)[:, None])
        for i, p in zip(index, probs[:, 0].tolist(), strict=True):
            out[i] = float(p)
        return out
