"""A Phase-2 run killed mid-epoch and resumed with ``rotmem fit --ckpt_path last`` ends exactly where
a run that was never stopped does: same weights, bit for bit, so the same test metrics.

What makes it exact: the configs write ``last.ckpt`` every few training steps (a second
ModelCheckpoint), the training loader's state (the shuffle's and the negative sampler's generator at
the start of the epoch, and the batches handed out since) travels in the checkpoint
(``lightning_modules.resumable_loader``), and ``--ckpt_path last`` finds the newest ``last.ckpt`` of
the earlier runs (each run logs into a new ``version_N``). The steps after the last checkpoint are
trained again, from the same state, on the same batches.
"""

from __future__ import annotations

import json

import pytest
import torch
from pytorch_lightning.callbacks import Callback

from lightning_modules.cli import run_lightning_cli
from lightning_modules.resumable_loader import ResumableDataLoader
from rotmem import evaluate, load_model
from rotmem.data import synthetic_kg

STEPS_PER_EPOCH = 68  # 33,895 synthetic training facts in batches of 500 (rotmem/configs/synthetic.yaml)
CHECKPOINT_EVERY = 20  # the config's step checkpoints
KILL_AT = STEPS_PER_EPOCH + 30  # step 98, in the second epoch, 18 steps after the checkpoint of step 80


class KillAtStep(Callback):
    """Stops the run with an error at a training step, before that step's checkpoint is written
    (Lightning runs checkpoint callbacks after the others), like a process killed mid-step."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError(f"killed for the test at step {self.step}")


def fit(root, *extra: str) -> None:
    """``rotmem fit --config synthetic`` (its callbacks, its checkpoints), small and without a gate."""
    from rotmem.cli import resolve_configs

    argv = ["fit", "--config", "synthetic", "--model.family.speed", "constant", "--model.gate_path", "null"]
    argv += ["--model.family.dim", "16", "--trainer.max_epochs", "2"]
    argv += ["--trainer.check_val_every_n_epoch", "2"]
    argv += ["--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false"]
    argv += ["--trainer.default_root_dir", str(root), "--trainer.logger.init_args.save_dir", str(root)]
    run_lightning_cli(resolve_configs(argv + list(extra)))


KILLER = [
    "--trainer.callbacks+="
    + json.dumps({"class_path": f"{__name__}.KillAtStep", "init_args": {"step": KILL_AT}})
]


def final_model(root):
    # the newest of the two ModelCheckpoints' last files (the step one's last.ckpt is from step 120,
    # the epoch one's last-v1.ckpt from the end), as ``--ckpt_path last`` picks
    last = max(root.glob("synthetic/version_*/checkpoints/last*.ckpt"), key=lambda path: path.stat().st_mtime)
    checkpoint = torch.load(last, weights_only=True)
    assert checkpoint["global_step"] == 2 * STEPS_PER_EPOCH and checkpoint["epoch"] == 1
    return load_model(last)


@pytest.mark.slow
def test_killed_mid_epoch_and_resumed_with_ckpt_path_last_ends_as_an_uninterrupted_run(tmp_path):
    fit(tmp_path / "straight")
    with pytest.raises(RuntimeError, match="killed for the test at step 98"):
        fit(tmp_path / "killed", *KILLER)
    saved = torch.load(tmp_path / "killed/synthetic/version_0/checkpoints/last.ckpt", weights_only=True)
    assert saved["global_step"] == 80  # the newest checkpoint is mid-epoch, 18 steps before the kill
    fit(tmp_path / "killed", "--ckpt_path", "last")
    assert (tmp_path / "killed/synthetic/version_1").is_dir()  # the resumed run logs on its own

    straight, resumed = final_model(tmp_path / "straight"), final_model(tmp_path / "killed")
    for (name, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items(), strict=True):
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b, name  # bit for bit
    kg = synthetic_kg().kg
    for name in ("time-aware", "static"):
        assert evaluate(straight, kg, "test", filter=name) == evaluate(resumed, kg, "test", filter=name)


def test_ckpt_path_last_with_nothing_to_resume_starts_fresh(tmp_path):
    """As in Lightning: a restart script can always pass --ckpt_path last (it warns and starts at 0)."""
    with pytest.warns(UserWarning, match="no last checkpoint available"):
        fit(tmp_path, "--ckpt_path", "last", "--trainer.max_steps", "1")


def loader(seed: int = 0) -> ResumableDataLoader:
    """10 shuffled items in batches of 3, each batch with a draw from the same generator (a negative)."""
    generator = torch.Generator().manual_seed(seed)

    def collate(items):
        return torch.tensor(items), torch.rand(2, generator=generator)

    return ResumableDataLoader(range(10), batch_size=3, shuffle=True, collate_fn=collate, generator=generator)


def as_lists(batches) -> list:
    return [(items.tolist(), noise.tolist()) for items, noise in batches]


def test_the_loader_resumes_mid_epoch_and_after_an_epoch_on_the_same_batches():
    straight = loader()
    epochs = [as_lists(straight), as_lists(straight)]
    first = loader()
    batches = iter(first)
    seen = as_lists([next(batches), next(batches)])
    state = first.state_dict()  # two of four batches handed out
    resumed = loader(seed=123)  # a new process: its generator is overwritten by the state
    resumed.load_state_dict(state)
    assert seen + as_lists(resumed) == epochs[0]
    end = resumed.state_dict()  # the epoch is over: the next starts from the generator now
    again = loader(seed=7)
    again.load_state_dict(end)
    assert as_lists(again) == epochs[1]
