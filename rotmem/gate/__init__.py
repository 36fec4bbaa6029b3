"""The Semantic Speed Gate: relation text -> rotation speed, and its Phase-1 transition mining.

``relation_speeds(gate_path, relations)`` is what Phase 2 calls (once per run) to freeze the speeds.
The loss is ``rotmem.gate.loss``; training lives in ``lightning_modules.phase1_gate`` (the CLI is
``rotmem gate pretrain``).
"""

from rotmem.gate.encoder import DEFAULT_ENCODER, EncoderUnavailableError, RelationEncoder
from rotmem.gate.speed_gate import (
    DEFAULT_TEMPLATE,
    SemanticSpeedGate,
    hidden_width,
    relation_sentences,
    relation_speeds,
)
from rotmem.gate.transitions import Transitions, mine_transitions

__all__ = [
    "DEFAULT_ENCODER",
    "DEFAULT_TEMPLATE",
    "EncoderUnavailableError",
    "RelationEncoder",
    "SemanticSpeedGate",
    "Transitions",
    "hidden_width",
    "mine_transitions",
    "relation_sentences",
    "relation_speeds",
]
