"""Smoke runs of the benchmark scripts that had none: each runs end to end at a tiny size through its
command line and writes a CSV whose rows say what was measured, with the command."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_script(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def read_rows(path: Path) -> list[dict]:
    with path.open() as handle:
        return list(csv.DictReader(line for line in handle if not line.startswith("#")))


def test_memory_scale_tiny(tmp_path):
    """``memory_scale.py``: batched and per-session ingestion (both synchronous settings), reopening,
    retrieval on every index backend; the per-session rows count the records of their own store."""
    out = tmp_path / "memory_scale.csv"
    run_script(
        "-m", "benchmarks.memory_scale", "--records", "200", "--per-session", "10", "--batch-sessions", "5",
        "--single-sessions", "4", "--queries", "4", "--dim", "16", "--no-minilm", "--out", str(out),
    )  # fmt: skip
    rows = read_rows(out)
    metrics = [r["metric"] for r in rows]
    assert metrics.count("ingest_batch_facts_per_s") == 1
    assert metrics.count("ingest_per_session_facts_per_s") == 2  # synchronous FULL and NORMAL
    assert "reopen_rebuild_index_s" in metrics
    assert {"retrieve_p50_ms", "retrieve_p95_ms"} <= set(metrics)
    assert all(float(r["value"]) > 0 for r in rows if r["unit"] == "facts/s")
    reopen = next(r for r in rows if r["metric"] == "reopen_rebuild_index_s")
    assert reopen["note"].startswith("200 vectors")  # the batched store's records, read back
    assert all("python -m benchmarks.memory_scale --records 200" in r["command"] for r in rows)


def test_eval_speed_tiny(tmp_path):
    """``eval_speed.py`` on the synthetic KG: fused and eager evaluators, one filter and both, each
    timed over every test query in both directions."""
    out = tmp_path / "eval_speed.csv"
    run_script(
        "-m", "benchmarks.eval_speed", "--data", "synthetic", "--dim", "8", "--k", "1",
        "--batch-size", "64", "--out", str(out),
    )  # fmt: skip
    rows = read_rows(out)
    assert sorted((r["evaluator"], r["filters"]) for r in rows) == sorted(
        (e, f) for e in ("fused", "eager") for f in ("time-aware", "time-aware+static")
    )
    from rotmem import load_dataset

    queries = 2 * len(load_dataset("synthetic").split("test"))
    assert all(int(r["queries"]) == queries and float(r["seconds"]) > 0 for r in rows)
    assert all("python -m benchmarks.eval_speed --data synthetic" in r["command"] for r in rows)
    assert all(r["commit"] for r in rows)  # the runner's columns
    markdown = out.with_suffix(".md").read_text()
    assert "eager / fused" in markdown and markdown.count("| fused |") == 2


@pytest.mark.slow
def test_kernels_step_variants_tiny(tmp_path):
    """``kernels --ops step`` with the native step's variants (what ``native_step.py`` timed): every
    provider computes the same training loss as eager (``matmul-floor`` is the bound, not a loss) and
    has a time and a peak memory."""
    import torch

    from benchmarks import kernels

    variants = ["eager", "native", "native+compile", "native-recompute", "native-dense", "matmul-floor"]
    variants += ["native-baseline"]  # the native ops under the SIMD-free instruction set (any CPU runs it)
    args, _ = kernels.make_inputs("step", kernels.QUICK, "float32", "cpu")
    providers = kernels.providers_for("cpu", variants)
    wrap = {"native-recompute": kernels.recomputed, "native+compile": torch.compile}
    losses = {n: float(wrap.get(n, lambda f: f)(kernels.op_function("step", m, n))(*args))
              for n, m in providers.items() if n != "matmul-floor"}  # fmt: skip
    assert len(losses) == 6  # float32, 7 complex dims, 50 entities: a few ulps of the loss
    assert all(abs(loss - losses["eager"]) <= 1e-5 * abs(losses["eager"]) for loss in losses.values()), losses
    run_script(
        "-m", "benchmarks.kernels", "--quick", "--device", "cpu", "--ops", "step",
        "--modes", "forward+backward",
        "--reps", "1", "--providers", ",".join(variants), "--no-plot", "--out-dir", str(tmp_path),
    )  # fmt: skip
    rows = {r["provider"]: r for r in read_rows(tmp_path / "kernels_cpu.csv") if r["op"] == "step"}
    assert set(rows) == set(variants) and all(float(r["ms_median"]) > 0 for r in rows.values())
    assert all(r["mode"] == "forward+backward" for r in rows.values())


def test_search_route_tiny(tmp_path):
    """``search_route.py``: both paths answer the stub's search (the script checks each 200) and get a
    row each, the framework's the ratios' base."""
    pytest.importorskip("fastapi", reason='needs the server extra: pip install "rotmem[server]"')
    out = tmp_path / "search_route.csv"
    run_script(
        "-m", "benchmarks.search_route", "--requests", "64", "--concurrency", "4", "--rounds", "2",
        "--records", "3", "--out", str(out),
    )  # fmt: skip
    rows = {r["path"]: r for r in read_rows(out)}
    assert set(rows) == {"shortcut", "framework"} and rows["framework"]["vs_framework"] == "1.0"
    assert all(float(r["cpu_us_per_request"]) > 0 and r["records"] == "3" for r in rows.values())
    assert all("python -m benchmarks.search_route --requests 64" in r["command"] for r in rows.values())


@pytest.mark.slow
def test_memory_service_tiny(tmp_path):
    """``memory_service.py`` on SQLite: the server on 127.0.0.1 under 1 and 2 clients, then one
    SIGKILL mid-load and a reader in another process that finds every acknowledged add, whole."""
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    work, out = tmp_path / "work", tmp_path / "out"
    common = ["--records", "200", "--backends", "sqlite", "--work", str(work), "--out", str(out)]
    run_script("-m", "benchmarks.memory_service", "prepare", *common, timeout=300)
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    pinned = str(max(usable)) if len(usable) >= 2 else None  # the encoder on a CPU of its own (Linux)
    run_script(
        "-m", "benchmarks.memory_service", "load", "crash", *common, "--clients", "1", "2", "--seconds", "2",
        "--cycles", "1", "--kill-after", "2", "--batch-sizes", "1", "4", "--reps", "1", "--device", "cpu",
        *(["--encoder-cpus", pinned] if pinned else []), timeout=600,
    )  # fmt: skip
    rows = read_rows(out / "memory_service.csv")
    curve = [(r["texts"], int(r["batch_size"])) for r in rows if r["row"] == "encoder"]
    assert curve == [("question", 1), ("question", 4), ("fact", 1), ("fact", 4)]
    load = [r for r in rows if r["row"] == "load"]
    levels = [(r["encoder"], r["retriever"], int(r["clients"]), float(r["adds_share"])) for r in load]
    assert levels == [  # then 2 clients only searching, then only adding; the encoder in its worker process
        ("process", retriever, clients, adds)
        for retriever in ["best", "temporal"]
        for clients, adds in [(1, 0.1), (2, 0.1), (2, 0.0), (2, 1.0)]
    ]
    assert all(int(r["records"]) == 200 and int(r["errors"]) == 0 for r in load)
    assert all((int(r["searches"]) > 0) == (float(r["adds_share"]) < 1) for r in load)
    assert all((int(r["adds"]) > 0) == (float(r["adds_share"]) > 0) for r in load)
    assert all(int(r["encoder_calls"]) > 0 and float(r["mean_batch"]) >= 1 for r in load)  # from /metrics
    assert all(int(r["encoder_max_batch"]) == 8 for r in load)  # the server's default cap on the CPU
    assert all(r["encoder_cpus"] == (pinned or "") for r in load)  # rotmem serve --encoder-cpus
    for r in load:  # at the targets' client count, the encoder is timed alone before and after the level
        near = [r["encoder_before_per_s"], r["encoder_after_per_s"]]
        bound = float(r["encoder_bound_per_s"])
        if int(r["clients"]) == 2:
            assert bound == pytest.approx(sum(map(float, near)) / 2, abs=0.1) and bound > 0
        else:
            assert near == ["", ""] and bound == float(r["encoder_curve_bound_per_s"])
    targets = [r for r in rows if r["row"] == "target"]
    assert all(r["encoder_cpus"] == (pinned or "") for r in targets)
    assert [(r["target"], r["encoder"], r["retriever"], int(r["clients"])) for r in targets] == [
        (target, "process", retriever, 2)
        for retriever in ["best", "temporal"]
        for target in [
            "search p99 vs p50",
            "search-only searches/s vs encoder questions/s",
            "search-only p99 vs p50",
            "add-only facts/s vs encoder facts/s",
        ]
    ]
    assert all(float(r["bound"]) > 0 and r["passed"] in ("True", "False") for r in targets)
    crash = read_rows(out / "memory_service_crash.csv")
    assert len(crash) == 1 and int(crash[0]["acknowledged"]) > 0
    assert int(crash[0]["found"]) == int(crash[0]["acknowledged"])
    assert int(crash[0]["missing"]) == 0 and int(crash[0]["half_written"]) == 0
    assert (out / "memory_service.png").stat().st_size > 0
    assert all("python -m benchmarks.memory_service load crash" in r["command"] for r in rows + crash)


@pytest.mark.slow
def test_memory_service_encoder_curve_tiny(tmp_path):
    """The service's encoder timed alone (``encoder`` phase): sentences/s per batch size, per kind."""
    pytest.importorskip("sentence_transformers")
    run_script(
        "-m", "benchmarks.memory_service", "encoder", "--batch-sizes", "1", "2", "--reps", "2",
        "--device", "cpu", "--out", str(tmp_path), timeout=300,
    )  # fmt: skip
    rows = read_rows(tmp_path / "memory_service.csv")
    assert [(r["row"], r["device"], r["texts"], r["batch_size"], r["reps"]) for r in rows] == [
        ("encoder", "cpu", texts, size, "2") for texts in ("question", "fact") for size in ("1", "2")
    ]
    assert all(float(r["sentences_per_s"]) > 0 for r in rows)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or os.cpu_count() < 2, reason="needs 2 cores, Linux")
