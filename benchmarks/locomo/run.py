"""LoCoMo evidence retrieval: which memory finds the dialogue turns a question's answer rests on.

    python -m benchmarks.locomo                               # all 10 conversations, MiniLM
    python -m benchmarks.locomo --generate mypkg.llm:reader    # also answers, token F1

(run from the repository root; the data is ``$ROTMEM_DATA_DIR/locomo/locomo10.json``, CC BY-NC 4.0.)

Each conversation is its own memory (its questions are about it alone). For every question, every
configuration retrieves k = 5, 10, 15 items; **evidence recall@k** is the fraction of the question's
evidence dialogue ids covered by the ids of the retrieved items (a turn: its own id; a fact: the ids
of the turns it was read from; an evidence unit: its source id). Questions without evidence are left
out (4). *Evidence tokens*: tokens of the rendered evidence (MiniLM WordPiece, or whitespace words
for the hashing encoder), mean per question. *p50 ms*: median time of one ``retrieve`` at k = 10,
the question's embedding excluded (cached before timing).

Configurations (one encoder, all-MiniLM-L6-v2, for all):

- ``dense-turns``: MiniLM over the raw turns (``"speaker: text"``), ``TEMStore.retrieve_turns``;
- ``bm25-turns``: BM25 over the same turns (``rotmem.memory.retrieval.lexical``, bm25s);
- ``hybrid-turns``: both, z-score fusion (``HybridRetriever`` on a turns-only store);
- ``tem-observations``: ``TEMStore.retrieve`` over LoCoMo's observations as facts (speaker as
  subject, relation weights, version labels; ``benchmarks.locomo.adapters``);
- ``temporal-observations``: ``TemporalMemory.retrieve`` on the same facts (session dates as
  ``t_obs``, time expressions for ``t_happen`` and query modes, ``S_final`` with RoMem fitted online);
- ``rotmem-hybrid``: ``HybridRetriever`` over observations and turns (dense + BM25, grouped by
  dialogue id, time boost); ``rotmem-hybrid-no-time`` without the time boost and
  ``rotmem-hybrid-dense`` without BM25 and time boost, as ablations.

The hybrid's two weights were chosen on conv-26, conv-30 and conv-41 (rows ``tuning``); rows
``held-out`` are the other seven conversations.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import string
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from benchmarks.locomo.adapters import add_conversation, session_input
from rotmem.data.locomo import CATEGORIES, Conversation, load_locomo
from rotmem.memory import HashingEncoder, SentenceEncoder, TemporalMemory, TEMStore
from rotmem.memory.llm import Reader, load_reader
from rotmem.memory.retrieval.hybrid import HybridRetriever, render_evidence
from rotmem.memory.retrieval.lexical import LexicalIndex
from rotmem.memory.temporal.fit import FitConfig
from rotmem.training import TrainConfig

CONFIGS = (
    "dense-turns",
    "bm25-turns",
    "hybrid-turns",
    "tem-observations",
    "temporal-observations",
    "rotmem-hybrid",
    "rotmem-hybrid-no-time",
    "rotmem-hybrid-dense",
)
KS = (5, 10, 15)
TUNING = ("conv-26", "conv-30", "conv-41")
PUBLISHED = {"RoMem (paper)": 0.857, "HippoRAG (in the RoMem paper)": 0.815}
PUBLISHED_NOTE = (
    "published figures use an LLM to extract facts and OpenAI text-embedding-3-small; every rotmem row "
    "of this run uses no LLM and the encoder named below"
)
RESULTS = Path(__file__).resolve().parents[1] / "results"


class CachedEncoder:
    """Memoises ``encode`` per text (turns are embedded for two stores, questions once per run)."""

    def __init__(self, encoder):
        self.encoder, self.name = encoder, encoder.name
        self._cache: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            for text, row in zip(missing, self.encoder.encode(missing), strict=True):
                self._cache[text] = row
        return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 1), np.float32)


@dataclass
class Retrieved:
    """A configuration's answer to one question: id sets in score order and the rendered top k."""

    ids: list[tuple[str, ...]]
    render: Callable[[int], str]


# --- memories ------------------------------------------------------------------------------------
@dataclass
class Memories:
    full: TemporalMemory  # observations + turns + summaries, dated
    turns: TEMStore  # turns only
    turn_bm25: LexicalIndex
    turn_rows: list
    hybrid: dict[str, HybridRetriever]
    fit_s: float | None


