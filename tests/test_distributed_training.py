"""``rotmem fit`` / ``validate`` on 2 CPU processes (Lightning DDP over gloo) against one process.

Runs the command a user runs (``python -m rotmem.cli fit ... --trainer.devices 2 --trainer.strategy
ddp``), so the second rank is started by Lightning re-running the command line. One process trains
for an epoch (A1) and resumes for a second (A2) with a global batch of 200; the 2-rank runs resume
A1's checkpoint with 100 facts per rank, plain DDP (B) and with the entity table sharded (D), and
validate A2's checkpoint (V, W).

Tolerances: DDP averages two half-batch gradients where one process sums the whole batch, and the
sharded loss combines two log-sum-exps: float32 rounding apart, growing slowly over steps; 1e-5
relative on the loss over 8 Adagrad steps (measured: below 3e-7). Evaluation metrics are equal
exactly: the same facts' ranks, gathered without the sampler's repeats, in the same order.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

COMMON = [
    "--config", "synthetic",
    "--trainer.accelerator", "cpu",
    "--trainer.enable_progress_bar", "false",
    "--model.family.speed", "constant", "--model.gate_path", "null",
    "--model.family.dim", "32", "--model.time_weight", "0", "--data.num_negative_times", "0",
]  # fmt: skip
TRAIN = [
    "--trainer.limit_train_batches",
    "8",
    "--trainer.check_val_every_n_epoch",
    "1",
    "--trainer.log_every_n_steps",
    "1",
]
DDP = ["--trainer.devices", "2", "--trainer.strategy", "ddp", "--data.batch_size", "100"]
ONE = ["--trainer.devices", "1", "--data.batch_size", "200"]
ROOT = Path(__file__).resolve().parents[1]
LOSS_TOLERANCE = 1e-5


pytestmark = pytest.mark.slow


def rotmem(out: Path, *args: str) -> Path:
    """Run ``python -m rotmem.cli`` with ``args``, logging under ``out``; the run's version folder."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "rotmem.cli", *args, "--trainer.logger.init_args.save_dir", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return out / "synthetic" / "version_0"


def metrics(run: Path) -> tuple[dict[int, float], list[dict[str, str]]]:
    """Per-step training loss and the validation rows of a run's metrics.csv."""
    with open(run / "metrics.csv") as handle:
        rows = list(csv.DictReader(handle))
    steps = {int(r["step"]): float(r["train/loss_step"]) for r in rows if r.get("train/loss_step")}
    return steps, [
        {k: v for k, v in r.items() if k.startswith("val/") and v} for r in rows if r.get("val_mrr")
    ]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """A1: one epoch; A2: resumed for a second (the reference trajectory and checkpoints)."""
    tmp = tmp_path_factory.mktemp("one")
    a1 = rotmem(tmp / "a1", "fit", *COMMON, *TRAIN, *ONE, "--trainer.max_epochs", "1")
    ckpt = a1 / "checkpoints" / "last.ckpt"
    a2 = rotmem(
        tmp / "a2", "fit", *COMMON, *TRAIN, *ONE, "--trainer.max_epochs", "2", "--ckpt_path", str(ckpt)
    )
    return ckpt, a2


def assert_same_trajectory(run: Path, reference: Path) -> None:
    steps, _ = metrics(run)
    expected, _ = metrics(reference)
    assert sorted(steps) == sorted(expected) == list(range(8, 16)), (sorted(steps), sorted(expected))
    for step, loss in expected.items():
        assert abs(steps[step] - loss) <= LOSS_TOLERANCE * abs(loss), f"step {step}: {steps[step]} vs {loss}"


@pytest.mark.slow
@pytest.mark.parametrize("sharded", [False, True], ids=["ddp", "entity-parallel"])
def test_two_ranks_resume_and_train_as_one_process(one_process, tmp_path, sharded):
    ckpt, reference = one_process
    extra = ["--model.entity_parallel", "true"] if sharded else []
    run = rotmem(
        tmp_path, "fit", *COMMON, *TRAIN, *DDP, *extra, "--trainer.max_epochs", "2", "--ckpt_path", str(ckpt)
    )
    assert_same_trajectory(run, reference)
    # the checkpoint holds the whole table and its optimizer state, as one process writes them
    saved = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    entity = saved["state_dict"]["model.entity"]
    assert entity.shape == (288, 32)
    assert saved["optimizer_states"][0]["state"][0]["sum"].shape == (288, 32)
    from rotmem import load_model

    assert torch.equal(load_model(str(run / "checkpoints" / "last.ckpt")).entity.detach(), entity)


@pytest.mark.slow
@pytest.mark.parametrize("sharded", [False, True], ids=["ddp", "entity-parallel"])
def test_two_rank_validation_equals_one_process_exactly(one_process, tmp_path, sharded):
    _, reference = one_process
    extra = ["--model.entity_parallel", "true"] if sharded else []
    ckpt = reference / "checkpoints" / "last.ckpt"
    run = rotmem(tmp_path, "validate", *COMMON, *DDP, *extra, "--ckpt_path", str(ckpt))
    (got,) = metrics(run)[1]
    expected = metrics(reference)[1][-1]
    assert len(got) == 24 and got == expected
