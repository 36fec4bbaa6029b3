"""``benchmarks/gpu_check.sh --dry-run`` on the CPU: every step's command line parses and starts,
so a GPU lease is never spent finding a typo."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import icews_dir

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("env", "build", "tests", "eval", "epoch-day", "epoch-tnt", "kernels")


def test_worst_case_fits_six_minutes_by_construction():
    """Every command the script runs has a time limit, and the limits (the epoch step's twice),
    plus each step's kill grace, add up to at most 360 s."""
    text = (ROOT / "benchmarks/gpu_check.sh").read_text()
    steps = [int(s) for s in re.findall(r"\bstep \S+ (\d+) ", text)]
    others = [int(s) for s in re.findall(r"\btimeout (\d+) ", text)]
    epoch = int(re.search(r'step "\$name" (\d+) ', text).group(1))
    grace = int(re.search(r"KILL_AFTER=(\d+)", text).group(1))
    assert len(steps) == len(STEPS) - 1  # the two epoch steps share one call
    worst = sum(steps) + epoch + sum(others) + len(STEPS) * grace
    assert worst <= 360, f"worst case {worst} s"
    assert f"total       {worst - len(STEPS) * grace}" in text  # the header says what the code does


@pytest.mark.slow
def test_dry_run_starts_every_step(tmp_path):
    if icews_dir() is None:
        pytest.skip("the eval and epoch steps read ICEWS05-15: set ROTMEM_DATA_DIR")
    env = dict(os.environ, OUT=str(tmp_path), PYTHON=sys.executable)
    env.pop("TRITON_INTERPRET", None)  # the script's own pytest sets it, as the suite does
    result = subprocess.run(
        ["bash", str(ROOT / "benchmarks/gpu_check.sh"), "--dry-run"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    summary = (tmp_path / "summary.txt").read_text()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for name in STEPS:
        assert re.search(rf"== {name}: rc=0 in \d+ s", summary), f"step {name}:\n{summary}"
    # How long the dry run takes is not asserted: it is mostly interpreter start-up and imports, which
    # depend on the machine and its load (88 s on 2 quiet AVX2 cores, 105 s loaded); summary.txt has it.
