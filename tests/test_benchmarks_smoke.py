"""``python -m benchmarks.kernels --quick`` runs end to end in seconds and writes its CSV, summary
(``.md``), chart; ``scale --quick``, the accuracy race and the paper curve at small sizes."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_kernels_quick(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    from benchmarks import kernels

    assert (
        kernels.main(
            ["--quick", "--device", "cpu", "--providers", "eager,native", "--out-dir", str(tmp_path)]
        )
        == 0
    )
    with (tmp_path / "kernels_cpu.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [*kernels.COLUMNS, "command", "commit"]
    eager = {(r["op"], r["mode"]) for r in rows if r["provider"] == "eager"}
    for op in kernels.OPS:
        modes = ("forward",) if op == "score_all" else kernels.MODES
        assert {(op, mode) for mode in modes} <= eager, f"missing eager rows for {op}"
    assert all(float(r["ms_median"]) > 0 for r in rows)
    step = next(
        r for r in rows if (r["op"], r["mode"], r["provider"]) == ("step", "forward+backward", "eager")
    )
    assert float(step["peak_mem_mb"]) > 0  # the step allocates logits, grads, ...
    assert float(next(r for r in rows if r["op"] == "copy")["gb_per_s"]) > 0
    assert (tmp_path / "kernels_cpu.png").stat().st_size > 0
    assert "command: python -m benchmarks.kernels --quick" in capsys.readouterr().out
    assert rows[0]["command"].endswith(f"--out-dir {tmp_path}")


class BrokenOps:
    """A backend whose every op raises, as a kernel that fails to compile on a new GPU would."""

    def __getattr__(self, op):
        def fail(*args):
            raise RuntimeError(f"{op} is broken\nsecond line")

        return fail


def test_kernels_reports_a_failing_provider_and_measures_the_others(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    from benchmarks import kernels

    monkeypatch.setattr(
        kernels, "providers_for", lambda device, wanted: {"eager": kernels.reference, "broken": BrokenOps()}
    )
    assert kernels.main(["--quick", "--device", "cpu", "--out-dir", str(tmp_path)]) == 1
    with (tmp_path / "kernels_cpu.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["op"] for r in rows if r["provider"] == "eager"} == set(kernels.OPS)
    assert not [r for r in rows if r["provider"] == "broken"]
    failed = [line for line in (tmp_path / "kernels_cpu.md").read_text().splitlines() if "FAILED" in line]
    # one line per op and first failing mode (the provider is then dropped), plus the bandwidth test
    assert len(failed) == len(kernels.OPS) + 1
    assert "FAILED quick (B=8, n=7, N=50) float32 n3 forward broken: RuntimeError: n3 is broken" in failed
    assert all("second line" not in line for line in failed)
    assert "FAILED" in capsys.readouterr().err
    assert not (tmp_path / "kernels_cpu.png").exists()  # nothing to compare with eager


def test_kernels_budget_skips_and_names_what_it_did_not_measure(tmp_path, monkeypatch):
    from benchmarks import kernels

    assert kernels.main(["--quick", "--device", "cpu", "--budget-s", "0", "--out-dir", str(tmp_path)]) == 0
    lines = (tmp_path / "kernels_cpu.md").read_text().splitlines()
    skipped = [line for line in lines if line.startswith("skipped (the 0 s budget was spent): ")]
    assert len(skipped) == len(kernels.OPS) + 1  # every op and the bandwidth test
    assert (tmp_path / "kernels_cpu.csv").read_text().splitlines()[1:] == []
    assert not (tmp_path / "kernels_cpu.png").exists()


def test_kernels_plan_puts_the_targets_first_per_dtype(monkeypatch):
    from benchmarks import kernels

    f32, bf16 = kernels.torch.float32, kernels.torch.bfloat16
    large = kernels.large_shape(4096)
    jobs = [kernels.Job("rotate", kernels.bandwidth_shape(100), d) for d in (f32, bf16)]
    jobs += [kernels.Job(op, s, d) for s in (kernels.ICEWS, large) for d in (f32, bf16) for op in kernels.OPS]
    ordered = [(j.shape.name, j.op, j.dtype) for j in kernels.plan(jobs, [f32, bf16])]
    assert ordered[:3] == [
        ("bandwidth", "rotate", f32),
        ("icews05-15", "step", f32),
        ("large", "cross_entropy_all", f32),
    ]
    assert ordered[3] == ("icews05-15", "rotate", f32)
    first_bf16 = next(i for i, (_, _, d) in enumerate(ordered) if d == bf16)
    assert first_bf16 == len(jobs) // 2
    assert ordered[first_bf16 : first_bf16 + 3] == [
        ("bandwidth", "rotate", bf16),
        ("icews05-15", "step", bf16),
        ("large", "cross_entropy_all", bf16),
    ]
    assert sorted(ordered, key=str) == sorted(((j.shape.name, j.op, j.dtype) for j in jobs), key=str)


@pytest.mark.slow
def test_scale_quick(tmp_path):
    """``benchmarks/scale.py --quick``: 1 vs 2 processes (DDP, entity-parallel) and eager vs fused
    evaluation at small sizes, its CSV and chart."""
    pytest.importorskip("matplotlib")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.scale", "--quick", "--out-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    with (tmp_path / "scale_quick.csv").open() as f:
        rows = list(csv.DictReader(f))
    train = {r["mode"]: r for r in rows if r["section"] == "train"}
    assert set(train) == {"one", "ddp", "entity-parallel"}
    assert all(float(r["facts_per_s"]) > 0 for r in train.values())
    # the sharded rank holds about half of the table, its gradient and Adagrad's state
    ratio = float(train["entity-parallel"]["table_grad_state_mb_per_rank"]) / float(
        train["one"]["table_grad_state_mb_per_rank"]
    )
    assert 0.45 < ratio <= 0.55, ratio
    evals = [r for r in rows if r["section"] == "eval"]
    assert {r["evaluator"] for r in evals} == {"fused", "eager"} and all(
        float(r["seconds"]) > 0 for r in evals
    )
    assert all("python -m benchmarks.scale --quick" in r["command"] and r["load_1min"] for r in rows)
    assert (tmp_path / "scale_quick.png").stat().st_size > 0


@pytest.mark.slow
def test_accuracy_race_smoke(tmp_path):
    """Two model families race one epoch each, two seeds, on the synthetic KG: validation every
    epoch, test for the last and the best-validation epoch with the data-poor subset, mean ± sd in
    the summary, table and plot; ``--summarize`` remakes them; a held-out-weeks run comes out too."""
    pytest.importorskip("matplotlib")
    import os
    import subprocess

    env = dict(os.environ, HOME=str(tmp_path / "home"))  # the RoMem config pretrains its gate there
    env.pop("XDG_CACHE_HOME", None)
    out = tmp_path / "race"
    command = [sys.executable, "-m", "benchmarks.accuracy_race", "--budget-epochs", "1"]
    command += ["--configs", "synthetic.yaml", "icews05-15-tntcomplex.yaml", "--data", "synthetic"]
    command += ["--seeds", "0", "1", "--data-poor-threshold", "1000"]
    result = subprocess.run(
        command + ["--out-dir", str(out)], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-2000:]
    with (out / "accuracy_race.csv").open() as f:
        rows = list(csv.DictReader(f))
    models = {r["model"] for r in rows}
    assert models == {"synthetic", "icews05-15-tntcomplex"}
    every = {(f, t) for f in ("time-aware", "static") for t in ("optimistic", "realistic", "pessimistic")}
    commit = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    for model in models:
        for seed in ("0", "1"):
            mine = [r for r in rows if r["model"] == model and r["seed"] == seed]
            valid = [r for r in mine if r["split"] == "valid"]
            assert {(r["filter"], r["tie"]) for r in valid} == every and len(valid) == 6  # one epoch
            for checkpoint in ("last", "best-valid"):
                test = [r for r in mine if r["split"] == "test" and r["checkpoint"] == checkpoint]
                for subset in ("all", "data-poor"):  # every synthetic relation has < 1000 facts
                    assert {(r["filter"], r["tie"]) for r in test if r["subset"] == subset} == every
            assert all(float(r["epoch"]) == 1.0 and 0 < float(r["mrr"]) <= 1 for r in mine)
            assert all(
                0 <= float(r["time_auc"]) <= 1 for r in mine if r["split"] == "test" and r["subset"] == "all"
            )
        assert {r["history"] for r in rows if r["model"] == model} == {"no"}
    head = commit.stdout.strip()
    assert all(
        head.startswith(r["commit"].removesuffix("+dirty")) and "--seeds 0 1" in r["command"] for r in rows
    )
    seeds = {r["seed"]: float(r["mrr"]) for r in rows if r["model"] == "synthetic" and r["split"] == "test"}
    assert seeds["0"] != seeds["1"]  # the seed changes the run
    with (out / "accuracy_race_summary.csv").open() as f:
        summary = list(csv.DictReader(f))
    row = next(
        s
        for s in summary
        if (s["model"], s["checkpoint"], s["filter"], s["tie"], s["subset"])
        == ("synthetic", "last", "time-aware", "realistic", "all")
    )
    mrrs = [
        float(r["mrr"])
        for r in rows
        if r["model"] == "synthetic"
        and r["split"] == "test"
        and r["checkpoint"] == "last"
        and r["filter"] == "time-aware"
        and r["tie"] == "realistic"
        and r["subset"] == "all"
    ]
    assert row["seeds"] == "2" and abs(float(row["mrr_mean"]) - sum(mrrs) / 2) < 1e-4
    assert abs(float(row["mrr_sd"]) - abs(mrrs[0] - mrrs[1]) / 2**0.5) < 1e-4
    table = (out / "accuracy_race.md").read_text()
    assert "| synthetic | no | standard | 2 | 1 |" in table and " ± " in table
    assert (out / "accuracy_race.png").stat().st_size > 0
    assert "time-aware" in result.stdout and "command: " in result.stdout
    again = tmp_path / "again"
    done = subprocess.run(
        [*command[:3], "--summarize", str(out / "accuracy_race.csv"), "--out-dir", str(again)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (again / "accuracy_race.md").read_text() == table
    held = subprocess.run(
        [
            *command[:4],
            "0.5",  # a fractional epoch budget
            "--eval-facts",
            "200",
            "--configs",
            "icews05-15-tntcomplex.yaml",
            "--data",
            "synthetic",
            "--hold-out-weeks",
            "7",
            "--no-time-auc",
            "--out-dir",
            str(tmp_path / "held"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert held.returncode == 0, held.stderr[-2000:]
    with (tmp_path / "held" / "accuracy_race.csv").open() as f:
        held_rows = list(csv.DictReader(f))
    assert {r["protocol"] for r in held_rows} == {"hold-out-weeks-7"}
    assert {r["time_auc"] for r in held_rows} == {""}  # --no-time-auc
    assert {r["queries"] for r in held_rows if r["subset"] == "all"} == {"400"}  # 200 facts, 2 directions
    batches = -(-29077 // 500)  # the synthetic train split without its held-out weeks, batches of 500
    assert {float(r["epoch"]) for r in held_rows} == {round(-(-batches // 2) / batches, 3)}


@pytest.mark.slow
def test_paper_curve_draws_both_runs_and_refuses_a_missing_model(tmp_path):
    """``accuracy_race --paper-curve`` on two small race CSVs: a PNG and the curve's last rows."""
    pytest.importorskip("matplotlib")
    fields = ["model", "epoch", "train_seconds", "filter", "tie", "mrr"]
    for name, model in (("curve.csv", "paper"), ("race.csv", "best")):
        with (tmp_path / name).open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            for epoch in (1, 2):
                for kind, mrr in (("time-aware", 0.4 + epoch / 100), ("static", 0.6 + epoch / 100)):
                    for tie in ("optimistic", "realistic", "pessimistic"):
                        writer.writerow(
                            dict(
                                model=model,
                                epoch=epoch,
                                train_seconds=60 * epoch,
                                filter=kind,
                                tie=tie,
                                mrr=mrr,
                            )
                        )
    curve, race = f"{tmp_path / 'curve.csv'}:paper", tmp_path / "race.csv"
    command = [sys.executable, "-m", "benchmarks.accuracy_race", "--paper-curve", curve]
    done = subprocess.run([*command, f"{race}:best"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "paper static: 0.6200 after 2.0 min" in done.stdout
    assert (tmp_path / "paper_curve.png").stat().st_size > 0
    done = subprocess.run([*command, f"{race}:nobody"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode != 0 and "no realistic-tie rows of model 'nobody'" in done.stderr
