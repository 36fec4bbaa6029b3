"""Shared fixtures: the data directory (``$ROTMEM_DATA_DIR``) and the synthetic graph."""

from __future__ import annotations

import os
from pathlib import Path

import torch

if not torch.cuda.is_available():  # before anything imports triton: its kernels run interpreted
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from rotmem.data import synthetic_kg  # noqa: E402


def icews_dir() -> Path | None:
    """``$ROTMEM_DATA_DIR/icews05-15`` when it holds the three split files."""
    root = os.environ.get("ROTMEM_DATA_DIR")
    if not root:
        return None
    path = Path(root) / "icews05-15"
    return path if all((path / f"{s}.txt").is_file() for s in ("train", "valid", "test")) else None


@pytest.fixture(scope="session")
def icews():
    """ICEWS05-15, loaded once; skipped (with the reason) when the data directory is absent."""
    path = icews_dir()
    if path is None:
        pytest.skip("ICEWS05-15 not found: set ROTMEM_DATA_DIR to a folder holding icews05-15/")
    from rotmem import load_dataset

    return load_dataset(path)


@pytest.fixture(scope="session")
def synthetic():
    return synthetic_kg()