def test_memory_service_contention_tiny(tmp_path):
    """The encoder alone beside an idle core, a busy loop and a memory stream (``contention``)."""
    pytest.importorskip("sentence_transformers")
    run_script(
        "-m", "benchmarks.memory_service", "contention", "--reps", "1", "--device", "cpu",
        "--out", str(tmp_path / "memory_service.csv"), timeout=300,
    )  # fmt: skip
    rows = read_rows(tmp_path / "memory_service_contention.csv")
    assert [r["other_core"] for r in rows] == ["idle", "busy loop", "memory stream"]
    assert all(float(r["sentences_per_s"]) > 0 for r in rows) and float(rows[0]["vs_idle"]) == 1.0


def test_memory_service_bound_interpolates_the_encoder_curve():
    """The throughput bound: the encoder's sentences/s at the mean batch reached, linear in log2(batch),
    its last value beyond the curve."""
    from benchmarks.memory_service import encoder_bound

    curve = [
        {"texts": texts, "batch_size": size, "sentences_per_s": rate}
        for texts in ("question", "fact")
        for size, rate in ((1, 50.0), (2, 80.0), (4, 120.0), (8, 150.0))
    ]
    assert encoder_bound(curve, "question", 2 * 2**0.5) == pytest.approx(100.0)  # midway (log2) of 2 and 4
    assert encoder_bound(curve, "fact", 16.0) == 150.0
    assert encoder_bound(curve, "fact", 0.5) == 50.0


