"""The Semantic Speed Gate: relation text -> rotation speed ``alpha_r`` in (0, 1).

``alpha_r = sigmoid(MLP(phi(text_r)))`` with ``phi`` a sentence-embedding model and
``MLP = Linear(D -> h) -> ReLU -> Linear(h -> 1)``, ``h = max(32, min(128, D // 2))`` (ROMEM.md).
Because the speed comes from text alone, a relation string never seen in training gets one too.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from rotmem.gate.encoder import DEFAULT_ENCODER, RelationEncoder

CHECKPOINT_FORMAT = "rotmem.semantic_speed_gate"
CHECKPOINT_VERSION = 1


def hidden_width(embedding_dim: int) -> int:
    """The MLP's hidden width for a ``D``-dimensional text embedding."""
    return max(32, min(128, embedding_dim // 2))


class SemanticSpeedGate(nn.Module):
    """Maps relation texts to speeds; the encoder's name travels with the checkpoint.

    Args:
        embedding_dim: ``D``, the width of the encoder's sentence embeddings.
        encoder: the sentence-transformers model (see ``RelationEncoder``) the MLP was trained on.
    """

    def __init__(self, embedding_dim: int, encoder: str = DEFAULT_ENCODER):
        super().__init__()
        if embedding_dim < 1:
            raise ValueError(f"embedding_dim must be positive, got {embedding_dim}")
        self.embedding_dim = embedding_dim
        self.encoder_name = encoder
        hidden = hidden_width(embedding_dim)
        self.mlp = nn.Sequential(nn.Linear(embedding_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self._encoder: RelationEncoder | None = None
        self.metadata: dict = {}

    def forward(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Speeds ``[B]`` in (0, 1) from text embeddings ``[B, D]``."""
        if embeddings.shape[-1] != self.embedding_dim:
            raise ValueError(
                f"expected embeddings of width {self.embedding_dim} (encoder {self.encoder_name!r}), "
                f"got shape {tuple(embeddings.shape)}"
            )
        return torch.sigmoid(self.mlp(embeddings).squeeze(-1))

    @property
    def encoder(self) -> RelationEncoder:
        """The relation encoder, created on first use (cached embeddings avoid loading the model)."""
        if self._encoder is None:
            self._encoder = RelationEncoder(self.encoder_name)
        return self._encoder

    def use_encoder(self, encoder: RelationEncoder) -> None:
        """Use ``encoder`` (e.g. with another cache folder); it must be the model the gate was trained on."""
        if encoder.name != self.encoder_name:
            raise ValueError(
                f"this gate was trained on text embeddings of {self.encoder_name!r}; "
                f"an encoder {encoder.name!r} would give it meaningless inputs"
            )
        self._encoder = encoder

    def embed(self, texts: list[str]) -> torch.Tensor:
        """Text embeddings ``[len(texts), D]`` on the gate's device."""
        device = self.mlp[0].weight.device
        return self.encoder.encode(list(texts)).to(device)

    def alpha(self, texts: list[str]) -> torch.Tensor:
        """Speeds ``[len(texts)]`` in (0, 1) for any relation strings, seen in training or not."""
        if isinstance(texts, str):
            raise TypeError("alpha expects a list of relation strings, got a single string")
        return self(self.embed(texts))

    def save(self, path: str | Path, **metadata) -> None:
        """Write the gate (weights, ``D``, encoder name and JSON-like ``metadata``) to ``path``."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(
            {
                "format": CHECKPOINT_FORMAT,
                "version": CHECKPOINT_VERSION,
                "encoder": self.encoder_name,
                "embedding_dim": self.embedding_dim,
                "state_dict": {k: v.detach().cpu() for k, v in self.state_dict().items()},
                "metadata": metadata,
            },
            path,
        )

    @classmethod
    def load(cls, path: str | Path, encoder: RelationEncoder | None = None) -> SemanticSpeedGate:
        """A gate written by ``save``, in eval mode on the CPU (optionally with a given encoder)."""
        path = Path(path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(
                f"no Semantic Speed Gate at {path}: pretrain one with "
                f"`rotmem gate pretrain --data <dataset> --out {path.parent}`"
            )
        payload = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(
                f"{path} is not a Semantic Speed Gate checkpoint (written by SemanticSpeedGate.save)"
            )
        gate = cls(int(payload["embedding_dim"]), encoder=payload["encoder"])
        gate.load_state_dict(payload["state_dict"])
        gate.metadata = dict(payload.get("metadata", {}))
        if encoder is not None:
            gate.use_encoder(encoder)
        return gate.eval()


def relation_speeds(gate_path: str | Path, relations: list[str]) -> torch.Tensor:
    """``alpha [R]`` (float32, CPU) for relation strings, from the gate saved at ``gate_path``.

    Phase 2 calls this once per run and freezes the result (``RelationSpeed.set_speeds``).
    """
    if isinstance(relations, str) or not all(isinstance(r, str) for r in relations):
        raise TypeError("relations must be a list of relation strings")
    gate = SemanticSpeedGate.load(gate_path)
    with torch.no_grad():
        return gate.alpha(list(relations)).float().cpu()
