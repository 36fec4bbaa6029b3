"""``benchmarks/kernels.py --quick`` runs end to end in seconds and writes its CSV, summary and chart."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_kernels_benchmark(monkeypatch):
    spec = importlib.util.spec_from_file_location("kernels_benchmark", ROOT / "benchmarks" / "kernels.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_kernels_quick(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    kernels = load_kernels_benchmark(monkeypatch)
    assert (
        kernels.main(
            ["--quick", "--device", "cpu", "--providers", "eager,native", "--out-dir", str(tmp_path)]
        )
        == 0
    )
    with (tmp_path / "kernels_cpu.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert set(rows[0]) == set(kernels.COLUMNS)
    eager = {(r["op"], r["mode"]) for r in rows if r["provider"] == "eager"}
    for op in kernels.OPS:
        modes = ("forward",) if op == "score_all" else kernels.MODES
        assert {(op, mode) for mode in modes} <= eager, f"missing eager rows for {op}"
    assert all(float(r["ms_median"]) > 0 for r in rows)
    step = next(
        r for r in rows if (r["op"], r["mode"], r["provider"]) == ("step", "forward+backward", "eager")
    )
    assert float(step["peak_mem_mb"]) > 0  # the step allocates logits, grads, ...
    assert float(next(r for r in rows if r["op"] == "copy")["gb_per_s"]) > 0
    assert (tmp_path / "kernels_cpu.png").stat().st_size > 0
    assert "made by: python" in capsys.readouterr().out