def test_memory_service_targets_read_each_levels_own_bound():
    """The targets at 16 clients: the mixed level's p99 / p50, the search-only level's searches/s
    and p99 / p50, the add-only level's facts/s, each against its level's bound (the encoder timed
    alone just before and after it)."""
    from benchmarks.memory_service import targets

    common = {"backend": "sqlite", "encoder": "process", "retriever": "best", "records": 10, "clients": 16}
    load = [
        {
            **common,
            "adds_share": 0.1,
            "mean_batch": 3.0,
            "searches_per_s": 90.0,
            "search_p50_ms": 100.0,
            "search_p99_ms": 400.0,
            "encoder_bound_per_s": 110.0,
        },
        {
            **common,
            "adds_share": 0.0,
            "mean_batch": 3.0,
            "searches_per_s": 90.0,
            "search_p50_ms": 100.0,
            "search_p99_ms": 250.0,
            "encoder_bound_per_s": 100.0,
        },
        {
            **common,
            "adds_share": 1.0,
            "mean_batch": 16.0,
            "searches_per_s": 0.0,
            "adds_per_s": 130.0,
            "encoder_bound_per_s": 150.0,
        },
    ]
    got = [(r["target"], r["adds_share"], r["bound"], r["ratio"], r["passed"]) for r in targets(load, 16)]
    assert got == [
        ("search p99 vs p50", 0.1, 100.0, 4.0, False),  # the mixed level's latency
        ("search-only searches/s vs encoder questions/s", 0.0, 100.0, 0.9, True),
        ("search-only p99 vs p50", 0.0, 100.0, 2.5, True),
        ("add-only facts/s vs encoder facts/s", 1.0, 150.0, 0.867, True),
    ]


