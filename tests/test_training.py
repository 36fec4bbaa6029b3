"""Phase-2 training with Lightning on the synthetic KG: loss goes down, MRR beats random, checkpoints load."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch

from lightning_modules.kg_data import TemporalKGDataModule
from lightning_modules.phase2 import Phase2Module
from rotmem import evaluate, load_model
from rotmem.data import synthetic_kg
from rotmem.losses import one_vs_all_loss, time_contrastive_loss
from rotmem.models import HistorySpec, RoMem, RoMemComplEx, TNTComplEx


@pytest.fixture(scope="module")
def small_kg():
    return synthetic_kg(num_people=60, num_cities=10, num_companies=8, num_countries=4, seed=1).kg


def make(kg, **model_args):
    data = TemporalKGDataModule(kg=kg, batch_size=256, eval_batch_size=512, num_negative_times=4)
    args = dict(dim=32, k=1, speed="learned", init_s=0.01) | model_args
    model = Phase2Module(RoMem(data.num_entities, data.num_relations, tau0=data.tau0, **args), lr=0.1)
    return data, model


def trainer(tmp_path, epochs: int) -> pl.Trainer:
    return pl.Trainer(
        max_epochs=epochs,
        default_root_dir=tmp_path,
        logger=pl.loggers.CSVLogger(tmp_path),
        enable_progress_bar=False,
        enable_model_summary=False,
        gradient_clip_val=1.0,
        check_val_every_n_epoch=epochs,
        callbacks=[pl.callbacks.ModelCheckpoint(monitor="val/time-aware/mrr", mode="max", save_last=True)],
    )


@pytest.mark.slow
def test_training_lowers_the_loss_and_beats_a_random_model(tmp_path, small_kg):
    torch.manual_seed(0)
    data, module = make(small_kg)
    random_mrr = evaluate(module.model, small_kg, "test")["mrr"]
    batch = data.make_batch(list(range(512)))
    before = one_vs_all_loss(module.model, batch["facts"]).item()
    trainer(tmp_path, epochs=12).fit(module, datamodule=data)
    after = one_vs_all_loss(module.model, batch["facts"]).item()
    trained_mrr = evaluate(module.model, small_kg, "test")["mrr"]
    assert after < 0.7 * before
    assert trained_mrr > 0.3 and trained_mrr > 4 * random_mrr, (random_mrr, trained_mrr)
    static_mrr = evaluate(module.model, small_kg, "test", filter="static")["mrr"]
    assert static_mrr >= trained_mrr - 1e-9  # the static filter removes more candidates


def test_checkpoint_save_load_gives_identical_scores(tmp_path, small_kg):
    data, module = make(small_kg, speed="constant")
    fit = trainer(tmp_path, epochs=1)
    fit.fit(module, datamodule=data)
    loaded = load_model(fit.checkpoint_callback.best_model_path)
    h, r, t, day = small_kg.test[:50].unbind(1)
    expected = module.model.eval().score_tails(h, r, day.double())
    torch.testing.assert_close(loaded.score_tails(h, r, day.double()), expected, rtol=0, atol=0)
    assert loaded.entities == small_kg.entities and loaded.tau0 == float(small_kg.first_day)
    assert loaded.entity_ids([small_kg.entities[5]]).tolist() == [5]


def test_resume_from_checkpoint_continues_the_epoch_count(tmp_path, small_kg):
    data, module = make(small_kg)
    first = trainer(tmp_path / "a", epochs=1)
    first.fit(module, datamodule=data)
    data2, module2 = make(small_kg)
    second = trainer(tmp_path / "b", epochs=2)
    second.fit(module2, datamodule=data2, ckpt_path=first.checkpoint_callback.last_model_path)
    assert second.current_epoch == 2
    assert second.global_step == 2 * first.global_step


def test_time_contrastive_loss_prefers_the_true_time(small_kg):
    data, module = make(small_kg)
    batch = data.make_batch(list(range(64)))
    facts, negatives = batch["facts"], batch["negative_days"]
    assert negatives.shape == (64, 4)
    far = (negatives[:, -1] - facts[:, 3].double()).abs()
    torch.testing.assert_close(far, torch.full_like(far, 365.0))
    loss = time_contrastive_loss(module.model, facts, negatives, sigma_years=0.5)
    assert torch.isfinite(loss) and loss > 0


def test_self_adversarial_distmult_variant_trains(tmp_path, small_kg):
    data = TemporalKGDataModule(kg=small_kg, batch_size=256, num_negative_entities=16)
    batch = data.make_batch(list(range(32)))
    assert batch["negative_tails"].shape == (32, 16)
    module = Phase2Module(
        RoMem(data.num_entities, data.num_relations, tau0=data.tau0, dim=32, k=1, backbone="distmult"),
        loss="self_adversarial",
        optimizer="adam",
        lr=1e-2,
        regularizer="modulus3",
        regularizer_weight=1e-5,
    )
    before = evaluate(module.model, small_kg, "valid")["mrr"]
    trainer(tmp_path, epochs=3).fit(module, datamodule=data)
    assert evaluate(module.model, small_kg, "valid")["mrr"] > before


def test_the_checkpoint_metric_of_a_model_whose_scores_all_tie_is_about_one_over_n(tmp_path, small_kg):
    data, module = make(small_kg, speed="constant")
    with torch.no_grad():
        for table in (module.model.entity, module.model.w, module.model.w_hat):
            table.zero_()
    (metrics,) = trainer(tmp_path, epochs=1).validate(module, datamodule=data, verbose=False)
    n = small_kg.num_entities
    assert 2 / (n + 1) <= metrics["val/time-aware/mrr"] < 3 / n  # realistic ties: (1 + N')/2
    assert metrics["val/time-aware/optimistic/mrr"] == 1.0  # what the old default reported


def test_tntcomplex_trains_through_the_same_module_and_checkpoint(tmp_path, small_kg):
    data = TemporalKGDataModule(kg=small_kg, batch_size=256, num_negative_times=0)
    family = TNTComplEx(
        data.num_entities, data.num_relations, tau0=data.tau0, num_days=data.num_days, dim=32, init_scale=0.1
    )
    module = Phase2Module(
        family,
        regularizer="modulus3",
        regularizer_weight=1e-3,
        smoothness_weight=1.0,
        time_weight=0.0,
    )
    before = evaluate(module.model, small_kg, "valid")["mrr"]
    fit = trainer(tmp_path, epochs=4)
    fit.fit(module, datamodule=data)
    assert evaluate(module.model, small_kg, "valid")["mrr"] > before + 0.1
    loaded = load_model(fit.checkpoint_callback.best_model_path)
    assert type(loaded).__name__ == "TNTComplEx" and loaded.time.shape[0] == data.num_days
    h, r, day = small_kg.test[:20, 0], small_kg.test[:20, 1], small_kg.test[:20, 3]
    torch.testing.assert_close(loaded.score_tails(h, r, day), module.model.eval().score_tails(h, r, day))


@pytest.mark.slow
def test_romem_complex_with_history_trains_and_reloads(tmp_path, small_kg):
    data = TemporalKGDataModule(kg=small_kg, batch_size=256, num_negative_times=0)
    family = RoMemComplEx(
        data.num_entities,
        data.num_relations,
        tau0=data.tau0,
        num_days=data.num_days,
        dim=32,
        init_scale=0.1,
        init_s=0.01,
        day_table=True,
    ).attach_history(HistorySpec(slot_windows=(1, 30, 365), pair_windows=(7,)))
    module = Phase2Module(
        family,
        regularizer="modulus3",
        regularizer_weight=1e-3,
        smoothness_weight=1.0,
        time_weight=0.0,
    )
    fit = trainer(tmp_path, epochs=3)
    fit.fit(module, datamodule=data)
    assert not module.model.history.is_empty  # indexed from the training split at setup
    assert evaluate(module.model, small_kg, "valid")["mrr"] > 0.3
    loaded = load_model(fit.checkpoint_callback.best_model_path)
    h, r, day = small_kg.test[:20, 0], small_kg.test[:20, 1], small_kg.test[:20, 3]
    torch.testing.assert_close(loaded.score_tails(h, r, day), module.model.eval().score_tails(h, r, day))
