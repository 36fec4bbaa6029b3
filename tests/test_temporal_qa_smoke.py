"""``python -m benchmarks.temporal_qa --quick`` on a tiny graph: every memory, every slice, the files."""

from __future__ import annotations

import csv

import pytest

from benchmarks.datasets.temporal_qa import generate
from benchmarks.temporal_qa.run import MEMORIES, SPEC, Setup, parse_args
from rotmem.memory.retrieval.baselines import DEPTH
from tests.test_temporal_qa_questions import SMALL, WINDOW, tiny_graph

pytestmark = pytest.mark.slow


def test_quick_run_on_a_tiny_graph(tmp_path) -> None:
    facts = tiny_graph()
    questions = generate(facts, WINDOW, seed=5, counts={key: 3 for key in SMALL})
    args = parse_args(["--quick", "--out", str(tmp_path), "--name", "t"], Setup(facts, WINDOW, questions))
    summary = SPEC.run(args, "python -m benchmarks.temporal_qa --quick")
    with open(tmp_path / "t.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["memory"] for r in rows} == set(MEMORIES)
    overall = {r["memory"]: r for r in rows if r["slice"] == "all"}
    for r in overall.values():
        assert int(r["questions"]) == len(questions)
        mrr, h1, h10 = float(r["mrr"]), float(r["hits1"]), float(r["hits10"])
        assert 0 <= h1 <= mrr <= h10 <= 1 and float(r["latency_p50_ms"]) > 0
    # the symbolic baseline filters by the stated time: on a graph this small it must find something
    assert float(overall["symbolic"]["hits10"]) > 0
    assert {r["value"] for r in rows if r["slice"] == "qtype"} == {q.qtype for q in questions}
    assert len(summary) == len(rows) and DEPTH == 10
    text = (tmp_path / "t.md").read_text()
    assert "python -m benchmarks.temporal_qa --quick" in text and "0.337" in text
    assert (tmp_path / "t.png").stat().st_size > 0


def test_a_grid_of_weights_gives_a_row_set_per_setting(tmp_path) -> None:
    """``--alpha-g`` and ``--beta`` with several values (the dev-set grid): each setting its rows."""
    facts = tiny_graph()
    questions = generate(facts, WINDOW, seed=5, counts={key: 2 for key in SMALL})
    argv = [
        "--quick",
        "--memories",
        "dense",
        "romem-no-gate",
        "romem-hybrid-no-gate",
        "--alpha-g",
        "0.3",
        "1",
    ]
    argv += ["--beta", "0.5", "2", "--out", str(tmp_path), "--name", "grid", "--no-plot"]
    SPEC.run(parse_args(argv, Setup(facts, WINDOW, questions)), "python -m benchmarks.temporal_qa --quick")
    with open(tmp_path / "grid.csv") as handle:
        names = list(dict.fromkeys(r["memory"] for r in csv.DictReader(handle)))
    assert names == [
        "dense",
        "romem-no-gate alpha_g=0.3",
        "romem-no-gate alpha_g=1",
        "romem-hybrid-no-gate beta=0.5",
        "romem-hybrid-no-gate beta=2",
    ]
