"""Temporal question answering over ICEWS05-15 as an agent memory sees it (MultiTQ-style questions).

    ROTMEM_DATA_DIR=../shared/data python -m benchmarks.temporal_qa            # test set, 2012
    python -m benchmarks.temporal_qa --split dev                                   # tune here
    python -m benchmarks.temporal_qa --quick                                       # smoke, seconds

(run from the repository root, so that ``benchmarks`` is importable).

1. Questions (``benchmarks.temporal_qa.questions``) about the window (default the year 2012), gold
   answers over the whole graph (train + valid + test); dev seed 1, test seed 2.
2. Ingestion: the window's facts in date order, one session per day (``TemporalMemory.add_sessions``,
   one batch per ``--days-per-batch`` days), each fact at its day; facts/s include embedding.
3. RoMem fitted online on what the memory holds (``TemporalMemory.fit``, no Lightning), three ways:
   with the Semantic Speed Gate's speeds (``--gate``, a Phase-1 gate trained on the ICEWS05-15
   training split; default: pretrained here), with alpha = 1 (no gate), and TNTComplEx per-day
   embeddings in RoMem's place (discrete time); and, fourth, TNTComplEx with the history term of
   ``icews05-15-tntcomplex-history`` (counts of the memory's own facts near the asked day), the
   accuracy work's best model on validation, at the same fit settings.
4. Every memory (``benchmarks.temporal_qa.memories``) ranks the top 10 facts of each question.
   Retrieval: rank of the first fact with the question's relation and named entity whose answer slot
   holds a gold answer (a time answer: its date starts with a gold period); MRR@10, Hits@1/5/10.
   Reader (deterministic, no LLM): the answer slot of the ranked facts in order (entity, or the fact's
   date), duplicates dropped; answer Hits@1/@10 (time answers matched by prefix).
   Latency: wall time of the ranking call per question, the question's embedding excluded (computed
   once per question beforehand).

Writes ``temporal_qa[_dev].csv`` (metrics per memory x slice), ``.md`` and ``.png`` under ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from benchmarks.temporal_qa import memories
from benchmarks.temporal_qa.questions import SPLITS, Question, generate
from rotmem import configs
from rotmem.data import date_of, day_of, load_dataset
from rotmem.memory import HashingEncoder, SentenceEncoder
from rotmem.memory.temporal.fit import FitConfig
from rotmem.memory.temporal.memory import TemporalMemory
from rotmem.memory.temporal.records import TemporalFact

RESULTS = Path(__file__).resolve().parents[1] / "results" / "temporal_qa"
SEEDS = {name: seed for name, (seed, _) in SPLITS.items()}
MEMORIES = (
    "dense", "bm25", "hybrid", "symbolic", "symbolic-named", "tem", "romem-gate", "romem-no-gate", "discrete",
    "romem-hybrid", "romem-hybrid-no-gate", "history", "history-hybrid", "hybrid-time", "romem-hybrid-time",
    "history-hybrid-time",
)  # fmt: skip
TITLES = {
    "dense": "dense MiniLM (fact sentences)",
    "bm25": "BM25",
    "hybrid": "hybrid (dense + BM25 + date boost)",
    "symbolic": "symbolic (time filter + date sort)",
    "symbolic-named": "symbolic, date sort among facts naming the question's entities",
    "tem": "TEM (labels: current first)",
    "romem-gate": "TemporalMemory, RoMem + gate",
    "romem-no-gate": "TemporalMemory, RoMem, one speed (no gate)",
    "discrete": "TemporalMemory, discrete time (TNTComplEx)",
    "romem-hybrid": "hybrid + RoMem re-rank (gate)",
    "romem-hybrid-no-gate": "hybrid + RoMem re-rank (no gate)",
    "history": "TemporalMemory, TNTComplEx + history",
    "history-hybrid": "hybrid + TNTComplEx-history re-rank",
    "hybrid-time": "hybrid + time constraint",
    "romem-hybrid-time": "hybrid + time constraint + RoMem re-rank (gate)",
    "history-hybrid-time": "hybrid + time constraint + TNTComplEx-history re-rank (BestMemory.preset)",
}
RERANKS = {  # fit -> its re-rank
    "romem-gate": "romem-hybrid", "romem-no-gate": "romem-hybrid-no-gate", "history": "history-hybrid",
}  # fmt: skip
TIMED_RERANKS = {"romem-gate": "romem-hybrid-time", "history": "history-hybrid-time"}  # fit -> re-rank + time
HISTORY_CONFIG = "icews05-15-tntcomplex-history"  # the accuracy work's best model on validation
PUBLISHED = (
    "Published MultiTQ retrieval MRR (RoMem paper): RoMem 0.337, without RoMem 0.203, no gate 0.104, "
    "discrete time 0.045. Those use MultiTQ's own questions, an LLM and another embedder: they are "
    "not comparable to the numbers here, only the signs of the ablations are."
)


class CachedEncoder:
    """An encoder whose single-text calls (the questions) are served from ``prime``d vectors."""

    def __init__(self, encoder):
        self.encoder, self.name = encoder, encoder.name
        self.cache: dict[str, np.ndarray] = {}
        self.stored: dict[str, np.ndarray] = {}  # ``load``: fact sentences -> vectors

    def prime(self, texts: Sequence[str]) -> None:
        vectors = self.encoder.encode(list(texts))
        self.cache.update({t: v[None, :] for t, v in zip(texts, vectors, strict=True)})

    def encode(self, texts: list[str]) -> np.ndarray:
        if len(texts) == 1 and texts[0] in self.cache:
            return self.cache[texts[0]]
        if self.stored and all(t in self.stored for t in texts):
            return np.stack([self.stored[t] for t in texts])
        return self.encoder.encode(texts)

    def load(self, path: Path) -> int:
        """Serve the fact sentences of the memory file ``path`` (written by this benchmark with the
        same encoder) from their stored vectors, the encoder's own: accuracy runs skip re-embedding
        the window; the ingestion speed is then not a measurement. Returns the sentences held."""
        import sqlite3

        from rotmem.memory.tem.store import fact_text

        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            (name,) = db.execute("SELECT value FROM meta WHERE key = 'encoder'").fetchone()
            if name != self.name:
                raise ValueError(f"{path} was embedded with {name}, not {self.name}")
            rows = db.execute("SELECT subject, relation, object, vector FROM facts").fetchall()
        self.stored = {fact_text(h, r, t): np.frombuffer(v, dtype="<f4") for h, r, t, v in rows}
        return len(self.stored)


@dataclass
class Setup:
    facts: list[tuple[str, str, str, int]]  # the whole graph
    window: tuple[int, int]
    questions: list[Question]


# --- ingestion ---------------------------------------------------------------------------------------
def history_windows() -> dict[str, dict]:
    """The history block of ``HISTORY_CONFIG``, as ``FitConfig`` takes it (``history=``)."""
    return {"history": configs.load(configs.resolve(HISTORY_CONFIG))["model"]["history"]}


def ingest(memory: TemporalMemory, facts: Sequence[tuple[str, str, str, int]], days_per_batch: int) -> dict:
    """The facts in date order, one session per day; returns facts, sessions, seconds, facts/s."""
    by_day: dict[int, list] = defaultdict(list)
    for h, r, t, d in sorted(facts, key=lambda f: f[3]):
        by_day[d].append((h, r, t, d))
    days = sorted(by_day)
    t0 = time.perf_counter()
    for start in range(0, len(days), days_per_batch):
        memory.add_sessions(
            dict(session_id=date_of(d), facts=by_day[d], date=d) for d in days[start : start + days_per_batch]
        )
    seconds = time.perf_counter() - t0
    return {
        "facts": len(facts),
        "sessions": len(days),
        "ingest_s": seconds,
        "facts_per_s": len(facts) / seconds,
    }


def change_rate_speeds(facts: Sequence[TemporalFact]) -> dict[str, float]:
    """Per relation, the fraction of consecutive same-slot observations whose tail changed (no MLP:
    the ``--quick`` stand-in for a gate)."""
    slots: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
    for f in facts:
        slots[(f.head, f.relation)].append((f.t_happen, f.tail))
    changed, pairs = defaultdict(int), defaultdict(int)
    for (_, relation), seen in slots.items():
        seen.sort()
        for (_, a), (_, b) in zip(seen, seen[1:], strict=False):
            pairs[relation] += 1
            changed[relation] += a != b
    return {r: changed[r] / pairs[r] for r in pairs}


def pretrain_gate(path: Path) -> Path:
    """A Phase-1 gate on the ICEWS05-15 training split (the packaged gate-icews05-15 settings)."""
    import yaml

    from lightning_modules.phase1_gate import GateTransitionData
    from lightning_modules.phase1_gate import pretrain_gate as fit_gate
    from rotmem import configs

    config = yaml.safe_load(configs.resolve("gate-icews05-15").read_text())
    data_args = {k: v for k, v in config["data"].items() if k not in ("dataset", "data_dir")}
    data = GateTransitionData(**data_args)
    module = fit_gate(
        data, lr=float(config["model"]["lr"]), seed=int(config.get("seed_everything", 0)),
        max_epochs=int(config["trainer"]["max_epochs"]),
    )  # fmt: skip
    module.gate.save(path, source="benchmarks.temporal_qa: gate-icews05-15 on the ICEWS05-15 train split")
    return path


# --- evaluation --------------------------------------------------------------------------------------
def relevant(fact: TemporalFact, q: Question) -> bool:
    """The fact has the question's relation and named entities and its answer slot holds a gold answer."""
    if fact.relation != q.relation:
        return False
    if q.answer_side == "head":
        return fact.tail == q.tail and fact.head in q.gold
    if q.answer_side == "tail":
        return fact.head == q.head and fact.tail in q.gold
    day = date_of(fact.t_happen)
    return fact.head == q.head and fact.tail == q.tail and any(day.startswith(g) for g in q.gold)


