"""Training-side bad input: each case ends in one ``rotmem: error:`` line naming the problem and exit
code 2, never a traceback or a silent wrong answer.

The console script's path (``rotmem.cli.main`` in a fresh process, its stderr, its exit code) is
proven once per command family by a subprocess; the other cases call ``rotmem.cli.main`` in-process,
which is what the script runs, to keep the tests fast."""

from __future__ import annotations

import os
import re
import struct
import zipfile
from pathlib import Path

import pytest
import torch
from test_cli_errors import assert_one_line_error, rotmem

from rotmem import load_dataset, load_model
from rotmem.cli import main
from rotmem.errors import BadCheckpointError
from rotmem.models import RoMem

ENTITIES, RELATIONS = ["Alice", "Bob", "Carol"], ["meets", "calls"]


class Run:
    """``rotmem.cli.main(argv)``'s exit code and stderr, shaped as a ``CompletedProcess``."""

    def __init__(self, returncode: int, stderr: str):
        self.returncode, self.stderr = returncode, stderr


def run_main(capsys, *argv: str) -> Run:
    code = main(list(argv))
    return Run(code, capsys.readouterr().err)


def fit_args(out: Path, *extra: str) -> list[str]:
    """``rotmem fit`` on the synthetic preset, without a gate, writing only under ``out``."""
    return [
        "fit", "--config", "synthetic", "--model.family.speed", "constant", "--model.gate_path", "null",
        "--trainer.default_root_dir", str(out), "--trainer.logger.init_args.save_dir", str(out), *extra,
    ]  # fmt: skip


def saved_model(path: Path, vocabulary: bool = True) -> Path:
    torch.manual_seed(0)
    model = RoMem(len(ENTITIES), len(RELATIONS), dim=8, k=1, tau0=16000.0)
    if vocabulary:
        model.set_vocabulary(ENTITIES, RELATIONS)
    model.save(str(path))
    return path


def write_folder(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


GOOD = b"A\tr\tB\t2014-01-01\n"


# --- fit settings ------------------------------------------------------------------------------
@pytest.mark.slow
def test_fit_with_a_width_of_zero_through_the_console_script(tmp_path):
    out = tmp_path / "runs"
    run = rotmem(*fit_args(out, "--model.family.dim", "0"), cwd=tmp_path)
    assert_one_line_error(run, "model.family (RoMem): dim=0 with k=1 leaves no complex dimension")
    assert not out.exists()


@pytest.mark.parametrize(
    "setting, expected",
    [
        (["--model.family.dim", "-8"], "model.family (RoMem): dim=-8 with k=1 leaves no complex dimension"),
        (["--data.batch_size", "0"], "data.batch_size must be at least 1, got 0"),
        (["--model.lr", "-1"], "model.lr must be positive, got -1.0"),
        (
            ["--model.family", "TNTComplEx", "--model.family.dim", "0"],
            "model.family (TNTComplEx): TNTComplEx needs dim >= 2",
        ),
        (
            ["--model.history.rule_windows", "[0, 400]"],
            "model.history: rule_windows must be at most 365 days, got 400",
        ),
    ],
)
def test_fit_settings_out_of_range(tmp_path, capsys, setting, expected):
    out = tmp_path / "runs"
    assert_one_line_error(run_main(capsys, *fit_args(out, *setting)), expected)
    assert not out.exists()


def test_fit_ckpt_path_on_an_unsafe_file_is_refused_before_it_runs_code(tmp_path, capsys):
    marker = tmp_path / "pwned"

    class Payload:  # unpickled freely, it would make the directory ``marker``
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    unsafe = tmp_path / "unsafe.ckpt"
    torch.save({"rotmem": {"config": {}}, "state_dict": {}, "payload": Payload()}, unsafe)
    out = tmp_path / "runs"
    run = run_main(capsys, *fit_args(out, "--ckpt_path", str(unsafe), "--trainer.max_steps", "1"))
    assert_one_line_error(run, f"{unsafe}: not a loadable rotmem checkpoint (")
    assert not marker.exists() and not list(out.rglob("*.ckpt"))


# --- evaluate ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_evaluate_batch_size_and_device_through_the_console_script(tmp_path):
    model = saved_model(tmp_path / "m.pt")
    run = rotmem("evaluate", "--ckpt", str(model), "--data", "synthetic", "--batch-size", "0", cwd=tmp_path)
    assert_one_line_error(run, "--batch-size must be at least 1, got 0")
    run = rotmem("evaluate", "--ckpt", str(model), "--data", "synthetic", "--device", "bogus", cwd=tmp_path)
    assert_one_line_error(run, "--device 'bogus' is not usable here (")


def test_a_checkpoint_without_vocabulary_on_a_dataset_of_another_size(tmp_path, capsys):
    model = saved_model(tmp_path / "bare.pt", vocabulary=False)
    run = run_main(capsys, "evaluate", "--ckpt", str(model), "--data", "synthetic", "--device", "cpu")
    assert_one_line_error(
        run, "a model of 3 entities and 2 relations cannot be evaluated on dataset 'synthetic'"
    )


def rewrite(path: Path, edit) -> Path:
    """The checkpoint at ``path`` with ``edit(checkpoint)`` applied, saved beside it."""
    checkpoint = torch.load(path, weights_only=True)
    edit(checkpoint)
    out = path.with_name(f"edited-{path.name}")
    torch.save(checkpoint, out)
    return out


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda c: c.update(rotmem="romem"), "its 'rotmem' entry is a str, not a dict"),
        (lambda c: c["rotmem"].pop("config"), "its 'rotmem' entry has no 'config' dict"),
        (
            lambda c: c["rotmem"].update(entities=ENTITIES[:2]),
            "a vocabulary of 2 entities and 2 relations does not fit the model's tables (3 entities",
        ),
        (lambda c: c["rotmem"].update(relations=None), "entity names but no relation names"),
        (lambda c: c.update(state_dict=[1, 2]), "its 'state_dict' is not a dict of named tensors"),
    ],
)
def test_checkpoints_that_load_weights_only_but_have_the_wrong_layout(tmp_path, capsys, edit, expected):
    bad = rewrite(saved_model(tmp_path / "m.pt"), edit)
    with pytest.raises(BadCheckpointError, match=re.escape(expected)):
        load_model(bad)
    run = run_main(capsys, "evaluate", "--ckpt", str(bad), "--data", "synthetic", "--device", "cpu")
    assert_one_line_error(run, str(bad), expected)


