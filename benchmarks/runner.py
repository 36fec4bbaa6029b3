"""The one runner every benchmark is a spec on: rows → CSV (with its command and commit) → markdown → plot."""

import argparse
import contextlib
import csv
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

Row = dict[str, object]


def commit_of(root: Path = ROOT) -> str:
    """The checkout's commit (``+dirty`` when tracked files other than ``benchmarks/results/`` differ
    from it: a run's own CSVs, written before its later phases ask, do not count), or ``unknown``."""
    git = ["git", "-C", str(root)]
    try:
        head = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        code = [".", ":(exclude)benchmarks/results"]
        dirty = subprocess.run([*git, "diff", "--quiet", "HEAD", "--", *code], capture_output=True).returncode
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head.stdout.strip()}+dirty" if dirty else head.stdout.strip()


def command_line(
    module: str, argv: Sequence[str] | None = None, env: Sequence[str] = ("OMP_NUM_THREADS",)
) -> str:
    """The command that ran ``python -m benchmarks.<module>`` (``module`` may end in a section after a
    space: ``gate report``) with ``argv`` (the process's arguments when None), prefixed by the settings
    of the environment variables ``env`` that are set."""
    args = sys.argv[1:] if argv is None else list(argv)
    settings = [f"{name}={os.environ[name]}" for name in env if name in os.environ]
    return shlex.join([*settings, "python", "-m", *f"benchmarks.{module}".split(" "), *args])


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


def read_csv(path: Path, comments: bool = False) -> list[dict[str, str]]:
    """The rows of a CSV the runner wrote (values as strings); ``comments``: skip lines that start with
    ``#`` (the CSVs written before the runner)."""
    with open(path, newline="") as handle:
        return list(csv.DictReader(line for line in handle if not (comments and line.startswith("#"))))


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


def add_threads(parser: argparse.ArgumentParser, default: int | None = None) -> None:
    """``--threads``: torch's CPU threads while ``measure`` runs (``default`` None: torch's own)."""
    shown = "torch's" if default is None else default
    parser.add_argument("--threads", type=int, default=default, help=f"torch threads (default: {shown})")


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """torch's CPU threads set to ``threads`` (unchanged when None) for the duration."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def comma_list(allowed: Sequence[str] | None = None) -> Callable[[str], list[str]]:
    """An argparse ``type``: ``a,b`` -> ``["a", "b"]``, each item one of ``allowed`` when given."""

    def parse(text: str) -> list[str]:
        items = text.split(",")
        if allowed is not None and (unknown := [item for item in items if item not in allowed]):
            raise argparse.ArgumentTypeError(
                f"unknown {','.join(unknown)}; expected some of {','.join(allowed)}"
            )
        return items

    return parse


def machine() -> Row:
    """The machine's facts for a row: cpu, torch threads, 1-minute load average."""
    import torch

    cpu = platform.processor() or platform.machine()
    return {"cpu": cpu, "threads": torch.get_num_threads(), "load_1min": round(os.getloadavg()[0], 2)}


def synchronize(device: str) -> None:
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def timed(fn: Callable[[], object], device: str = "cpu") -> float:
    """Milliseconds of one call of ``fn`` (waiting for the GPU at both ends)."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return (time.perf_counter() - start) * 1e3


def interleaved(
    timers: dict[str, Callable[[], float]],
    rounds: int,
    warmup: int = 0,
    on_error: Callable[[str, Exception], None] | None = None,
) -> dict[str, list[float]]:
    """Milliseconds of ``rounds`` timed calls of each timer (each returns the ms it measured), after
    ``warmup`` untimed ones, one call per provider in turn, so a change in load hits all alike. With
    ``on_error``, a provider that raises is reported to it and dropped; without, the error propagates."""
    live = dict(timers)
    times: dict[str, list[float]] = {name: [] for name in timers}
    for i in range(warmup + rounds):
        for name in list(live):
            try:
                ms = live[name]()
            except Exception as error:
                if on_error is None:
                    raise
                on_error(name, error)
                del live[name]
                continue
            if i >= warmup:
                times[name].append(ms)
    return {name: times[name] for name in live}


def percentile(times: Sequence[float], q: int) -> float:
    """The ``q``-th percentile (inclusive method); the value itself for one time."""
    if len(times) < 2:
        return times[0]
    return statistics.quantiles(times, n=100, method="inclusive")[q - 1]


def spread(times: Sequence[float], low: int = 20, high: int = 80, prefix: str = "ms", digits: int = 4) -> Row:
    """``{ms_median, ms_p20, ms_p80}`` of ``times`` (the percentiles ``low`` and ``high``)."""
    row = {f"{prefix}_median": statistics.median(times)}
    row |= {f"{prefix}_p{low}": percentile(times, low), f"{prefix}_p{high}": percentile(times, high)}
    return {k: round(v, digits) for k, v in row.items()}


def subplots(*grid: int, **options):
    """``matplotlib.pyplot.subplots`` on the Agg backend (no display): ``(fig, axes)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*grid, **options)