def reader_answers(facts: Sequence[TemporalFact], q: Question) -> list[str]:
    """The deterministic reader: the answer slot of each ranked fact, duplicates dropped."""
    slot = {"head": lambda f: f.head, "tail": lambda f: f.tail, "time": lambda f: date_of(f.t_happen)}
    return list(dict.fromkeys(slot[q.answer_side](f) for f in facts))


def correct(answer: str, q: Question) -> bool:
    return any(answer.startswith(g) for g in q.gold) if q.answer_type == "time" else answer in q.gold


def evaluate(
    name: str,
    rank: Callable,
    questions: Sequence[Question],
    by_id: dict[int, TemporalFact],
    encoder: CachedEncoder,
) -> list[dict]:
    rows = []
    for q in questions:
        vector = encoder.cache[q.text][0]
        t0 = time.perf_counter()
        ids = rank(q.text, vector, day_of(q.asked_on))
        latency = time.perf_counter() - t0
        facts = [by_id[i] for i in ids]
        first = next((i + 1 for i, f in enumerate(facts) if relevant(f, q)), None)
        answers = reader_answers(facts, q)
        rows.append(
            dict(
                memory=name, qid=q.qid, qtype=q.qtype, answer_type=q.answer_type, granularity=q.granularity,
                rank=first, answer_hit1=bool(answers) and correct(answers[0], q),
                answer_hit10=any(correct(a, q) for a in answers[:10]), latency_ms=1000 * latency,
            )
        )  # fmt: skip
    return rows


