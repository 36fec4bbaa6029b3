"""The model family in a Phase-2 config (``model.family``: its class and its own arguments,
``lightning_modules.family_settings``): a misspelled argument and a key of the old flat layout end
in one line (exit code 2)."""

from __future__ import annotations

import pytest
import yaml
from test_cli_errors import assert_one_line_error, rotmem
from test_cli_input_checks import run_main

from rotmem.data import synthetic_kg
from rotmem.data.arrays import save_arrays

ROMEM_ARGUMENTS = "dim, k, backbone, speed, init_scale, init_s, init_base)"


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


# --- a key of the old flat layout -------------------------------------------------------------
@pytest.mark.parametrize(
    "config, extra",
    [
        ("icews05-15-tntcomplex", ["--model.dim", "8"]),
        ("synthetic", ["--model.history_windows=[1, 7]"]),
    ],
)
def test_a_key_that_no_longer_exists_is_one_line(tmp_path, capsys, tiny_graph, config, extra):
    """The old flat layout (``--model.dim``) is not read any more: the parser's own error, one line."""
    out = tmp_path / "runs"
    where = ["--data.dataset", str(tiny_graph), "--trainer.default_root_dir", str(out)]
    run = run_main(capsys, "fit", "--config", config, "--model.gate_path", "null", *where, *extra)
    key = extra[0].removeprefix("--").partition("=")[0]
    assert_one_line_error(run, key)
    assert not out.exists()


def test_an_old_flat_config_file_is_one_line(tmp_path, capsys, tiny_graph):
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump({"model": {"family": "tntcomplex", "lr": 0.1}}))
    run = run_main(capsys, *fit_args(tmp_path / "runs", tiny_graph, "--config", str(old)))
    assert_one_line_error(run, "model.family")