def save(fig, path: Path, dpi: int = 120) -> None:
    """Lay ``fig`` out, write it to ``path`` and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: ``measure(args)`` yields rows; the fields are described in benchmarks/README.md."""

    name: str
    doc: str | None
    measure: Callable[[argparse.Namespace], Iterable[Row]]
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    summarize: Callable[[list[Row]], list[str]] | None = None
    plot: Callable[[list[Row], Path], None] | None = None
    columns: Sequence[str] | None = None
    csv_name: str | Callable[[argparse.Namespace], str] | None = None
    env: Sequence[str] = ("OMP_NUM_THREADS",)
    out_dir: bool | Path = False
    partial: bool = False
    empty_ok: bool = False

    @property
    def default_out(self) -> Path:
        name = self.csv_name if isinstance(self.csv_name, str) else None
        return RESULTS / f"{name or self.name.replace('.', '/')}.csv"

    def out_path(self, args: argparse.Namespace) -> Path:
        """The CSV of a run with ``args``."""
        if not self.out_dir:
            return args.out
        name = self.csv_name(args) if callable(self.csv_name) else self.default_out.stem
        return Path(args.out_dir) / f"{name}.csv"

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
        if self.out_dir:
            folder = RESULTS if self.out_dir is True else self.out_dir
            parser.add_argument("--out-dir", type=Path, default=folder, help="where the CSV goes")
        else:
            parser.add_argument(
                "--out", type=Path, default=self.default_out, help="the CSV (default: %(default)s)"
            )
        parser.add_argument("--no-plot", action="store_true", help="skip the chart")
        return parser

    def run(self, args: argparse.Namespace, command: str) -> list[Row]:
        """Measure (with ``--threads`` torch threads, restored after), then write the CSV, its markdown
        and its plot; returns the rows."""
        args.notes = []
        out, commit = self.out_path(args), commit_of()  # the code that measures, before any later checkout
        rows: list[Row] = []
        with torch_threads(getattr(args, "threads", None)):
            for row in self.measure(args):
                rows.append(row)
                print(", ".join(f"{k}={v}" for k, v in row.items()), flush=True)
                if self.partial:
                    write_csv(out, rows, command, commit)
        if not rows and not self.empty_ok:
            raise SystemExit(f"benchmarks.{self.name}: measured nothing (check its options)")
        write_csv(out, rows, command, commit)
        summary = (self.summarize(rows) if self.summarize is not None and rows else []) + args.notes
        columns = self.columns or header_of(rows)
        markdown = [f"`{command}` (commit {commit})", "", *summary, "", markdown_table(rows, columns), ""]
        out.with_suffix(".md").write_text("\n".join(markdown))
        for line in summary:
            print(line)
        if self.plot is not None and not args.no_plot and rows:
            self.plot(rows, out.with_suffix(".png"))
        written = [p for p in (out, out.with_suffix(".md"), out.with_suffix(".png")) if p.exists()]
        print(f"wrote {', '.join(str(p) for p in written)}\ncommand: {command}")
        return rows

    def main(self, argv: Sequence[str] | None = None) -> list[Row]:
        """Parse ``argv`` (the process's arguments when None) and run."""
        args = self.parser().parse_args(argv)
        return self.run(args, command_line(self.name, argv, self.env))
