"""Tables and the bar chart of the LoCoMo benchmark (``benchmarks.locomo.run`` writes the rows)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rotmem.data.locomo import CATEGORIES

PUBLISHED = {
    "RoMem (paper; LLM + text-embedding-3-small)": 0.857,
    "HippoRAG (in the RoMem paper; same)": 0.815,
}


def _value(summary: Sequence[dict], config: str, k: int, group: str, key: str = "evidence_recall"):
    for row in summary:
        if row["config"] == config and row["k"] == k and row["group"] == group:
            return row[key]
    return None


def _cell(value) -> str:
    return (
        "–" if value is None or value == "" else (f"{value:.3f}" if isinstance(value, float) else str(value))
    )


def markdown(summary: Sequence[dict], notes: Sequence[str], encoder: str, reader: str | None = None) -> str:
    without_llm = f"no LLM, encoder {encoder}"
    configs = list(dict.fromkeys(r["config"] for r in summary))
    n = _value(summary, configs[0], 10, "all", "questions")
    lines = [
        f"**Evidence recall@k, all categories** ({n} questions; {without_llm}; the published rows use an "
        "LLM and text-embedding-3-small)",
        "",
        "| memory | R@5 | R@10 | R@15 | temporal R@10 | cat 1-4 R@10 | tuning R@10 | held-out R@10 "
        "| tokens @10 | p50 ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for config in configs:
        cells = [_value(summary, config, k, "all") for k in (5, 10, 15)]
        cells += [_value(summary, config, 10, g) for g in ("cat2", "cat1-4", "tuning", "held-out")]
        cells += [
            _value(summary, config, 10, "all", "evidence_tokens"),
            _value(summary, config, 10, "all", "p50_ms"),
        ]
        lines.append(f"| {config} | " + " | ".join(_cell(c) for c in cells) + " |")
    for name, value in PUBLISHED.items():
        lines.append(f"| {name} | – | {value:.3f} | – | – | – | – | – | – | – |")
    lines += [
        "",
        f"**Evidence recall@10 per category** ({without_llm}; published figures above use an LLM)",
        "",
        "| memory | "
        + " | ".join(
            f"{c} {name} ({_value(summary, configs[0], 10, f'cat{c}', 'questions') or 0})"
            for c, name in CATEGORIES.items()
        )
        + " |",
        "| --- |" + " ---: |" * len(CATEGORIES),
    ]
    for config in configs:
        lines.append(
            f"| {config} | "
            + " | ".join(_cell(_value(summary, config, 10, f"cat{c}")) for c in CATEGORIES)
            + " |"
        )
    if reader:
        lines += ["", f"**Answer token F1 at k = 10, reader {reader}**", "", "| memory | all | cat 1-4 |",
                  "| --- | ---: | ---: |"]  # fmt: skip
        for config in configs:
            cells = [_value(summary, config, 10, g, "answer_f1") for g in ("all", "cat1-4")]
            lines.append(f"| {config} | " + " | ".join(_cell(c) for c in cells) + " |")
    lines.append("")
    return "\n".join(lines + [f"- {note}" for note in notes]) + "\n"


def plot(summary: Sequence[dict], path: Path, encoder: str) -> None:
    """Bars of evidence recall@10, overall and temporal, per memory, beside the published figures."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no chart (pip install matplotlib)")
        return
    configs = list(dict.fromkeys(r["config"] for r in summary))
    overall = [_value(summary, c, 10, "all") or 0.0 for c in configs]
    temporal = [_value(summary, c, 10, "cat2") or 0.0 for c in configs]
    names = configs + list(PUBLISHED)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    x = range(len(names))
    ax.bar([i - 0.2 for i in x][: len(configs)], overall, 0.4, label="all categories")
    ax.bar([i + 0.2 for i in x][: len(configs)], temporal, 0.4, label="temporal (category 2)")
    ax.bar(
        list(x)[len(configs) :],
        list(PUBLISHED.values()),
        0.4,
        color="grey",
        label="published (LLM + OpenAI embedder)",
    )
    ax.set_xticks(list(x), [n.split(" (")[0] for n in names], rotation=30, ha="right")
    ax.set_ylabel("evidence recall@10")
    ax.set_ylim(0, 1)
    ax.set_title(f"LoCoMo evidence recall@10 (rotmem rows: no LLM, {encoder})")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
