"""Draw ``kernels_<device>.csv`` (from ``benchmarks/kernels.py``): speed-up and memory vs eager.

python -m benchmarks.plot_kernels benchmarks/results/kernels_cpu.csv   # writes the .png beside it
"""

from __future__ import annotations

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.plot_kernels (from the checkout's root)")

import csv
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot(csv_path: Path, png_path: Path) -> None:
    """One row of panels per (shape, dtype): speed-up over eager per op and mode, and peak memory."""
    with Path(csv_path).open() as f:
        rows = [r for r in csv.DictReader(f) if r["op"] != "copy"]
    groups = sorted({(r["shape"], r["dtype"]) for r in rows})
    providers = [p for p in ("compile", "native", "triton") if any(r["provider"] == p for r in rows)]
    fig, axes = plt.subplots(len(groups), 2, figsize=(15, 4.2 * len(groups)), squeeze=False)
    for (shape, dtype), (speed_ax, memory_ax) in zip(groups, axes, strict=True):
        here = [r for r in rows if r["shape"] == shape and r["dtype"] == dtype]
        eager = {(r["op"], r["mode"]): r for r in here if r["provider"] == "eager"}
        keys = [k for k in dict.fromkeys((r["op"], r["mode"]) for r in here) if k in eager]
        width = 0.8 / max(len(providers), 1)
        for i, provider in enumerate(providers):
            found = {(r["op"], r["mode"]): r for r in here if r["provider"] == provider}
            speed = [
                float(eager[k]["ms_median"]) / float(found[k]["ms_median"]) if k in found else 0 for k in keys
            ]
            memory = [
                float(found[k]["peak_mem_mb"]) / max(float(eager[k]["peak_mem_mb"]), 1e-9)
                if k in found
                else 0
                for k in keys
            ]
            offsets = [j + (i - (len(providers) - 1) / 2) * width for j in range(len(keys))]
            speed_ax.bar(offsets, speed, width, label=provider)
            memory_ax.bar(offsets, memory, width, label=provider)
        labels = [f"{op}\n{mode}" for op, mode in keys]
        speed_ax.set_yscale("log")  # speed-ups span 0.5x to 50x
        for ax, title in ((speed_ax, "speed-up over eager (x, log)"), (memory_ax, "peak memory / eager")):
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_xticks(range(len(keys)), labels, fontsize=7, rotation=45, ha="right")
            ax.set_title(f"{title}: {shape}, {dtype}", fontsize=9)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    source = Path(sys.argv[1])
    plot(source, source.with_suffix(".png"))
    print(f"wrote {source.with_suffix('.png')}")
