"""The model family in a Phase-2 config (``model.family``: its class and its own arguments,
``lightning_modules.family_settings``): a misspelled argument, the old flat layout of configs and
command lines (one line naming the key, exit code 2), checkpoints of the old layout (they resume and
evaluate), and a config building the same model, seed for seed, as the old flat layout did."""

from __future__ import annotations

from unittest import mock

import pytest
import pytorch_lightning as pl
import torch
import yaml
from test_cli_errors import assert_one_line_error, rotmem
from test_cli_input_checks import run_main

from lightning_modules.family_settings import FLAT_KEYS, check_no_flat_keys, upgrade_hparams
from rotmem import configs, load_model
from rotmem.data import synthetic_kg
from rotmem.data.arrays import save_arrays
from rotmem.errors import UserInputError
from rotmem.models import build_model
from rotmem.models.checkpoint import family_arguments

ROMEM_ARGUMENTS = "dim, k, backbone, speed, init_scale, init_s, init_base, history_windows"


@pytest.fixture(scope="module")
def tiny_graph(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny")
    save_arrays(synthetic_kg(num_people=30, num_cities=6, num_companies=4, num_countries=3).kg, folder)
    return folder


def fit_args(out, graph, *extra: str) -> list[str]:
    """``rotmem fit`` on the synthetic preset over ``graph``, without a gate, writing under ``out``."""
    return [
        "fit", "--config", "synthetic", "--model.family.speed", "constant", "--model.gate_path", "null",
        "--data.dataset", str(graph), "--data.batch_size", "64", "--trainer.max_steps", "2",
        "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false",
        "--trainer.default_root_dir", str(out), "--trainer.logger.init_args.save_dir", str(out), *extra,
    ]  # fmt: skip


# --- a misspelled family argument ---------------------------------------------------------------
@pytest.mark.slow  # a fresh process: seconds to import torch and Lightning
def test_a_misspelled_family_argument_through_the_console_script(tmp_path, tiny_graph):
    out = tmp_path / "runs"
    run = rotmem(*fit_args(out, tiny_graph, "--model.family.dimm", "8"), cwd=tmp_path)
    assert_one_line_error(
        run, f"model.family: RoMem takes no argument 'dimm' (its arguments: {ROMEM_ARGUMENTS}"
    )
    assert not out.exists()


def test_a_misspelled_family_argument_in_a_config_file(tmp_path, capsys, tiny_graph):
    overlay = tmp_path / "typo.yaml"
    overlay.write_text("model:\n  family:\n    init_args:\n      history_window: [1, 7]\n")
    out = tmp_path / "runs"
    run = run_main(capsys, *fit_args(out, tiny_graph, "--config", str(overlay)))
    assert_one_line_error(run, "model.family: RoMem takes no argument 'history_window' (its arguments: dim")
    # an argument of another family: TNTComplEx has no k
    run = run_main(
        capsys, *fit_args(out, tiny_graph, "--model.family", "TNTComplEx", "--model.family.k", "2")
    )
    assert_one_line_error(
        run, "model.family: TNTComplEx takes no argument 'k' (its arguments: dim, init_scale"
    )
    assert not out.exists()


# --- the old flat layout --------------------------------------------------------------------------
def test_old_flat_keys_on_the_command_line_name_the_key_and_its_new_place(tmp_path, capsys, tiny_graph):
    out = tmp_path / "runs"
    run = run_main(capsys, *fit_args(out, tiny_graph, "--model.dim", "8"))
    assert_one_line_error(
        run,
        "--model.dim: 'dim' is an argument of the model family now",
        "--model.family.dim on the command line",
    )
    run = run_main(capsys, *fit_args(out, tiny_graph, "--model.history_windows=[1, 7]"))
    assert_one_line_error(
        run, "--model.history_windows: 'history_windows' is an argument of the model family"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    "model, expected",
    [
        ({"family": "tntcomplex", "lr": 0.1}, "model.family: 'tntcomplex' is the old layout"),
        ({"dim": 64, "lr": 0.1}, "model.dim: 'dim' is an argument of the model family now"),
    ],
)
def test_an_old_flat_config_file_names_the_key(tmp_path, capsys, tiny_graph, model, expected):
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump({"model": model}))
    run = run_main(capsys, *fit_args(tmp_path / "runs", tiny_graph, "--config", str(old)))
    assert_one_line_error(run, f"{old}: {expected}")


def test_every_old_flat_key_is_caught():
    # every family's arguments but the linked ones and the training facts
    assert {"dim", "k", "backbone", "speed", "init_s", "day_table", "hold_rotation", "history_causal"} <= set(
        FLAT_KEYS
    )
    assert not {"num_entities", "tau0", "num_days", "facts", "lr", "gate_path"} & set(FLAT_KEYS)
    for key in FLAT_KEYS:
        with pytest.raises(
            UserInputError, match=f"--model.{key}: '{key}' is an argument of the model family"
        ):
            check_no_flat_keys(["--model.lr", "0.1", f"--model.{key}", "1"])
    for old in (["--model.family", "tntcomplex"], ["--model.family=romem-complex"]):
        with pytest.raises(UserInputError, match="--model.family: '.*' is the old layout; .* --model.family"):
            check_no_flat_keys(old)
    check_no_flat_keys(["--model.lr", "0.1", "--model.family.dim", "8", "--model.family", "TNTComplEx"])


