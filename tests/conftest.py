"""Shared fixtures: the data directory (``$ROTMEM_DATA_DIR``) and the synthetic graph; the GPU check's
subset (``--gpu-subset``). The ops' ``backend`` and ``cpu_isa`` fixtures are in ``tests/ops/conftest.py``."""

from __future__ import annotations

import os
from pathlib import Path

import torch

if not torch.cuda.is_available():  # before anything imports triton: its kernels run interpreted
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from rotmem.data import synthetic_kg  # noqa: E402
from tests.postgres_server import postgres_dsn  # noqa: E402, F401  (a real Postgres for the memory tests)


def icews_dir() -> Path | None:
    """``$ROTMEM_DATA_DIR/icews05-15`` when it holds the three split files."""
    root = os.environ.get("ROTMEM_DATA_DIR")
    if not root:
        return None
    path = Path(root) / "icews05-15"
    return path if all((path / f"{s}.txt").is_file() for s in ("train", "valid", "test")) else None


@pytest.fixture(scope="session")
def icews():
    """ICEWS05-15, loaded once; skipped (with the reason) when the data directory is absent, or a
    failure under ``ROTMEM_REQUIRE_ICEWS=1`` (CI, ``.ci/run``)."""
    path = icews_dir()
    if path is None:
        why = "ICEWS05-15 not found: set ROTMEM_DATA_DIR to a folder holding icews05-15/"
        if os.environ.get("ROTMEM_REQUIRE_ICEWS") == "1":
            pytest.fail(f"{why} (ROTMEM_REQUIRE_ICEWS=1)")
        pytest.skip(why)
    from rotmem import load_dataset

    return load_dataset(path)


@pytest.fixture(scope="session")
def synthetic():
    return synthetic_kg()


# --- the GPU check's subset (benchmarks/gpu_check.py: 45 s on one GPU) -------------------------
GPU_SUBSET_PER_CASE = 3  # parametrizations kept per test function and CUDA backend: 2-3 shapes
ERROR_TEST_WORDS = ("error", "refuse", "reject", "bad", "names", "range")


def pytest_addoption(parser):
    parser.addoption(
        "--gpu-subset",
        action="store_true",
        help="only the CUDA cases: each test's first 3 per backend and dtype-free shape, every error test",
    )


def pytest_collection_modifyitems(config, items):
    """``--gpu-subset``: keep the items that run on CUDA (a CUDA backend or device among their
    parameters), at most ``GPU_SUBSET_PER_CASE`` per test function and CUDA backend, and every one of
    an error test (its name says so: ``ERROR_TEST_WORDS``)."""
    if not config.getoption("--gpu-subset"):
        return
    kept, deselected, seen = [], [], {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        ids = callspec.id if callspec is not None else ""
        name = item.originalname if hasattr(item, "originalname") else item.name
        if "cuda" not in ids:
            deselected.append(item)
            continue
        params = callspec.params
        case = (item.path, name, str(params.get("backend", params.get("device", params.get("name", "")))))
        seen[case] = seen.get(case, 0) + 1
        if seen[case] <= GPU_SUBSET_PER_CASE or any(word in name for word in ERROR_TEST_WORDS):
            kept.append(item)
        else:
            deselected.append(item)
    config.hook.pytest_deselected(items=deselected)
    items[:] = kept