def test_a_flipped_bit_in_the_file_is_refused(tmp_path, capsys):
    path = saved_model(tmp_path / "m.pt")
    with zipfile.ZipFile(path) as archive:  # torch.save: tensors are stored uncompressed
        entity = max(archive.infolist(), key=lambda info: info.file_size if "/data/" in info.filename else 0)
    raw = bytearray(path.read_bytes())
    # the tensor's first byte: after the local header (30 bytes), the name and the extra field
    name_length, extra_length = struct.unpack(
        "<HH", raw[entity.header_offset + 26 : entity.header_offset + 30]
    )
    start = entity.header_offset + 30 + name_length + extra_length
    raw[start + 5] ^= 0x10  # one bit of the second weight
    path.write_bytes(bytes(raw))
    run = run_main(capsys, "evaluate", "--ckpt", str(path), "--data", "synthetic", "--device", "cpu")
    assert_one_line_error(run, "its tensors do not match the SHA-256 stored when it was saved")


@pytest.mark.slow
def test_query_on_a_model_with_nan_scores(tmp_path, capsys):
    model = RoMem(len(ENTITIES), len(RELATIONS), dim=8, k=1, tau0=16000.0)
    model.set_vocabulary(ENTITIES, RELATIONS)
    with torch.no_grad():
        model.entity[0] = float("nan")  # Alice: every score of her questions
    model.save(str(tmp_path / "nan.pt"))
    query = ["query", "--ckpt", str(tmp_path / "nan.pt"), "--head", "Alice", "--relation", "meets"]
    run = rotmem(*query, "--date", "2014-06-01", cwd=tmp_path)
    assert_one_line_error(run, "the model is broken: 3 of its 3 scores for (Alice, meets, ?) are NaN")
    assert run.stdout == ""


# --- data folders and files --------------------------------------------------------------------
@pytest.mark.slow
def test_data_files_through_the_console_script(tmp_path):
    only_train = write_folder(tmp_path / "only-train", {"train.txt": GOOD})
    assert_one_line_error(
        rotmem("data", "info", str(only_train), cwd=tmp_path), "missing valid.txt, test.txt"
    )
    latin = write_folder(
        tmp_path / "latin-1", {"train.txt": GOOD + "Sa\xf5 Paulo\tr\tB\t2014-01-02\n".encode("latin-1"),
                               "valid.txt": GOOD, "test.txt": GOOD}
    )  # fmt: skip
    assert_one_line_error(
        rotmem("data", "info", str(latin), cwd=tmp_path),
        "latin-1/train.txt:2: not UTF-8 text (byte 0xf5 at column 3)",
    )


@pytest.mark.parametrize(
    "line, expected",
    [(b"\tr\tB\t2014-01-01\n", "train.txt:2: empty head name"), (b"A\t \tB\t2014-01-01\n", "empty relation")],
)
def test_empty_names(tmp_path, capsys, line, expected):
    folder = write_folder(tmp_path / "kg", {"train.txt": GOOD + line, "valid.txt": GOOD, "test.txt": GOOD})
    assert_one_line_error(run_main(capsys, "data", "info", str(folder)), expected)


def test_a_byte_order_mark_is_not_part_of_the_first_name(tmp_path):
    bom = "\ufeff".encode()
    folder = write_folder(
        tmp_path / "kg",
        {"train.txt": bom + GOOD, "valid.txt": bom + GOOD, "test.txt": b"B\tr\tA\t2014-01-02\n"},
    )
    kg = load_dataset(folder)
    assert kg.entities == ["A", "B"] and kg.relations == ["r"]