@pytest.mark.slow
def test_gate_report_quick(tmp_path, icews):
    """``gate.py report --seeds 3 --skip-paper`` (~20 s): the config's gate on ICEWS05-15, its rank
    correlation with the relations' change rates, three zero-shot splits, α per relation, the
    paraphrase table and the synthetic graph's α, each CSV with the command that made it."""
    run_script(
        "-m", "benchmarks.gate", "report", "--seeds", "3", "--skip-paper", "--out-dir", str(tmp_path),
        timeout=600,
    )  # fmt: skip
    (summary,) = read_rows(tmp_path / "gate_summary_icews05-15.csv")
    assert summary["setting"] == "gate-icews05-15" and int(summary["zero_shot_seeds"]) == 3
    assert 0 < float(summary["spearman"]) <= 1  # the gate orders relations by how fast they change
    zero_shot = read_rows(tmp_path / "gate_zero_shot_icews05-15.csv")
    assert [int(r["seed"]) for r in zero_shot] == [0, 1, 2]
    assert len(read_rows(tmp_path / "gate_alpha_icews05-15.csv")) == len(icews.relations)
    paraphrases = read_rows(tmp_path / "gate_paraphrases_icews05-15.csv")
    assert paraphrases and all(float(r["alpha_paraphrase"]) >= 0 for r in paraphrases)
    assert read_rows(tmp_path / "gate_alpha_synthetic.csv")
    command = "python -m benchmarks.gate report --seeds 3 --skip-paper"
    assert all(command in r["command"] for r in [summary, *zero_shot, *paraphrases])


@pytest.mark.slow
def test_gate_paraphrases(tmp_path, icews):
    """``gate.py paraphrases`` (~1 min: pretrains the packaged gate, encodes every phrasing): a row
    per phrasing with its gap to its relation, plain and anchored; the summary beside, anchored
    held-out templates closer to their relations than plain, both with the command."""
    out = tmp_path / "gate_paraphrases_anchored.csv"
    run_script("-m", "benchmarks.gate", "paraphrases", "--out", str(out), timeout=600)
    rows = read_rows(out)
    assert {r["split"] for r in rows} == {"train", "heldout"} and (tmp_path / "gate_icews05-15.pt").is_file()
    assert all(float(r["gap_plain"]) >= 0 and float(r["gap_anchored"]) >= 0 for r in rows)
    summary = {(r["method"], r["phrasings"]): r for r in read_rows(tmp_path / "gate_paraphrase_summary.csv")}
    assert len(summary) == 6 and summary[("anchored", "heldout")]["temperature"]
    plain, anchored = (float(summary[(m, "heldout templates")]["median_gap"]) for m in ("plain", "anchored"))
    assert anchored < plain
    command = f"python -m benchmarks.gate paraphrases --out {out}"
    assert all(command in r["command"] for r in [*rows, *summary.values()])


def test_step_overhead_tiny(tmp_path):
    """``step_overhead``: the three variants through Lightning; the history counted in the step waits
    for the device, counted with the batch it does not, and neither does the family without one."""
    run_script(
        "-m", "benchmarks.step_overhead", "--epochs", "1", "--facts", "2000", "--batch", "250",
        "--out-dir", str(tmp_path),
    )  # fmt: skip
    rows = {r["variant"]: r for r in read_rows(tmp_path / "step_overhead.csv")}
    assert set(rows) == {"counts-in-step", "counts-in-loader", "no-history"}
    assert int(rows["counts-in-step"]["syncs_per_step"]) > 0
    assert int(rows["counts-in-loader"]["syncs_per_step"]) == 0 == int(rows["no-history"]["syncs_per_step"])
    assert all(int(r["steps"]) == 7 and float(r["step_ms_median"]) > 0 for r in rows.values())
    assert all("python -m benchmarks.step_overhead --epochs 1" in r["command"] for r in rows.values())


@pytest.mark.slow  # a minute: the test split's evaluation with a history term, twice
def test_precision_accuracy_tiny(tmp_path, icews):
    """``precision_accuracy``: float32 and bf16-mixed trained on the same facts, both evaluated."""
    run_script(
        "-m", "benchmarks.precision_accuracy", "--epochs", "1", "--facts", "1500", "--rank", "2",
        "--out-dir", str(tmp_path),
    )  # fmt: skip
    rows = read_rows(tmp_path / "precision_accuracy.csv")
    assert [r["precision"] for r in rows] == ["32-true", "bf16-mixed"]
    assert all(0 < float(r["time_aware_mrr"]) <= 1 and 0 < float(r["static_mrr"]) <= 1 for r in rows)


@pytest.mark.slow
def test_tune_accuracy_tiny(tmp_path):
    """``tune_accuracy.py`` on the synthetic KG: the config's own settings are trial 0, every trial
    has a row per epoch with its validation MRR, and a second call resumes the study from its journal."""
    out = tmp_path / "study.csv"
    args = ["-m", "benchmarks.tune_accuracy", "--data", "synthetic", "--epochs", "1", "--out", str(out)]
    run_script(*args, "--trials", "2")
    rows = read_rows(out)
    assert [r["trial"] for r in rows] == ["0", "1"] and rows[0]["baseline"] == "True"
    assert all(0 < float(r["valid_mrr"]) <= 1 and r["epoch"] == "1" for r in rows)
    run_script(*args, "--trials", "1")
    assert [r["trial"] for r in read_rows(out)] == ["0", "1", "2"]
    assert "best: trial" in out.with_suffix(".md").read_text()
