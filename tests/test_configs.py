"""The packaged configs: overlays merged onto their base, the old name ``icews05-15-cpu`` as an
alias, and every Phase-2 config building its model and data and training one step."""

from __future__ import annotations

from unittest import mock

import pytest
import pytorch_lightning as pl
import torch
import yaml

from lightning_modules.family_settings import class_path
from rotmem import configs
from rotmem.data import synthetic_kg
from rotmem.data.arrays import save_arrays
from rotmem.errors import UserInputError

PHASE2 = [name for name in configs.names() if not name.startswith(("gate-", "ablation-"))]


def test_an_overlay_is_merged_onto_its_base(tmp_path):
    (tmp_path / "base.yaml").write_text(
        "trainer:\n  max_epochs: 5\n  callbacks: [a, b]\nmodel:\n  dim: 8\n  lr: 0.1\n"
    )
    (tmp_path / "over.yaml").write_text("base: base.yaml\ntrainer:\n  callbacks: [c]\nmodel:\n  dim: 16\n")
    (tmp_path / "over2.yaml").write_text("base: over.yaml\nmodel:\n  lr: 0.5\n")
    merged = configs.resolve(tmp_path / "over2.yaml")
    assert merged.name == "over2.yaml" and merged != tmp_path / "over2.yaml"
    # mappings merge key by key; a list is replaced whole; the chain is followed
    assert yaml.safe_load(merged.read_text()) == {
        "trainer": {"max_epochs": 5, "callbacks": ["c"]},
        "model": {"dim": 16, "lr": 0.5},
    }
    assert configs.resolve(tmp_path / "base.yaml") == tmp_path / "base.yaml"  # not an overlay: as is
    (tmp_path / "loop.yaml").write_text("base: loop.yaml\n")
    with pytest.raises(UserInputError, match="its base chain comes back to"):
        configs.resolve(tmp_path / "loop.yaml")
    (tmp_path / "lost.yaml").write_text("base: nowhere\n")
    with pytest.raises(FileNotFoundError, match="config 'nowhere': no such file"):
        configs.resolve(tmp_path / "lost.yaml")


def test_a_packaged_overlay_is_its_base_plus_a_few_keys():
    day = yaml.safe_load(configs.resolve("icews05-15-romem-complex-day").read_text())
    base = yaml.safe_load(configs.resolve("icews05-15-romem-complex").read_text())
    family = base["model"]["family"]
    family["init_args"] |= {"day_table": True}
    assert day["model"] == base["model"]
    assert day["trainer"]["logger"]["init_args"]["name"] == "icews05-15-romem-complex-day"
    tnt = yaml.safe_load(configs.resolve("icews05-15-tntcomplex-history-extrapolation").read_text())
    romem = yaml.safe_load(configs.resolve("icews05-15-romem-complex-extrapolation").read_text())
    assert tnt["model"]["history"] == romem["model"]["history"]
    assert romem["model"]["history"]["causal"] and "causal" not in romem["model"]["family"]["init_args"]


def test_the_old_cpu_preset_name_is_an_alias():
    new = configs.resolve("icews05-15-chronor-dim128")
    for old in ("icews05-15-cpu", "icews05-15-cpu.yaml"):
        assert configs.resolve(old).read_text() == new.read_text()
    assert "icews05-15-cpu" not in configs.names() and "icews05-15-chronor-dim128" in configs.names()
    assert yaml.safe_load(new.read_text())["model"]["family"]["init_args"]["dim"] == 128


@pytest.fixture(scope="module")
def tiny_graph(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny")
    save_arrays(synthetic_kg(num_people=30, num_cities=6, num_companies=4, num_countries=3).kg, folder)
    return folder


@pytest.mark.parametrize(
    "names", [[name] for name in PHASE2] + [["icews05-15-cpu", "ablation-learned-alpha"]]
)
def test_every_phase2_config_builds_and_trains_a_step(names, tiny_graph):
    from lightning_modules.cli import RoMemCLI
    from lightning_modules.kg_data import TemporalKGDataModule
    from lightning_modules.phase2 import Phase2Module

    paths = [configs.resolve(name) for name in names]
    args = [arg for path in paths for arg in ("--config", str(path))]
    merged = {}
    for path in paths:
        merged = configs.merge(merged, yaml.safe_load(path.read_text()))
    family = merged["model"]["family"]
    if family["init_args"].get("speed") == "gate":  # no pretrained gate here: the same model at alpha = 1
        args += ["--model.family.speed", "constant", "--model.gate_path", "null"]
    args += ["--data.dataset", str(tiny_graph), "--data.batch_size", "64"]
    with mock.patch("sys.argv", ["rotmem"]):
        cli = RoMemCLI(Phase2Module, TemporalKGDataModule, args=args, run=False, save_config_callback=None)
    trainer = pl.Trainer(
        max_steps=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
    )
    before = {name: p.detach().clone() for name, p in cli.model.named_parameters()}
    trainer.fit(cli.model, datamodule=cli.datamodule)
    assert trainer.global_step == 1
    after = dict(cli.model.named_parameters())
    assert all(torch.isfinite(p).all() for p in after.values())
    assert any(not torch.equal(before[name], after[name]) for name in before)  # the step moved weights
    saved = cli.model.hparams["family"]  # the family's class and arguments, as the config gives them
    assert saved["class_path"] == family["class_path"] == class_path(type(cli.model.model))
    for key in ("day_table", "dim"):
        if key in family["init_args"]:
            assert saved["init_args"][key] == family["init_args"][key], key
    history = merged["model"].get("history")  # the history block, built and attached once
    assert (cli.model.model.history is None) == (history is None)
    for key, value in (history or {}).items():
        assert cli.model.hparams["history"][key] == value, key