def summarise(rows: Sequence[dict]) -> list[dict]:
    """Metrics per memory x slice (``all``, each type, granularity, answer type, time-constrained)."""
    slices: list[tuple[str, str, Callable[[dict], bool]]] = [("all", "all", lambda r: True)]
    slices.append(("time_constrained", "yes", lambda r: r["qtype"] != "current"))
    for key in ("qtype", "granularity", "answer_type"):
        for value in sorted({r[key] for r in rows}):
            slices.append((key, value, lambda r, key=key, value=value: r[key] == value))
    out = []
    for name in dict.fromkeys(r["memory"] for r in rows):
        mine = [r for r in rows if r["memory"] == name]
        for key, value, keep in slices:
            part = [r for r in mine if keep(r)]
            if not part:
                continue
            ranks = [r["rank"] for r in part]
            latency = sorted(r["latency_ms"] for r in part)
            out.append(
                dict(
                    memory=name, slice=key, value=value, questions=len(part),
                    mrr=round(statistics.fmean(1 / x if x else 0.0 for x in ranks), 4),
                    hits1=round(statistics.fmean(bool(x and x <= 1) for x in ranks), 4),
                    hits5=round(statistics.fmean(bool(x and x <= 5) for x in ranks), 4),
                    hits10=round(statistics.fmean(bool(x and x <= 10) for x in ranks), 4),
                    answer_hits1=round(statistics.fmean(r["answer_hit1"] for r in part), 4),
                    answer_hits10=round(statistics.fmean(r["answer_hit10"] for r in part), 4),
                    latency_p50_ms=round(float(np.percentile(latency, 50)), 3),
                    latency_p95_ms=round(float(np.percentile(latency, 95)), 3),
                )
            )  # fmt: skip
    return out


