"""The ``rotmem`` console script: data info, fit through LightningCLI, evaluate, demo."""

from __future__ import annotations

import json

import pytest

from rotmem.cli import main


def test_data_info_synthetic(capsys):
    assert main(["data", "info", "synthetic"]) == 0
    out = capsys.readouterr().out
    assert "entities 288" in out and "relations 5" in out


def test_data_info_icews(icews, capsys):
    from tests.conftest import icews_dir

    assert main(["data", "info", "icews05-15", "--data-dir", str(icews_dir().parent)]) == 0
    assert "entities 10,488  relations 251  days 4,017" in capsys.readouterr().out


def test_demo_trains_and_answers_then_evaluate_reads_the_checkpoint(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the gate is pretrained into ~/.cache
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert main(["demo", "--data", "synthetic", "--epochs", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "home/.cache/rotmem/gates/synthetic/gate.pt").is_file()
    assert "test (time-aware filter): MRR" in out
    assert "(person_" in out and "lives in, ?)" in out and "president of" in out
    ckpt = next(tmp_path.rglob("*.ckpt"))
    assert main(["evaluate", "--ckpt", str(ckpt), "--data", "synthetic", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    for kind in ("time-aware", "static"):
        mrr = {tie: result[f"{kind}/{tie}"]["mrr"] for tie in ("optimistic", "realistic", "pessimistic")}
        assert 0.0 < mrr["pessimistic"] <= mrr["realistic"] <= mrr["optimistic"] <= 1.0
    assert result["static/realistic"]["mrr"] >= result["time-aware/realistic"]["mrr"]


def test_unknown_subcommand_is_rejected():
    with pytest.raises(SystemExit):
        main(["levitate"])


def test_evaluate_gives_a_model_whose_scores_all_tie_about_one_over_n(tmp_path, capsys, synthetic):
    from rotmem import RoMem

    kg = synthetic.kg
    model = RoMem(kg.num_entities, kg.num_relations, dim=8, k=1, init_scale=0.0)
    model.set_vocabulary(kg.entities, kg.relations)
    model.save(str(tmp_path / "zero.pt"))
    assert main(["evaluate", "--ckpt", str(tmp_path / "zero.pt"), "--data", "synthetic", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    for kind in ("time-aware", "static"):
        assert 2 / (kg.num_entities + 1) <= result[f"{kind}/realistic"]["mrr"] < 3 / kg.num_entities
