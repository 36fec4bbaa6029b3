"""The paper-size learning curve beside the paper's figure and the race's best config.

python -m benchmarks.plot_paper_curve
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.plot_paper_curve (from the checkout's root)")

import argparse
from pathlib import Path

from benchmarks.runner import RESULTS, read_csv, save, subplots

PAPER_STATIC_MRR = 0.726  # RoMem paper, ICEWS05-15, static filter


def read_curve(path: Path, model: str) -> dict[str, list[tuple[float, float]]]:
    """``{filter: [(training minutes, MRR), ...]}`` of ``model``'s realistic-tie rows in ``path``."""
    if not path.is_file():
        raise SystemExit(f"{path}: no such file; run python -m benchmarks.accuracy_race first")
    curve: dict[str, list[tuple[float, float]]] = {}
    for row in read_csv(path):
        if row["model"] == model and row["tie"] == "realistic":
            curve.setdefault(row["filter"], []).append((float(row["train_seconds"]) / 60, float(row["mrr"])))
    if not curve:
        raise SystemExit(f"{path}: no realistic-tie rows of model {model!r}")
    return curve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--curve", type=Path, default=RESULTS / "paper_curve" / "accuracy_race.csv")
    parser.add_argument("--model", default="icews05-15-chronor")
    parser.add_argument("--race", type=Path, default=RESULTS / "accuracy_race" / "accuracy_race.csv")
    parser.add_argument("--best", default="icews05-15-romem-complex-day", help="the race's model to draw")
    parser.add_argument("--out", type=Path, help="default: paper_curve.png beside --curve")
    args = parser.parse_args(argv)
    paper, best = read_curve(args.curve, args.model), read_curve(args.race, args.best)
    fig, ax = subplots(figsize=(8, 4.5))
    for curve, name, color in ((paper, args.model, "C0"), (best, args.best, "C3")):
        for kind, style in (("static", "-"), ("time-aware", "--")):
            points = curve.get(kind, [])
            minutes, mrr = [p[0] for p in points], [p[1] for p in points]
            ax.plot(minutes, mrr, style, color=color, marker=".", label=f"{name}, {kind}")
    ax.axhline(PAPER_STATIC_MRR, color="grey", linestyle=":", label=f"paper, static ({PAPER_STATIC_MRR})")
    ax.set(xlabel="training minutes (2-core CPU, this machine)", ylabel="ICEWS05-15 test MRR, realistic ties")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center right")
    out = args.out or args.curve.with_name("paper_curve.png")
    save(fig, out)
    for kind, points in paper.items():
        minutes, mrr = points[-1]
        print(f"{args.model} {kind}: {mrr:.4f} after {minutes:.1f} min ({len(points)} evaluations)")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