def build(conversation: Conversation, encoder, fit: TrainConfig | None, fit_threads: int) -> Memories:
    full = TemporalMemory(encoder=encoder, verify=False)
    add_conversation(full, conversation)
    turns = TEMStore(encoder=encoder, verify=False)
    turns.add_sessions(_turn_sessions(conversation))
    fit_s = None
    if fit is not None:
        threads = torch.get_num_threads()
        torch.set_num_threads(fit_threads)
        try:
            t0 = time.perf_counter()
            full.fit(fit)
            fit_s = time.perf_counter() - t0
        finally:
            torch.set_num_threads(threads)
    rows = turns.passages("turn")
    return Memories(
        full,
        turns,
        LexicalIndex([p.text for p in rows]),
        rows,
        {
            "hybrid-turns": HybridRetriever(turns, time_boost=0.0),
            "rotmem-hybrid": HybridRetriever(full),
            "rotmem-hybrid-no-time": HybridRetriever(full, time_boost=0.0),
            "rotmem-hybrid-dense": HybridRetriever(full, lexical_weight=0.0, time_boost=0.0),
        },
        fit_s,
    )


def _turn_sessions(conversation: Conversation) -> list[dict]:
    out = []
    for session in conversation.sessions:
        item = session_input(conversation, session, observations=False, summaries=False)
        out.append({k: v for k, v in item.items() if k not in ("date", "text")})
    return out


def retrieve(config: str, memories: Memories, question: str, asked_day: int, vector: np.ndarray) -> Retrieved:
    """The top 15 of ``config`` for one question (module docs)."""
    k = max(KS)
    if config == "dense-turns":
        found = sorted(
            memories.turns.retrieve_turns(question, k=k, kind="turn"), key=lambda p: -(p.score or 0)
        )
        return Retrieved([p.sources for p in found], lambda n: "\n".join(p.text for p in found[:n]))
    if config == "bm25-turns":
        scores = memories.turn_bm25.scores(question)
        found = [memories.turn_rows[i] for i in np.argsort(-scores, kind="stable")[:k]]
        return Retrieved([p.sources for p in found], lambda n: "\n".join(p.text for p in found[:n]))
    if config == "tem-observations":
        found = sorted(memories.full.store.retrieve(question, k=k), key=lambda r: -(r.score or 0))
        store = memories.full.store
        return Retrieved([r.sources for r in found], lambda n: store.render(found[:n], show_session=False))
    if config == "temporal-observations":
        found = sorted(memories.full.retrieve(question, k=k, now=asked_day), key=lambda r: -r.score)
        memory = memories.full
        return Retrieved([r.record.sources for r in found], lambda n: memory.render(found[:n]))
    if config in memories.hybrid:
        units = memories.hybrid[config].ranked(question, k=k, vector=vector, now=asked_day)
        return Retrieved([u.ids for u in units], lambda n: render_evidence(units[:n]))
    raise ValueError(f"unknown configuration {config!r}; expected one of {CONFIGS}")


def timed_retrieve(
    config: str, memories: Memories, question: str, asked_day: int, vector: np.ndarray
) -> float:
    """Seconds of the configuration's public ``retrieve`` call at k = 10 (embedding cached)."""
    t0 = time.perf_counter()
    if config == "dense-turns":
        memories.turns.retrieve_turns(question, k=10, kind="turn")
    elif config == "bm25-turns":
        np.argsort(-memories.turn_bm25.scores(question))[:10]
    elif config == "tem-observations":
        memories.full.store.retrieve(question, k=10)
    elif config == "temporal-observations":
        memories.full.retrieve(question, k=10, now=asked_day)
    else:
        memories.hybrid[config].retrieve(question, k=10, vector=vector, now=asked_day)
    return time.perf_counter() - t0


# --- metrics -------------------------------------------------------------------------------------
def recall(ranked: Sequence[tuple[str, ...]], evidence: Sequence[str], k: int) -> float:
    """Fraction of ``evidence`` ids among the ids of the first ``k`` items."""
    covered = {i for ids in ranked[:k] for i in ids}
    return sum(e in covered for e in evidence) / len(evidence)


