"""``benchmarks.runner``: a spec's rows reach the CSV with their command and commit, the markdown table
and the plot; a benchmark that measures nothing fails with a line that names it."""

from __future__ import annotations

import csv
import re

import pytest

from benchmarks.runner import (
    Benchmark,
    add_threads,
    commit_of,
    interleaved,
    machine,
    markdown_table,
    percentile,
    spread,
    timed,
)


def _measure(args):
    for i in range(args.n):
        yield {"provider": f"p{i}", "ms": 1.5 * (i + 1)}
    if args.n:
        yield {"provider": "late", "ms": 9.0, "note": "a key only this row has"}


def _spec(**extra) -> Benchmark:
    return Benchmark(
        "toy",
        "A toy benchmark.\nIts details.",
        _measure,
        add_arguments=lambda parser: parser.add_argument("--n", type=int, default=2),
        summarize=lambda rows: [f"rows: {len(rows)}"],
        **extra,
    )


def test_rows_reach_the_csv_with_command_and_commit(tmp_path):
    out = tmp_path / "toy.csv"
    drawn = []
    rows = _spec(plot=lambda rows, path: drawn.append((len(rows), path))).main(
        ["--n", "3", "--out", str(out)]
    )
    with open(out, newline="") as handle:
        written = list(csv.DictReader(handle))
    assert [r["provider"] for r in written] == ["p0", "p1", "p2", "late"] == [r["provider"] for r in rows]
    assert list(written[0]) == ["provider", "ms", "note", "command", "commit"]
    assert written[3]["note"] == "a key only this row has" and written[0]["note"] == ""
    assert written[0]["command"].endswith(
        f"python -m benchmarks.toy --n 3 --out {out}"
    )  # after OMP_NUM_THREADS=
    assert re.fullmatch(r"[0-9a-f]{4,40}(\+dirty)?|unknown", written[0]["commit"])
    markdown = out.with_suffix(".md").read_text()
    assert "rows: 4" in markdown and "| p2 | 4.5 |" in markdown and "command" not in markdown.splitlines()[3]
    assert drawn == [(4, out.with_suffix(".png"))]


def test_no_plot_and_measuring_nothing(tmp_path):
    drawn = []
    _spec(plot=lambda rows, path: drawn.append(path)).main(["--out", str(tmp_path / "a.csv"), "--no-plot"])
    assert drawn == []
    with pytest.raises(SystemExit, match="benchmarks.toy: measured nothing"):
        _spec().main(["--n", "0", "--out", str(tmp_path / "b.csv")])


def test_markdown_table_escapes_and_rounds():
    table = markdown_table([{"a": "x|y", "b": 0.123456}])
    assert table.splitlines() == ["| a | b |", "| --- | --- |", "| x\\|y | 0.1235 |"]


def test_commit_of_a_folder_outside_git(tmp_path):
    assert commit_of(tmp_path) == "unknown"


def test_commit_of_is_dirty_for_changed_code_not_for_changed_results(tmp_path):
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "benchmarks" / "results" / "run.csv").write_text("a\n1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    clean = commit_of(tmp_path)
    assert re.fullmatch(r"[0-9a-f]{4,40}", clean)
    (tmp_path / "benchmarks" / "results" / "run.csv").write_text("a\n2\n")  # a run's own CSV
    assert commit_of(tmp_path) == clean
    (tmp_path / "code.py").write_text("x = 2\n")
    assert commit_of(tmp_path) == f"{clean}+dirty"


def test_out_dir_partial_rows_notes_and_measuring_nothing_allowed(tmp_path):
    from benchmarks.runner import read_csv

    seen = []

    def measure(args):
        args.notes.append("skipped: one case")
        yield {"case": "a", "threads": args.threads}
        seen.append(read_csv(tmp_path / f"toy_{args.tag}.csv"))  # written after the first row already
        yield {"case": "b", "threads": args.threads}

    def add_arguments(parser):
        add_threads(parser)
        parser.add_argument("--tag", default="x")

    spec = Benchmark("toy", "Toy.", measure, add_arguments, out_dir=True, partial=True,
                     csv_name=lambda args: f"toy_{args.tag}")  # fmt: skip
    rows = spec.main(["--out-dir", str(tmp_path), "--threads", "1"])
    assert [r["case"] for r in seen[0]] == ["a"] and [r["case"] for r in rows] == ["a", "b"]
    assert "skipped: one case" in (tmp_path / "toy_x.md").read_text()
    empty = Benchmark("toy", "Toy.", lambda args: iter(()), out_dir=True, empty_ok=True)
    assert empty.main(["--out-dir", str(tmp_path)]) == []
    assert (tmp_path / "toy.csv").read_text().strip() == "command,commit"


def test_timing_helpers():
    calls = []
    times = interleaved({"a": lambda: calls.append("a") or 1.0, "b": lambda: calls.append("b") or 2.0}, 2, 1)
    assert calls == ["a", "b"] * 3 and times == {"a": [1.0, 1.0], "b": [2.0, 2.0]}
    assert spread([1.0, 2.0, 3.0, 4.0, 5.0]) == {"ms_median": 3.0, "ms_p20": 1.8, "ms_p80": 4.2}
    assert percentile([7.0], 80) == 7.0 and timed(lambda: None) >= 0
    facts = machine()
    assert set(facts) >= {"cpu", "threads", "load_1min"}
