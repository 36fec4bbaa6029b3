"""``python -m benchmarks.gpu_check --dry-run`` on the CPU: every step's command line parses and starts,
so a GPU lease is never spent finding a typo, and a broken step fails the dry run."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import icews_dir

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("build", "env", "tests", "eval", "epoch", "kernels")
# The dry run's CPU seconds (its own and its children's, as it reports them) at most: under a minute
# of wall time on a single core as slow as this bound allows, whatever the machine's load. 23 s on
# this project's 2-core AVX2 machine (loaded: its wall time was 70 s), so a machine half as fast
# per core still passes.
DRY_RUN_CPU_S = 60


def test_worst_case_fits_four_minutes_by_construction(tmp_path):
    """Every command the check runs has a time limit, and the limits add up to at most 240 s (issue 33:
    gpu_check v2 in at most 4 minutes, build included)."""
    from benchmarks import gpu_check

    steps = gpu_check.plan("python3", tmp_path, dry=False, device="cuda")
    assert tuple(s.name for s in steps) == STEPS
    others = [int(s) for s in re.findall(r"\btimeout=(\d+)", inspect.getsource(gpu_check.main))]
    worst = sum(s.limit_s for s in steps) + sum(others)
    assert len(others) == 2 and worst <= 240, f"worst case {worst} s"
    assert f"total       {worst:g}" in gpu_check.__doc__  # the header says what the code does


def run_dry(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, str]:
    env = dict(os.environ, OUT=str(tmp_path), PYTHON=sys.executable, **env)
    env.pop("TRITON_INTERPRET", None)  # the check's own pytest sets it, as the suite does
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_check", "--dry-run", *args],
        env=env, capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    return result, (tmp_path / "summary.txt").read_text()


@pytest.mark.slow
def test_dry_run_starts_every_step(tmp_path):
    if icews_dir() is None:
        pytest.skip("the eval and epoch steps read ICEWS05-15: set ROTMEM_DATA_DIR")
    result, summary = run_dry(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for name in STEPS:
        assert re.search(rf"== {name}: rc=0 in [\d.]+ s", summary), f"step {name}:\n{summary}"
    assert "tests: " in summary and " collected" in summary  # the test files were imported
    cpu = float(re.search(r"dry run: 6 steps in [\d.]+ s wall, ([\d.]+) s CPU", summary).group(1))
    assert cpu <= DRY_RUN_CPU_S, summary


@pytest.mark.slow
def test_a_broken_step_fails_the_dry_run(tmp_path):
    """The eval step with no data: the script exits 1 and the summary names the step."""
    result, summary = run_dry(tmp_path, "--steps", "env,eval", ROTMEM_DATA_DIR=str(tmp_path))
    assert result.returncode == 1, summary
    assert re.search(r"== env: rc=0 in", summary), summary
    assert re.search(r"== eval: rc=[1-9]\d* in", summary), summary
    assert "1 step(s) failed" in summary


@pytest.mark.slow
def test_each_kind_of_broken_command_fails_its_step(tmp_path):
    """Run in the one process, a misspelt Lightning option, a script's unknown flag, a missing module,
    an exception, a step past its limit and a command that is not Python each fail their own step
    only (``gpu_check.run_all``, as the dry run calls it), with the exit code the interpreter (or
    ``timeout``) would give; the good commands pass."""
    py = sys.executable
    fit = [py, "-m", "rotmem.cli", "fit", "--config", "synthetic", "--print_config"]
    steps = [
        ("fit-ok", 60, fit + ["--trainer.max_epochs", "1"]),
        ("fit-typo", 60, fit + ["--trainer.max_epochz", "1"]),
        ("script-ok", 60, [py, "-m", "rotmem.env"]),
        ("script-flag", 60, [py, "-m", "benchmarks.kernels", "--quick", "--budgett-s", "0"]),
        ("no-module", 60, [py, "-m", "rotmem.no_such_module"]),
        ("raises", 60, [py, "-c", "import sys; assert sys.argv == ['-c', 'x'], sys.argv; 1 / 0", "x"]),
        ("exit-3", 60, [py, "-c", "raise SystemExit(3)"]),
        ("too-long", 1, [py, "-c", "import time; time.sleep(30)"]),
        ("not-python", 60, ["false"]),
    ]
    code = "import json, sys; from benchmarks.gpu_check import Step, run_all; from pathlib import Path; "
    code += "run_all([Step(*s) for s in json.loads(sys.argv[1])], sys.executable, Path(sys.argv[2]), 2)"
    command = [py, "-c", code, json.dumps(steps), str(tmp_path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    rc = {name: (tmp_path / f"{name}.result").read_text().split(" in ")[0] for name, _, _ in steps}
    assert rc == {
        "fit-ok": "0", "fit-typo": "2", "script-ok": "0", "script-flag": "2", "no-module": "1",
        "raises": "1", "exit-3": "3", "too-long": "124 (timed out)", "not-python": "1",
    }, {name: (tmp_path / f"{name}.log").read_text()[-500:] for name in rc}  # fmt: skip
    assert "ZeroDivisionError" in (tmp_path / "raises.log").read_text()
    assert "max_epochz" in (tmp_path / "fit-typo.log").read_text()
    assert "--budgett-s" in (tmp_path / "script-flag.log").read_text()
    assert "torch" in (tmp_path / "script-ok.log").read_text()
