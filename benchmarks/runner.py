"""The one runner every benchmark is a spec on: rows → CSV (with its command and commit) → markdown → plot.

A benchmark module defines a :class:`Benchmark` and ends with ``if __name__ == "__main__":
SPEC.main()``. The runner owns what every benchmark used to write itself: the argument parser's
``--out`` (the CSV), the ``command`` and ``commit`` columns, the markdown table beside the CSV
(``.md``: the summary lines, then the rows), and the optional plot (``.png``). A benchmark writes
only what it measures::

    def measure(args) -> Iterator[dict]:
        yield {"provider": "eager", "ms": 1.2}

    SPEC = Benchmark("eval_speed", __doc__, measure, add_arguments=..., summarize=...)

Rows are flat dicts; the first row's keys (then any new keys of later rows) are the CSV's header.
"""

from __future__ import annotations

import argparse
import csv
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

Row = dict[str, object]


def commit_of(root: Path = ROOT) -> str:
    """The checkout's commit (``+dirty`` when tracked files differ from it), or ``unknown``."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "diff", "--quiet", "HEAD"], capture_output=True
        ).returncode
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}+dirty" if dirty else head


def command_line(
    module: str, argv: Sequence[str] | None = None, env: Sequence[str] = ("OMP_NUM_THREADS",)
) -> str:
    """The command that ran ``python -m benchmarks.<module>`` with ``argv`` (the process's arguments when
    None), prefixed by the settings of the environment variables ``env`` that are set."""
    args = sys.argv[1:] if argv is None else list(argv)
    settings = [f"{name}={os.environ[name]}" for name in env if name in os.environ]
    return shlex.join([*settings, "python", "-m", f"benchmarks.{module}", *args])


def header_of(rows: Iterable[Row]) -> list[str]:
    """Every key of ``rows`` in first-seen order."""
    return list(dict.fromkeys(key for row in rows for key in row))


def write_csv(path: Path, rows: Sequence[Row], command: str, commit: str) -> None:
    """``rows`` to the CSV ``path``, each with the columns ``command`` and ``commit`` last."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*header_of(rows), "command", "commit"], restval="")
        writer.writeheader()
        writer.writerows({**row, "command": command, "commit": commit} for row in rows)


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV the runner wrote (values as strings)."""
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def markdown_table(rows: Sequence[Row], columns: Sequence[str] | None = None) -> str:
    """``rows`` as a GitHub markdown table of ``columns`` (default: every key); floats to 4 significant
    figures."""
    columns = list(columns or header_of(rows))

    def cell(value: object) -> str:
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: what it measures, and how its rows are summarised and drawn.

    ``name``: the module under ``benchmarks`` (``"eval_speed"``, ``"temporal_qa.run"``); its CSV is
    ``results/<csv_name>.csv`` unless ``--out``. ``doc``: the module docstring (its first line is the
    ``--help`` description). ``measure(args)`` yields rows. ``add_arguments(parser)`` adds the
    benchmark's own options. ``summarize(rows)`` returns lines printed and put above the markdown table
    (ratios, means); ``plot(rows, path)`` draws ``path`` (a ``.png``). ``columns``: the markdown
    table's columns (default: all but ``command`` and ``commit``).
    """

    name: str
    doc: str | None
    measure: Callable[[argparse.Namespace], Iterable[Row]]
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    summarize: Callable[[list[Row]], list[str]] | None = None
    plot: Callable[[list[Row], Path], None] | None = None
    columns: Sequence[str] | None = None
    csv_name: str | None = None
    env: Sequence[str] = ("OMP_NUM_THREADS",)

    @property
    def default_out(self) -> Path:
        return RESULTS / f"{self.csv_name or self.name.replace('.', '_')}.csv"

    def parser(self) -> argparse.ArgumentParser:
        doc = (self.doc or self.name).strip()
        parser = argparse.ArgumentParser(
            prog=f"python -m benchmarks.{self.name}",
            description=doc.splitlines()[0],
            epilog="\n".join(doc.splitlines()[1:]) or None,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if self.add_arguments is not None:
            self.add_arguments(parser)
        parser.add_argument(
            "--out", type=Path, default=self.default_out, help="the CSV (default: %(default)s)"
        )
        parser.add_argument("--no-plot", action="store_true", help="skip the chart")
        return parser

    def run(self, args: argparse.Namespace, command: str) -> list[Row]:
        """Measure, then write the CSV, its markdown and its plot; returns the rows."""
        commit = commit_of()  # the code that measures, before any later checkout
        rows: list[Row] = []
        for row in self.measure(args):
            rows.append(row)
            print(", ".join(f"{k}={v}" for k, v in row.items()), flush=True)
        if not rows:
            raise SystemExit(f"benchmarks.{self.name}: measured nothing (check its options)")
        write_csv(args.out, rows, command, commit)
        summary = self.summarize(rows) if self.summarize is not None else []
        columns = self.columns or header_of(rows)
        markdown = [f"`{command}` (commit {commit})", "", *summary, "", markdown_table(rows, columns), ""]
        args.out.with_suffix(".md").write_text("\n".join(markdown))
        for line in summary:
            print(line)
        written = [args.out, args.out.with_suffix(".md")]
        if self.plot is not None and not args.no_plot:
            self.plot(rows, args.out.with_suffix(".png"))
            written.append(args.out.with_suffix(".png"))
        print(f"wrote {', '.join(str(p) for p in written)}\ncommand: {command}")
        return rows

    def main(self, argv: Sequence[str] | None = None) -> list[Row]:
        """Parse ``argv`` (the process's arguments when None) and run."""
        args = self.parser().parse_args(argv)
        return self.run(args, command_line(self.name, argv, self.env))