# --- checkpoints of the old layout ------------------------------------------------------------------
def old_hparams(new: dict) -> dict:
    """A checkpoint's hyper-parameters as the old ``Phase2Module`` saved them: every argument of the
    31-argument union, flat (its defaults where the family took no such argument)."""
    family = new["family"]["init_args"]
    old = dict(family=new["family"]["class_path"].rpartition(".")[2].lower(), k=3, backbone="chronor")
    old |= dict(speed="constant", init_scale=0.4, init_s=1.0, init_base=10000.0, day_table=False)
    old |= dict(history_windows=None, pair_windows=None, history_causal=False, history_eval_splits=None)
    old |= dict(hold_rotation=False) | {k: v for k, v in family.items() if k != "history_eval_splits"}
    return old | {k: v for k, v in new.items() if k != "family"}


def newest(paths):
    """The newest of the two ModelCheckpoints' last files (``--ckpt_path last`` picks it too)."""
    return max(paths, key=lambda path: path.stat().st_mtime)


def test_upgrade_hparams_builds_the_family_as_the_old_module_did():
    flat = dict(family="tntcomplex", num_entities=5, num_relations=2, first_day=100.0, num_days=7, dim=8)
    flat |= dict(k=3, speed="gate", gate_path="g.pt", init_scale=0.1, history_windows=[1], lr=0.5)
    flat |= dict(history_eval_splits=None, _instantiator="pytorch_lightning.cli.instantiate_module")
    upgraded = upgrade_hparams(flat)
    init_args = dict(num_entities=5, num_relations=2, dim=8, tau0=100.0, num_days=7, init_scale=0.1)
    assert upgraded["family"] == {
        "class_path": "rotmem.models.TNTComplEx",
        "init_args": init_args | {"history_windows": [1]},  # k and speed: not TNTComplEx's
    }
    assert upgraded["lr"] == 0.5 and upgraded["gate_path"] == "g.pt" and "dim" not in upgraded
    assert upgrade_hparams(upgraded) == upgraded  # this layout comes back as it is
    with pytest.raises(UserInputError, match="model.family 'transe' is not one of"):
        upgrade_hparams({"family": "transe", "dim": 8})


@pytest.mark.slow
def test_a_checkpoint_of_the_old_layout_evaluates_and_resumes(tmp_path, capsys, tiny_graph):
    out = tmp_path / "runs"
    assert run_main(capsys, *fit_args(out, tiny_graph)).returncode == 0
    new_path = newest(out.glob("synthetic/version_0/checkpoints/last*.ckpt"))
    checkpoint = torch.load(new_path, weights_only=True)
    assert checkpoint["hyper_parameters"]["family"]["class_path"] == "rotmem.models.RoMem"
    checkpoint["hyper_parameters"] = old_hparams(checkpoint["hyper_parameters"])
    assert checkpoint["hyper_parameters"]["dim"] == 64 and "init_args" not in checkpoint["hyper_parameters"]
    old_path = tmp_path / "old-layout.ckpt"
    torch.save(checkpoint, old_path)

    evaluate = ["evaluate", "--ckpt", str(old_path), "--data", str(tiny_graph), "--device", "cpu"]
    assert run_main(capsys, *evaluate).returncode == 0
    resumed = tmp_path / "resumed"
    run = run_main(
        capsys, *fit_args(resumed, tiny_graph, "--trainer.max_steps", "4", "--ckpt_path", str(old_path))
    )
    assert run.returncode == 0, run.stderr[-2000:]
    last = newest(resumed.glob("synthetic/version_0/checkpoints/last*.ckpt"))
    after = torch.load(last, weights_only=True)
    assert after["global_step"] == 4  # two steps after the old checkpoint's two
    assert after["hyper_parameters"]["family"]["init_args"]["dim"] == 64
    model = load_model(last)
    assert type(model).__name__ == "RoMem" and model.config == load_model(old_path).config


# --- the same model as the old layout built -------------------------------------------------------
@pytest.mark.parametrize(
    "name", ["synthetic", "icews05-15-tntcomplex-history", "icews05-15-romem-complex-day"]
)
def test_a_config_builds_and_trains_the_model_the_old_flat_layout_built(name, tiny_graph):
    """Seed for seed: the model ``RoMemCLI`` builds from the config's ``model.family`` equals the one
    the old module built from the same settings flat (``build_model(family, **family_arguments(...))``,
    which kept each family's arguments from the union): the same class, arguments and weights."""
    from lightning_modules.cli import RoMemCLI
    from lightning_modules.kg_data import TemporalKGDataModule
    from lightning_modules.phase2 import Phase2Module

    path = configs.resolve(name)
    args = ["--config", str(path), "--data.dataset", str(tiny_graph), "--data.batch_size", "64"]
    if name == "synthetic":
        args += ["--model.family.speed", "constant", "--model.gate_path", "null"]
    with mock.patch("sys.argv", ["rotmem"]):
        cli = RoMemCLI(Phase2Module, TemporalKGDataModule, args=args, run=False, save_config_callback=None)
    spec = yaml.safe_load(path.read_text())["model"]["family"]
    family = {"RoMem": "romem", "TNTComplEx": "tntcomplex", "RoMemComplEx": "romem-complex"}[
        spec["class_path"].rpartition(".")[2]
    ]
    data = cli.datamodule
    flat = dict(k=3, backbone="chronor", day_table=False)  # the union's defaults, for every family
    flat |= spec["init_args"] | (dict(speed="constant") if name == "synthetic" else {})
    flat |= dict(num_entities=data.num_entities, num_relations=data.num_relations, tau0=data.tau0)
    flat |= dict(num_days=data.num_days)
    pl.seed_everything(0)  # the config's seed_everything, as RoMemCLI set it before building
    old = build_model(family, **family_arguments(family, flat))
    new = cli.model.model
    assert type(old) is type(new) and old.config == new.config
    old_state, new_state = old.state_dict(), new.state_dict()
    assert old_state.keys() == new_state.keys()
    assert all(
        torch.equal(old_state[key], new_state[key]) for key in old_state if torch.is_tensor(old_state[key])
    )