def markdown(summary: Sequence[dict], notes: Sequence[str]) -> str:
    lines = []
    for key in ("all", "time_constrained", "qtype", "granularity", "answer_type"):
        part = [s for s in summary if s["slice"] == key]
        lines += [
            f"**by {key}**" if key not in ("all", "time_constrained") else f"**{key.replace('_', '-')}**",
            "",
            "| memory | slice | n | MRR@10 | Hits@1 | Hits@5 | Hits@10 | answer Hits@1 | answer Hits@10 "
            "| p50 ms | p95 ms |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for s in part:
            title = TITLES.get(s["memory"], s["memory"])
            lines.append(
                f"| {title} | {s['value']} | {s['questions']} | {s['mrr']:.3f} | "
                f"{s['hits1']:.3f} | {s['hits5']:.3f} | {s['hits10']:.3f} | {s['answer_hits1']:.3f} | "
                f"{s['answer_hits10']:.3f} | {s['latency_p50_ms']:.2f} | {s['latency_p95_ms']:.2f} |"
            )
        lines.append("")
    return "\n".join(lines + [f"- {note}" for note in notes]) + "\n"


def plot(summary: Sequence[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(s["memory"] for s in summary))
    types = [s["value"] for s in summary if s["memory"] == names[0] and s["slice"] in ("all", "qtype")]
    fig, ax = plt.subplots(figsize=(14, 5.5))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = {
            s["value"]: s["mrr"] for s in summary if s["memory"] == name and s["slice"] in ("all", "qtype")
        }
        ax.bar(
            np.arange(len(types)) + i * width, [values.get(t, 0) for t in types], width, label=TITLES[name]
        )
    ax.set_xticks(np.arange(len(types)) + 0.4 - width / 2, types)
    ax.set_ylabel("retrieval MRR@10")
    ax.set_title(title)
    ax.legend(fontsize=8, ncols=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- the run -----------------------------------------------------------------------------------------
def load_setup(args: argparse.Namespace) -> Setup:
    window = (day_of(args.start), day_of(args.end))
    if args.quick:
        kg = load_dataset("icews05-15", args.data_dir)
        low, high = window[0] - 30, window[1] + 30
        E, R = kg.entities, kg.relations
        facts = [(E[h], R[r], E[t], d) for h, r, t, d in kg.all_facts.tolist() if low <= d <= high]
    else:
        kg = load_dataset("icews05-15", args.data_dir)
        E, R = kg.entities, kg.relations
        facts = [(E[h], R[r], E[t], d) for h, r, t, d in kg.all_facts.tolist()]
    questions = generate(facts, window, SEEDS[args.split], scale=args.scale, prefix=args.split)
    if args.questions and args.questions < len(questions):  # every n-th: all types stay in
        step = len(questions) / args.questions
        questions = [questions[int(i * step)] for i in range(args.questions)]
    return Setup(facts, window, questions)


def run(setup: Setup, args: argparse.Namespace, command: str) -> list[dict]:
    encoder = CachedEncoder(HashingEncoder(256) if args.encoder == "hashing" else SentenceEncoder())
    if args.encoder_cache:
        print(f"{encoder.load(args.encoder_cache)} fact vectors from {args.encoder_cache}", flush=True)
    window_facts = [f for f in setup.facts if setup.window[0] <= f[3] <= setup.window[1]]
    memory = TemporalMemory(encoder=encoder, verify=False, synchronous="OFF")
    stats = ingest(memory, window_facts, args.days_per_batch)
    print(f"ingested {stats}", flush=True)
    encoder.prime([q.text for q in setup.questions])
    stored = memory.facts()
    by_id = {f.record_id: f for f in stored}

    fit = dict(batch_size=args.batch_size, dim=args.dim, threads=args.threads)  # FitConfig's settings
    variants = {}
    if args.quick:
        gate = change_rate_speeds(stored)
        gate_note = "gate speeds: each relation's change rate in the window (the --quick stand-in, no MLP)"
    elif {"romem-gate", RERANKS["romem-gate"], TIMED_RERANKS["romem-gate"]} & set(args.memories):
        gate = Path(args.gate) if args.gate else pretrain_gate(args.out / "gate.pt")
        gate_note = f"gate: Semantic Speed Gate {gate} (Phase 1 on the ICEWS05-15 train split)"
    else:  # no memory of this run uses the gate
        gate, gate_note = None, "no gate (no memory of this run uses one)"
    for name, speeds, family, history in (
        ("romem-gate", gate, "romem", {}), ("romem-no-gate", None, "romem", {}),
        ("discrete", None, "tntcomplex", {}), ("history", None, "tntcomplex", history_windows()),
    ):  # fmt: skip
        if name not in args.memories and not {RERANKS.get(name), TIMED_RERANKS.get(name)} & set(
            args.memories
        ):
            continue
        variant = TemporalMemory(store=memory.store, speeds=speeds, alpha_g=args.alpha_g)
        t0 = time.perf_counter()
        epochs = args.fit_epochs if name == "romem-gate" else (args.ablation_epochs or args.fit_epochs)
        result = variant.fit(FitConfig(family, epochs=epochs, **fit, **history))
        stats[f"fit_s_{name}"] = time.perf_counter() - t0
        print(f"fitted {name}: {result}, {stats[f'fit_s_{name}']:.1f} s", flush=True)
        variants[name] = variant

    builders = {
        "dense": memories.dense, "bm25": memories.bm25, "hybrid": memories.hybrid,
        "symbolic": memories.symbolic, "tem": memories.tem,
        "symbolic-named": lambda memory: memories.symbolic(memory, named_first=True),
    }  # fmt: skip
    rows = []
    for name in args.memories:
        t0 = time.perf_counter()
        if name in RERANKS.values():
            fitted = variants[{v: k for k, v in RERANKS.items()}[name]]
            rank = memories.best(fitted, args.beta, constrain=False, pool=memories.POOL)
        elif name in TIMED_RERANKS.values():
            fitted = variants[{v: k for k, v in TIMED_RERANKS.items()}[name]]
            rank = memories.best(fitted, args.beta, constrain=True, pool=args.time_pool)
        elif name == "hybrid-time":
            rank = memories.best(memory, 0.0, constrain=True, pool=args.time_pool)
        elif name in variants:
            rank = memories.temporal(variants[name])
        else:
            rank = builders[name](memory)
        build_s = time.perf_counter() - t0
        rows += evaluate(name, rank, setup.questions, by_id, encoder)
        print(f"evaluated {name} (build {build_s:.1f} s)", flush=True)
    summary = summarise(rows)

    counts = ", ".join(
        f"{t} {sum(q.qtype == t for q in setup.questions)}"
        for t in dict.fromkeys(q.qtype for q in setup.questions)
    )
    fits = ", ".join(f"{k[6:]} {v:.0f} s" for k, v in stats.items() if k.startswith("fit_s_"))
    notes = [
        f"command: `{command}`",
        f"{args.split} set (seed {SEEDS[args.split]}): {len(setup.questions)} questions ({counts}) about "
        f"{args.start}..{args.end}, all asked on {setup.questions[0].asked_on}; gold over "
        f"{len(setup.facts)} facts",
        f"memory: {stats['facts']} facts in {stats['sessions']} daily sessions; encoder {encoder.name}; "
        f"ingestion {stats['ingest_s']:.1f} s = {stats['facts_per_s']:.0f} facts/s including embedding "
        f"(sessions of {args.days_per_batch} days per add_sessions call)"
        + (
            f"; fact vectors read from {args.encoder_cache}: not an ingestion speed"
            if args.encoder_cache
            else ""
        ),
        f"RoMem: fitted online on the memory's facts (TemporalMemory.fit, no Lightning): {args.fit_epochs} "
        f"epochs (no-gate, discrete and history: {args.ablation_epochs or args.fit_epochs}; history: "
        f"TNTComplEx + the history term of icews05-15-tntcomplex-history), batch {args.batch_size}, "
        f"dim {args.dim}; fit time {fits}; {gate_note}; TemporalMemory alpha_g {args.alpha_g:g}, "
        f"romem-hybrid: hybrid top 50 + {args.beta:g} x S_kge",
        "retrieval: rank of the first fact with the question's relation and named entity whose answer slot "
        "holds a gold answer, within the top 10 (MRR@10); latency: the ranking call only (question embedding "
        "excluded, computed beforehand)",
        PUBLISHED,
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.name or ("temporal_qa" if args.split == "test" else f"temporal_qa_{args.split}")
    with open(args.out / f"{stem}.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*summary[0], "command"])
        writer.writeheader()
        writer.writerows({**s, "command": command} for s in summary)
    (args.out / f"{stem}.md").write_text(markdown(summary, notes))
    plot(summary, args.out / f"{stem}.png", f"temporal QA ({args.split}, {len(setup.questions)} questions)")
    print(markdown(summary, notes))
    print(f"wrote {args.out}/{stem}.csv, .md, .png")
    return summary


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--split", choices=tuple(SEEDS), default="test")
    parser.add_argument("--start", default="2012-01-01", help="first day of the question window")
    parser.add_argument("--end", default="2012-12-31", help="last day of the question window")
    parser.add_argument(
        "--scale", type=float, default=None, help="questions per type x scale (test 1, dev 0.5)"
    )
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--encoder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--memories", nargs="+", choices=MEMORIES, default=list(MEMORIES))
    parser.add_argument("--gate", help="a Semantic Speed Gate file (default: pretrain one into --out)")
    parser.add_argument("--fit-epochs", type=int, default=20)
    parser.add_argument(
        "--ablation-epochs",
        type=int,
        default=None,
        help="epochs of the no-gate and discrete fits (default --fit-epochs)",
    )
    parser.add_argument(
        "--questions", type=int, default=None, help="every n-th question, this many (timing runs)"
    )
    parser.add_argument(
        "--alpha-g", type=float, default=0.3, help="TemporalMemory's S_sem * (1 + alpha_g * S_kge)"
    )
    parser.add_argument("--beta", type=float, default=1.0, help="romem-hybrid: hybrid score + beta * S_kge")
    parser.add_argument(
        "--time-pool", type=int, default=memories.TIME_POOL, help="hybrid candidates the time constraint sees"
    )
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument(
        "--encoder-cache",
        type=Path,
        default=None,
        help="a memory file of an earlier run (same encoder): its fact vectors are reused (accuracy runs)",
    )
    parser.add_argument("--days-per-batch", type=int, default=1, help="daily sessions per add_sessions call")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument(
        "--quick", action="store_true", help="one month, hashing encoder, 1 epoch: a smoke run"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--name", default=None, help="output file stem")
    args = parser.parse_args(argv)
    if args.quick:
        args.start, args.end, args.encoder, args.fit_epochs = "2012-01-01", "2012-01-14", "hashing", 1
        args.scale = 0.02 if args.scale is None else args.scale
    if args.scale is None:
        args.scale = SPLITS[args.split][1]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python -m benchmarks.temporal_qa " + " ".join(sys.argv[1:] if argv is None else argv)
    threads = torch.get_num_threads()
    try:
        run(load_setup(args), args, command.strip())
    finally:
        torch.set_num_threads(threads)
    return 0
