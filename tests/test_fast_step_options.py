"""The options for a fast step: the loader's ``drop_last`` (every step the same shapes) and
``num_workers`` (batches and their history counts made in other processes while the step runs), the
module's ``compile_step`` and ``matmul_precision``, and the step's profile (``StepProfile``)."""

from __future__ import annotations

import dataclasses

import pytest
import pytorch_lightning as pl
import torch

from lightning_modules.kg_data import TemporalKGDataModule
from lightning_modules.phase2 import Phase2Module
from rotmem.data import synthetic_kg
from rotmem.errors import BadSettingError
from rotmem.models import HistorySpec, TNTComplEx


@pytest.fixture(scope="module")
def kg():
    return synthetic_kg(num_people=60, num_cities=10, num_companies=8, num_countries=4, seed=1).kg


def test_workers_with_negatives_are_refused(kg):
    with pytest.raises(BadSettingError, match="data.num_workers: 2 needs batches without negatives"):
        TemporalKGDataModule(kg=kg, num_workers=2, num_negative_times=4)


def test_drop_last_gives_full_batches_only(kg):
    data = TemporalKGDataModule(kg=kg, batch_size=100, num_negative_times=0, drop_last=True)
    sizes = [batch["facts"].shape[0] for batch in data.train_dataloader()]
    assert sizes == [100] * (kg.train.shape[0] // 100)


def test_a_worker_makes_the_batches_and_their_history_counts(kg, tmp_path):
    data = TemporalKGDataModule(kg=kg, batch_size=256, num_negative_times=0, num_workers=1)
    family = TNTComplEx(
        data.num_entities,
        data.num_relations,
        tau0=data.tau0,
        num_days=data.num_days,
        dim=16,
    ).attach_history(HistorySpec(slot_windows=(1, 30)))
    module = Phase2Module(family, regularizer="modulus3", regularizer_weight=1e-3)
    trainer = pl.Trainer(
        max_epochs=1,
        default_root_dir=tmp_path,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        accelerator="cpu",
    )
    checked = []

    class Spy(pl.Callback):  # the worker's counts are the model's own counts of the batch's facts
        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            want = module.model.history.training_counts(batch["facts"])
            checked.append(all(torch.equal(a, b) for a, b in zip(batch["history_counts"], want, strict=True)))

    trainer.callbacks.append(Spy())
    trainer.fit(module, datamodule=data)
    assert checked == [True] * -(-kg.train.shape[0] // 256)


def test_step_profile_reports_the_window_and_its_syncs(kg, tmp_path):
    from lightning_modules.step_profile import StepProfile

    data = TemporalKGDataModule(kg=kg, batch_size=128, num_negative_times=0)
    family = TNTComplEx(data.num_entities, data.num_relations, tau0=data.tau0, num_days=data.num_days, dim=8)
    profile = StepProfile(start=1, steps=2, rows=5, out=str(tmp_path / "profile.txt"))
    trainer = pl.Trainer(
        max_steps=4, default_root_dir=tmp_path, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0, accelerator="cpu",
        callbacks=[profile],
    )  # fmt: skip
    trainer.fit(Phase2Module(family, regularizer="modulus3"), datamodule=data)
    text = (tmp_path / "profile.txt").read_text()
    assert text.startswith("2 training steps from step 1: ")
    assert "syncing ops (" in text and "Self CPU time total" in text


@pytest.mark.slow
def test_a_compiled_step_trains_as_the_eager_one(kg, tmp_path):
    """``compile_step=True``: the same losses, step by step, as the eager module (inductor's fused
    kernels sum in other orders: float32 rounding apart, 1e-5 relative over four steps)."""
    losses = {}
    for compiled in (False, True):
        data = TemporalKGDataModule(
            kg=kg, batch_size=256, num_negative_times=0, shuffle=False, drop_last=True
        )
        torch.manual_seed(0)
        family = TNTComplEx(
            data.num_entities, data.num_relations, tau0=data.tau0, num_days=data.num_days, dim=16,
        ).attach_history(HistorySpec(slot_windows=(1, 30)))  # fmt: skip
        module = Phase2Module(family, regularizer="modulus3", regularizer_weight=1e-3, compile_step=compiled)
        seen: list[float] = []

        class Record(pl.Callback):
            def __init__(self, into: list[float]):
                self.into = into

            def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
                self.into.append(float(outputs["loss"]))

        trainer = pl.Trainer(
            max_steps=4, default_root_dir=tmp_path, logger=False, enable_checkpointing=False,
            enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0, accelerator="cpu",
            callbacks=[Record(seen)],
        )  # fmt: skip
        trainer.fit(module, datamodule=data)
        losses[compiled] = seen
    assert len(losses[True]) == 4
    torch.testing.assert_close(torch.tensor(losses[True]), torch.tensor(losses[False]), rtol=1e-5, atol=0)


def test_an_unknown_matmul_precision_is_named():
    family = TNTComplEx(10, 2, tau0=0.0, num_days=5, dim=4)
    with pytest.raises(BadSettingError, match="model.matmul_precision: unknown 'tf32'; expected one of"):
        Phase2Module(family, matmul_precision="tf32")


def test_steps_skip_the_per_call_id_checks_off_the_cpu_only_inside_the_block(monkeypatch):
    from rotmem.ops import id_checks

    monkeypatch.setenv("ROTMEM_CHECK_IDS", "1")
    cuda = torch.device("cuda")  # a device object only: no GPU needed to ask
    with id_checks.unchecked_on_device():
        assert not id_checks.enabled(cuda) and id_checks.enabled(torch.device("cpu"))
    assert id_checks.enabled(cuda)


def test_training_facts_outside_the_model_are_named_at_setup(kg, tmp_path):
    """A hand-made graph whose facts name an entity past its vocabulary fails at setup, on the host,
    in one line: the steps then skip the per-call checks safely."""
    train = kg.train.clone()
    train[7, 2] = kg.num_entities
    data = TemporalKGDataModule(kg=dataclasses.replace(kg, train=train), batch_size=256, num_negative_times=0)
    family = TNTComplEx(data.num_entities, data.num_relations, tau0=data.tau0, num_days=data.num_days, dim=4)
    trainer = pl.Trainer(
        max_steps=1, default_root_dir=tmp_path, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
    )  # fmt: skip
    with pytest.raises(IndexError, match=rf"train split: tail\[7\] = {kg.num_entities} is out of range"):
        trainer.fit(Phase2Module(family), datamodule=data)