def answer_f1(prediction: str, gold: str) -> float:
    """SQuAD-style token F1 (lower case, punctuation and articles removed)."""

    def tokens(text: str) -> list[str]:
        text = "".join(ch for ch in str(text).lower() if ch not in string.punctuation)
        return [t for t in text.split() if t not in ("a", "an", "the")]

    p, g = tokens(prediction), tokens(gold)
    common = sum((Counter(p) & Counter(g)).values())
    if not p or not g or common == 0:
        return float(p == g)
    precision, rec = common / len(p), common / len(g)
    return 2 * precision * rec / (precision + rec)


def groups_of(sample_id: str, category: int) -> list[str]:
    out = ["all", f"cat{category}"]
    if category != 5:
        out.append("cat1-4")
    out.append("tuning" if sample_id in TUNING else "held-out")
    return out


def token_counter(encoder) -> tuple[Callable[[str], int], str]:
    if isinstance(encoder, SentenceEncoder):
        tokenizer = encoder._encoder._load().tokenizer

        def count(text: str) -> int:
            return len(
                tokenizer(text, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
            )

        return count, "MiniLM WordPiece tokens"
    return (lambda text: len(text.split())), "whitespace words"


# --- run -----------------------------------------------------------------------------------------
def evaluate(
    conversations: Sequence[Conversation],
    encoder,
    configs: Sequence[str],
    fit: TrainConfig | None,
    count_tokens: Callable[[str], int],
    reader: Reader | None,
    max_questions: int | None,
    fit_threads: int = 2,
) -> tuple[list[dict], dict]:
    """One row per (configuration, question, k) and run statistics."""
    cached = CachedEncoder(encoder)
    rows, stats = [], {"fit_s": [], "build_s": 0.0, "times": {c: [] for c in configs}, "questions": 0}
    for conversation in conversations:
        questions = [q for q in conversation.questions if q.evidence][:max_questions]
        stats["questions"] += len(questions)
        t0 = time.perf_counter()
        memories = build(conversation, cached, fit, fit_threads)
        vectors = cached.encode([q.question for q in questions])
        stats["build_s"] += time.perf_counter() - t0 - (memories.fit_s or 0.0)
        if memories.fit_s is not None:
            stats["fit_s"].append((conversation.sample_id, memories.fit_s, len(memories.full.facts())))
        for config in configs:
            for q, vector in zip(questions, vectors, strict=True):
                stats["times"][config].append(
                    timed_retrieve(config, memories, q.question, q.asked_day, vector)
                )
                found = retrieve(config, memories, q.question, q.asked_day, vector)
                evidence = {k: found.render(k) for k in KS}
                answer = reader(q.question, evidence[10]) if reader is not None else None
                for k in KS:
                    rows.append(
                        dict(
                            config=config,
                            sample_id=conversation.sample_id,
                            category=q.category,
                            k=k,
                            recall=recall(found.ids, q.evidence, k),
                            tokens=count_tokens(evidence[k]),
                            f1=None if answer is None or k != 10 else answer_f1(answer, q.answer),
                        )
                    )
        memories.full.close()
        memories.turns.close()
        print(f"{conversation.sample_id}: {len(questions)} questions done", file=sys.stderr, flush=True)
    return rows, stats


def summarise(rows: Sequence[dict], stats: dict) -> list[dict]:
    buckets: dict[tuple, list[dict]] = {}
    for row in rows:
        for group in groups_of(row["sample_id"], row["category"]):
            buckets.setdefault((row["config"], row["k"], group), []).append(row)
    out = []
    for (config, k, group), part in buckets.items():
        f1 = [r["f1"] for r in part if r["f1"] is not None]
        times = stats["times"][config]
        out.append(
            dict(
                config=config,
                k=k,
                group=group,
                questions=len(part),
                evidence_recall=round(statistics.fmean(r["recall"] for r in part), 4),
                evidence_tokens=round(statistics.fmean(r["tokens"] for r in part), 1),
                answer_f1="" if not f1 else round(statistics.fmean(f1), 4),
                p50_ms=round(1000 * statistics.median(times), 3),
                p95_ms=round(1000 * float(np.percentile(times, 95)), 3),
            )
        )
    group_order = ["all", "cat1-4", *(f"cat{c}" for c in CATEGORIES), "tuning", "held-out"]
    return sorted(out, key=lambda r: (CONFIGS.index(r["config"]), r["k"], group_order.index(r["group"])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data", default=None, help="locomo10.json or its folder (default: $ROTMEM_DATA_DIR/locomo)"
    )
    parser.add_argument("--conversations", nargs="+", default=None, help="sample ids (default: all)")
    parser.add_argument("--max-questions", type=int, default=None, help="per conversation (smoke runs)")
    parser.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    parser.add_argument("--encoder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--fit-epochs", type=int, default=TrainConfig.epochs, help="0: RoMem not fitted")
    parser.add_argument("--generate", help="package.module:name of a reader(question, evidence) -> answer")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads while retrieving (a query is a small op)"
    )
    parser.add_argument("--fit-threads", type=int, default=2, help="torch CPU threads for TemporalMemory.fit")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--name", default="locomo", help="output file stem")
    args = parser.parse_args(argv)
    command = "python -m benchmarks.locomo " + " ".join(sys.argv[1:] if argv is None else argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return run(args, command.strip())
    finally:
        torch.set_num_threads(threads)


def run(args: argparse.Namespace, command: str) -> int:
    from benchmarks.locomo.report import markdown, plot

    conversations = load_locomo(args.data)
    if args.conversations:
        unknown = sorted(set(args.conversations) - {c.sample_id for c in conversations})
        if unknown:
            raise SystemExit(
                f"unknown conversation(s) {unknown}; the file has {[c.sample_id for c in conversations]}"
            )
        conversations = [c for c in conversations if c.sample_id in args.conversations]
    encoder = SentenceEncoder() if args.encoder == "minilm" else HashingEncoder(256)
    fit = FitConfig(epochs=args.fit_epochs) if args.fit_epochs > 0 else None
    reader = load_reader(args.generate) if args.generate else None
    count_tokens, tokens = token_counter(encoder)
    load_before = os.getloadavg()
    import_s = None
    if fit is not None:  # once per process, not part of any one fit: timed on its own
        t0 = time.perf_counter()
        import lightning_modules.phase2  # noqa: F401  (imports pytorch_lightning)

        import_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    rows, stats = evaluate(
        conversations, encoder, args.configs, fit, count_tokens, reader, args.max_questions, args.fit_threads
    )
    total_s = time.perf_counter() - t0
    summary = summarise(rows, stats)
    notes = [
        f"command: `{command}`",
        PUBLISHED_NOTE + ".",
        f"{len(conversations)} conversation(s), {stats['questions']} questions with evidence; encoder "
        f"{encoder.name}; evidence tokens counted as {tokens}",
        f"hybrid weights chosen on {', '.join(TUNING)} (rows 'tuning'); 'held-out' = the other conversations",
        f"load average (1, 5, 15 min) {tuple(round(x, 2) for x in load_before)} before, "
        f"{tuple(round(x, 2) for x in os.getloadavg())} after; 2-core machine shared with other jobs; "
        f"torch threads {args.threads} for retrieval, {args.fit_threads} for fit; "
        f"whole run {total_s:.0f} s (memories built, embedding included, in "
        f"{stats['build_s']:.0f} s)",
    ]
    if stats["fit_s"]:
        worst = max(stats["fit_s"], key=lambda x: x[1])
        each = ", ".join(f"{name} {s:.1f}" for name, s, _ in stats["fit_s"])
        notes.append(
            f"TemporalMemory.fit ({fit.epochs} epochs, dim {fit.family['init_args']['dim']}, "
            f"{args.fit_threads} threads) per "
            f"conversation: max {worst[1]:.1f} s ({worst[0]}, {worst[2]} facts), mean "
            f"{statistics.fmean(s for _, s, _ in stats['fit_s']):.1f} s ({each}); importing Lightning "
            f"beforehand took {import_s:.1f} s, once per process"
        )
    else:
        notes.append("RoMem not fitted: temporal-observations ranks on S_sem alone")
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / f"{args.name}.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(summary[0]))
        writer.writeheader()
        writer.writerows(summary)
    text = markdown(summary, notes, encoder.name, reader=args.generate)
    (args.out / f"{args.name}.md").write_text(text)
    plot(summary, args.out / f"{args.name}.png", encoder.name)
    print(text)
    print(f"wrote {args.out / args.name}.csv, .md and .png")
    return 0
