"""Bad input through the installed ``rotmem`` console script: one line on stderr naming what is
wrong, a non-zero exit code, no traceback, nothing written; a real bug keeps its traceback."""

from __future__ import annotations

import builtins
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rotmem import load_model
from rotmem.errors import BadCheckpointError
from rotmem.models import RoMem

ROTMEM = Path(sys.executable).with_name("rotmem")  # the console script of this environment


def rotmem(*args: str, cwd: Path, home: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(home or cwd / "home")}
    env.pop("XDG_CACHE_HOME", None)
    return subprocess.run([str(ROTMEM), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def assert_one_line_error(run: subprocess.CompletedProcess, *expected: str, code: int = 2) -> None:
    """Exit ``code``; stderr's only ``rotmem: error:`` line is its last line and holds ``expected``."""
    assert run.returncode == code, (run.returncode, run.stderr[-2000:])
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("rotmem: error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], run.stderr[-2000:]
    for text in expected:
        assert text in errors[0], (text, errors[0])


def test_the_console_script_is_installed():
    assert ROTMEM.is_file(), f"no console script at {ROTMEM}: install rotmem (pip install -e .)"


@pytest.mark.slow
def test_unknown_dataset(tmp_path):
    assert_one_line_error(rotmem("data", "info", "nope", cwd=tmp_path), "dataset 'nope' not found in")
    out = tmp_path / "runs"
    run = rotmem(
        "fit", "--config", "synthetic", "--data.dataset", "nope", "--model.family.speed", "constant",
        "--trainer.default_root_dir", str(out), "--trainer.logger.init_args.save_dir", str(out),
        cwd=tmp_path,
    )  # fmt: skip
    assert_one_line_error(run, "dataset 'nope' not found in")
    assert not out.exists()  # nothing written half-way
    assert_one_line_error(rotmem("data", "fetch", "nope", cwd=tmp_path), "unknown dataset 'nope'; known:")


@pytest.mark.slow
def test_bad_checkpoint(tmp_path):
    garbage = tmp_path / "garbage.ckpt"
    garbage.write_bytes(os.urandom(4096))
    assert_one_line_error(
        rotmem("evaluate", "--ckpt", str(garbage), "--data", "synthetic", cwd=tmp_path),
        f"{garbage}: not a loadable rotmem checkpoint (",
    )
    assert_one_line_error(
        rotmem("evaluate", "--ckpt", "missing.ckpt", "--data", "synthetic", cwd=tmp_path),
        "checkpoint 'missing.ckpt' not found",
    )
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.ones(3)}, foreign)
    assert_one_line_error(
        rotmem("evaluate", "--ckpt", str(foreign), "--data", "synthetic", cwd=tmp_path),
        f"{foreign}: not a rotmem checkpoint (no 'rotmem' entry",
    )


@pytest.mark.slow
def test_missing_gate_file(tmp_path):
    out = tmp_path / "runs"
    run = rotmem(
        "fit", "--config", "synthetic", "--trainer.default_root_dir", str(out),
        "--trainer.logger.init_args.save_dir", str(out), cwd=tmp_path,
    )  # fmt: skip
    gate = tmp_path / "home/.cache/rotmem/gates/synthetic/gate.pt"
    assert_one_line_error(run, f"gate file {gate} not found (model.gate_path)", "rotmem gate pretrain")
    assert not out.exists()
    assert_one_line_error(
        rotmem("gate", "alpha", "--gate", "missing/gate.pt", "lives in", cwd=tmp_path),
        "no Semantic Speed Gate at missing/gate.pt",
    )


def write_split(folder: Path, rows: list[str]) -> None:
    folder.mkdir(exist_ok=True)
    good = "a\tr\tb\t2014-01-01\n"
    for split in ("train", "valid", "test"):
        (folder / f"{split}.txt").write_text(good)
    (folder / "train.txt").write_text("".join(rows))


@pytest.mark.parametrize(
    "rows, expected",
    [
        (["a\tr\tb\t2014-01-01\n", "a\tr\tb\n"], "train.txt:2: expected 4 tab-separated fields"),
        (["a\tr\tb\t2014-01-01\n", "\n", "a\tr\tb\t2014-02-30\n"], "train.txt:3: bad date '2014-02-30'"),
    ],
)
@pytest.mark.slow
def test_malformed_data_rows(tmp_path, rows, expected):
    write_split(tmp_path / "kg", rows)
    assert_one_line_error(rotmem("data", "info", str(tmp_path / "kg"), cwd=tmp_path), expected)
    if "date" in expected:
        return  # one training run is enough: it reads the data with the same parser
    out = tmp_path / "runs"
    run = rotmem(
        "fit", "--config", "synthetic", "--data.dataset", str(tmp_path / "kg"),
        "--model.family.speed", "constant",
        "--trainer.default_root_dir", str(out), "--trainer.logger.init_args.save_dir", str(out),
        cwd=tmp_path,
    )  # fmt: skip
    assert_one_line_error(run, expected)
    assert not out.exists()


@pytest.fixture
def small_model(tmp_path) -> Path:
    model = RoMem(3, 2, dim=8, k=1, tau0=16000.0)
    model.set_vocabulary(["Alice", "Bob", "Carol"], ["meets", "calls"])
    path = tmp_path / "model.pt"
    model.save(str(path))
    return path


@pytest.mark.slow
def test_query_answers_and_names_unknown_entities_relations_and_dates(tmp_path, small_model):
    query = ["query", "--ckpt", str(small_model), "--relation", "meets", "--date", "2014-06-01"]
    good = rotmem(*query, "--head", "Alice", cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    assert "(Alice, meets, ?) on 2014-06-01:" in good.stdout and good.stdout.count("\n") == 4
    assert_one_line_error(rotmem(*query, "--head", "Zed", cwd=tmp_path), "unknown entity: ['Zed']")
    assert_one_line_error(rotmem(*query, "--tail", "Zed", cwd=tmp_path), "unknown entity: ['Zed']")
    bad_relation = [*query[:4], "flies", *query[5:]]  # --relation flies
    assert_one_line_error(
        rotmem(*bad_relation, "--head", "Alice", cwd=tmp_path), "unknown relation: ['flies']"
    )
    bad_date = [*query[:-1], "2014-13-45"]
    assert_one_line_error(
        rotmem(*bad_date, "--head", "Alice", cwd=tmp_path),
        "date '2014-13-45' does not parse: expected YYYY-MM-DD",
    )
    assert_one_line_error(rotmem(*query, cwd=tmp_path), "give one of --head (ranks tails) and --tail")


@pytest.mark.slow
def test_a_real_bug_keeps_its_traceback(tmp_path):
    code = "import sys; from rotmem import cli; cli.build_parser = lambda: 1 / 0; sys.exit(cli.main(['env']))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 1 and "Traceback" in run.stderr and "ZeroDivisionError" in run.stderr


@pytest.mark.slow
def test_load_model_refuses_a_checkpoint_that_would_run_code(tmp_path, small_model):
    """torch.load(weights_only=True): the payload's code never runs; unpickled freely, it would."""
    marker = tmp_path / "code-ran"

    class RunsCode:
        def __reduce__(self):
            return builtins.exec, (f"open({str(marker)!r}, 'w').write('ran')",)

    checkpoint = torch.load(small_model, weights_only=True)
    checkpoint["rotmem"]["extra"] = RunsCode()
    evil = tmp_path / "evil.pt"
    torch.save(checkpoint, evil)
    with pytest.raises(BadCheckpointError, match="not a loadable rotmem checkpoint"):
        load_model(evil)
    assert not marker.exists()
    assert_one_line_error(
        rotmem("query", "--ckpt", str(evil), "--head", "Alice", "--relation", "meets", "--date", "2014-06-01",
               cwd=tmp_path),
        "not a loadable rotmem checkpoint",
    )  # fmt: skip
    assert not marker.exists()
    torch.load(evil, weights_only=False)  # what load_model refuses to do
    assert marker.read_text() == "ran"
