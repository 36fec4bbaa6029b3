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


@pytest.mark.slow
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


class StopAtFit(Exception):
    pass


@pytest.mark.parametrize(
    ("extra", "config", "epochs"),
    [
        ([], "icews05-15-romem-complex-rules.yaml", "2"),
        (["--epochs", "5"], "icews05-15-romem-complex-rules.yaml", "5"),
        (["--config", "icews05-15-cpu"], "icews05-15-chronor-dim128.yaml", None),  # the old name
    ],
)
def test_demo_on_icews_trains_the_race_winner_for_two_epochs(tmp_path, monkeypatch, extra, config, epochs):
    import lightning_modules.cli
    import rotmem.data

    seen = []

    def fit(argv):
        seen.append(argv)
        raise StopAtFit

    monkeypatch.setattr(rotmem.data, "find_dataset", lambda *args: tmp_path)  # as if ICEWS were there
    monkeypatch.setattr(lightning_modules.cli, "run_lightning_cli", fit)
    monkeypatch.setattr("rotmem.commands.demo.ensure_gate", lambda *args: None)
    with pytest.raises(StopAtFit):
        main(["demo", "--out", str(tmp_path), *extra])
    argv = seen[0]
    assert argv[:2] == ["fit", "--config"] and argv[2].endswith(config)
    assert argv[argv.index("--data.dataset") + 1] == "icews05-15"
    given = argv[argv.index("--trainer.max_epochs") + 1] if "--trainer.max_epochs" in argv else None
    assert given == epochs


def test_unknown_subcommand_is_rejected():
    with pytest.raises(SystemExit):
        main(["levitate"])


@pytest.mark.slow
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


def test_packaged_configs_resolve_by_name_and_paths_stay_paths(tmp_path):
    from rotmem import configs
    from rotmem.cli import resolve_configs

    assert {"synthetic", "icews05-15-chronor-dim128", "gate-icews05-15"} <= set(configs.names())
    packaged = configs.resolve("synthetic")
    assert (
        packaged.is_file() and packaged.parent.name == "configs" and packaged.parent.parent.name == "rotmem"
    )
    assert configs.resolve("synthetic.yaml") == packaged
    assert configs.resolve("configs/synthetic.yaml") == packaged  # the checkout's old configs/ folder
    own = tmp_path / "synthetic.yaml"
    own.write_text("seed_everything: 1\n")
    assert configs.resolve(own) == own  # an existing file wins over the packaged config of its name
    with pytest.raises(FileNotFoundError, match=r"config 'nope': no such file, and not a packaged config"):
        configs.resolve("nope")
    argv = resolve_configs(["fit", "--config", "synthetic", "--config=ablation-no-gate", "--data.seed", "1"])
    assert argv == ["fit", "--config", str(packaged), f"--config={configs.resolve('ablation-no-gate')}"] + [
        "--data.seed",
        "1",
    ]


@pytest.mark.slow
def test_fit_accepts_a_packaged_config_name(tmp_path):
    argv = ["fit", "--config", "synthetic", "--model.family.speed", "constant", "--model.gate_path", "null"]
    argv += [
        "--trainer.max_epochs",
        "1",
        "--trainer.limit_train_batches",
        "2",
        "--trainer.limit_val_batches",
        "1",
    ]
    argv += ["--trainer.check_val_every_n_epoch", "1", "--trainer.enable_progress_bar", "false"]
    argv += [
        "--trainer.default_root_dir",
        str(tmp_path),
        "--trainer.logger.init_args.save_dir",
        str(tmp_path),
    ]
    assert main(argv) == 0
    assert list(tmp_path.rglob("last.ckpt"))
