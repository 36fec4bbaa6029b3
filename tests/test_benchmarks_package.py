"""``benchmarks`` is a package run as ``python -m benchmarks.<name>``: its files never become top-level
modules, which would shadow PyPI packages of the same name (transformers imports ``kernels``)."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if '__name__ == "__main__"' in p.read_text())


def test_importing_the_benchmarks_leaves_sys_path_alone():
    before = list(sys.path)
    for name in ("harness", "kernels", "eval_speed", "gpu_check"):
        importlib.import_module(f"benchmarks.{name}")
    assert sys.path == before
    assert str(BENCHMARKS) not in sys.path
    spec = importlib.util.find_spec("kernels")  # PyPI's, where installed; never benchmarks/kernels.py
    assert spec is None or Path(spec.origin or "").parent != BENCHMARKS


def test_no_file_puts_a_folder_other_than_the_root_on_sys_path():
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in ("benchmarks", "tests", "rotmem", "lightning_modules")
        for path in (ROOT / folder).rglob("*.py")
        if path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if ("sys.path.insert(" in line or "sys.path.append(" in line) and "parents[1]))" not in line
    ]
    assert offenders == []


def test_no_top_level_module_of_the_tests_is_importable_from_site_packages():
    """A helper module of tests/ (on sys.path under pytest) must not share its name with an installed
    distribution's top-level module."""
    names = {p.stem for p in (ROOT / "tests").glob("*.py")} - {"conftest"}
    clashes = []
    for name in sorted(names):
        spec = importlib.util.find_spec(name)
        if spec is not None and Path(spec.origin or "").parent != ROOT / "tests":
            clashes.append(f"{name}: {spec.origin}")
    assert clashes == []


@pytest.mark.parametrize("script", SCRIPTS[:3] + SCRIPTS[-2:], ids=lambda p: p.stem)
def test_a_benchmark_run_as_a_file_says_how_to_run_it(script):
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == f"run it as: python -m benchmarks.{script.stem} (from the checkout's root)"


def test_every_module_with_a_main_runs_it_as_a_script():
    """A module that defines ``main`` and is run with ``python -m`` must call it: a missing
    ``if __name__ == "__main__"`` makes ``python -m benchmarks.<name>`` exit 0 having done nothing."""
    silent = [
        path.name
        for path in BENCHMARKS.glob("*.py")
        if f"python -m benchmarks.{path.stem}" in (text := path.read_text())
        and "\ndef main(" in text
        and '__name__ == "__main__"' not in text
    ]
    assert silent == []


@pytest.mark.parametrize("name", ["locomo", "state_update"])
def test_a_benchmark_module_prints_its_usage(name):
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and f"python -m benchmarks.{name}" in done.stdout, done.stderr[-2000:]


def test_every_runnable_benchmark_has_the_guard():
    assert len(SCRIPTS) >= 10  # the glob finds them (13 top-level scripts after the folds)
    unguarded = [p.name for p in SCRIPTS if "if not __package__:" not in p.read_text()]
    assert unguarded == []
