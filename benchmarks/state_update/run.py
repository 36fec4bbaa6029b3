"""The controlled state-update benchmark (TEM.md): six memory configurations, one evidence budget.

    python -m benchmarks.state_update                      # MiniLM encoder, label-aware rule reader
    python -m benchmarks.state_update --generate mypkg.llm:reader     # a real reader (an LLM)

``--generate`` names a ``rotmem.memory.llm.Reader``: ``reader(question, evidence) -> answer``.

(run from the repository root, so that ``benchmarks`` is importable).

Data: ``benchmarks/state_update/data.py`` (60 personas, 600 sessions, 420 questions, seeded). All
configurations share one ``TemporalMemory`` (a ``TEMStore`` holding facts, dialogue turns and fact
times) and the same budget of ``k = 15`` evidence items per question:

- ``naive-rag``: the 15 turns most similar to the question, most similar first, no session info;
- ``session-rag``: the same 15 turns in session order under ``[session YYYY-MM-DD]`` headers;
- ``overwrite``: an overwrite-only memory, i.e. only the latest version of every (subject,
  relation) group (the store's current records), top 15 by TEM's weighted similarity;
- ``unmarked``: TEM's top 15 records (all versions) in source order, labels removed;
- ``tem``: TEM's top 15 records in source order with ``[historical]`` labels;
- ``tem-dated``: the same records, each prefixed with the day it happened (``t_happen``);
- ``romem``: RoMem time-aware retrieval, ``S_sem * (1 + 0.3 * S_kge)`` over TEM's top 50, top 15
  in source order, rendered like ``tem-dated`` (RoMem fitted online on the stored facts).

Facts come from a perfect extractor (the generator's own facts, checked against the session text by
the store); their ``t_happen`` is read from the text by the memory's time-expression rules.

Metrics per question type (``current``, ``historical``, ``pre_move``):

- *gold present*: a record of the persona's asked slot with the gold value (records), or a turn of
  the persona's sessions naming the gold value (turns), is in the evidence;
- *gold labelled*: the evidence states the gold version's status correctly. A historical gold:
  every mention of it carries ``[historical]``. A current gold: a mention of it without the label
  and every mention of another value of the slot labelled ``[historical]``. Unlabelled evidence
  reads as current, so it can only be right for a current gold with no competing version present;
- *reader hit*: the generator's answer contains the gold key entity (case-insensitive), TEM's
  key-entity hit rate;
- *evidence tokens*: tokens of the rendered evidence (headers and date prefixes included,
  instructions and question excluded), counted with the MiniLM WordPiece tokenizer (no special
  tokens) for the MiniLM encoder, or whitespace-separated words otherwise; mean per question.
  *evidence words* (whitespace-separated) are reported beside them in every run.

Question embeddings are cached for the run (``CachedEncoder``): every configuration asks the same
420 questions, and the cache changes no result.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from benchmarks.state_update.data import QUESTION_TYPES, Question, StateUpdateBenchmark, generate
from benchmarks.state_update.reader import READER_NAME, LabelAwareReader
from rotmem.memory import HashingEncoder, SentenceEncoder
from rotmem.memory.llm import Reader, load_reader
from rotmem.memory.records import Passage, Record
from rotmem.memory.render import render
from rotmem.memory.temporal.fit import FitConfig
from rotmem.memory.temporal.memory import TemporalMemory
from rotmem.memory.temporal.records import TemporalRecord
from rotmem.training import TrainConfig

CONFIGS = ("naive-rag", "session-rag", "overwrite", "unmarked", "tem", "tem-dated", "romem")
TITLES = {
    "naive-rag": "naive RAG over turns",
    "session-rag": "session-aware RAG",
    "overwrite": "overwrite-only memory",
    "unmarked": "unmarked (all versions, no labels)",
    "tem": "TEM (labels)",
    "tem-dated": "TEM (labels + t_happen dates)",
    "romem": "RoMem time-aware retrieval (labels + dates)",
}
RESULTS = Path(__file__).resolve().parents[1] / "results"
OVERWRITE_POOL = 200  # records searched before keeping only current ones (>= 15 current always)


@dataclass(frozen=True)
class Item:
    """One evidence unit: a record (``relation`` set, ``text`` = its object) or a turn."""

    persona: str | None
    relation: str | None
    text: str
    historical: bool | None  # the label shown; None: no label shown


@dataclass
class Evidence:
    text: str
    items: list[Item]


# --- building the memory -------------------------------------------------------------------------
class CachedEncoder:
    """Memoises single-text ``encode`` calls (the questions) of a text encoder; same ``name``."""

    def __init__(self, encoder):
        self.encoder, self.name = encoder, encoder.name
        self._cache: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        if len(texts) != 1:
            return self.encoder.encode(texts)
        if texts[0] not in self._cache:
            self._cache[texts[0]] = self.encoder.encode(texts)
        return self._cache[texts[0]]


def build_memory(
    bench: StateUpdateBenchmark, encoder, fit: TrainConfig | None, gate: str | None = None
) -> tuple[TemporalMemory, dict]:
    """All sessions ingested in one batch (turns in the side store); RoMem fitted unless ``fit`` is None,
    with speeds from the gate file ``gate`` (else alpha = 1)."""
    memory = TemporalMemory(encoder=encoder, speeds=gate)
    t0 = time.perf_counter()
    memory.add_sessions(
        dict(
            session_id=s.session_id,
            facts=[(f.subject, f.relation, f.object) for f in s.facts],
            date=s.date,
            text=s.text,
            turns=[turn.render() for turn in s.turns],
        )
        for s in bench.sessions
    )
    stats = {"ingest_s": time.perf_counter() - t0, "records": len(memory.store)}
    if fit is not None:
        t0 = time.perf_counter()
        stats.update(memory.fit(fit))
        stats["fit_s"] = time.perf_counter() - t0
    return memory, stats


def t_happen_recovery(bench: StateUpdateBenchmark, memory: TemporalMemory) -> float:
    """Fraction of stored facts whose ``t_happen`` read from the text equals the true day."""
    truth = {(s.session_id, f.subject, f.relation, f.object): f.day for s in bench.sessions for f in s.facts}
    facts = memory.facts()
    hits = sum(truth[(f.source, f.head, f.relation, f.tail)] == f.t_happen for f in facts)
    return hits / max(1, len(facts))


# --- evidence per configuration ------------------------------------------------------------------
def _record_items(records: Sequence[Record], labelled: bool) -> list[Item]:
    return [Item(r.subject, r.relation, r.object, r.historical if labelled else None) for r in records]


def _turn_items(passages: Sequence[Passage], persona_of: dict[str, str]) -> list[Item]:
    return [Item(persona_of[p.session_id], None, p.text, None) for p in passages]


def evidence_for(
    config: str,
    memory: TemporalMemory,
    bench: StateUpdateBenchmark,
    question: Question,
    k: int,
    lookups: dict,
) -> Evidence:
    """The evidence text and items of one configuration for one question (module docs)."""
    store = memory.store
    if config in ("naive-rag", "session-rag"):
        turns = store.retrieve_turns(question.text, k=k, kind="turn")
        items = _turn_items(turns, lookups["persona"])
        if config == "naive-rag":
            by_score = sorted(zip(turns, items, strict=True), key=lambda pair: -(pair[0].score or 0.0))
            return Evidence("\n".join(p.text for p, _ in by_score), [item for _, item in by_score])
        lines, current = [], None
        for passage in turns:
            if passage.session_id != current:
                current = passage.session_id
                lines.append(f"[session {lookups['date'][current]}]")
            lines.append(passage.text)
        return Evidence("\n".join(lines), items)
    if config == "overwrite":
        pool = [r for r in store.retrieve(question.text, k=OVERWRITE_POOL) if not r.historical]
        records = sorted(
            sorted(pool, key=lambda r: -(r.score or 0.0))[:k], key=lambda r: (r.session_index, r.id)
        )
        return Evidence(
            render(records, show_session=False, group_subjects=True), _record_items(records, labelled=False)
        )
    if config == "unmarked":
        records = [dataclasses.replace(r, historical=False) for r in store.retrieve(question.text, k=k)]
        return Evidence(
            render(records, show_session=False, group_subjects=True), _record_items(records, labelled=False)
        )
    if config == "tem":
        records = store.retrieve(question.text, k=k)
        return Evidence(
            render(records, show_session=False, group_subjects=True), _record_items(records, labelled=True)
        )
    if config in ("tem-dated", "romem"):
        timed: list[TemporalRecord] = (
            memory.with_times(store.retrieve(question.text, k=k))
            if config == "tem-dated"
            else memory.retrieve(question.text, k=k, now=bench.now)
        )
        return Evidence(memory.render(timed), _record_items([t.record for t in timed], labelled=True))
    raise ValueError(f"unknown configuration {config!r}; expected one of {CONFIGS}")


# --- metrics -------------------------------------------------------------------------------------
def _mentions(question: Question, items: Sequence[Item]) -> list[tuple[str, bool | None]]:
    """``(value, label shown)`` of every mention of the asked slot's values in the evidence."""
    out = []
    for item in items:
        if item.persona != question.persona:
            continue
        if item.relation is None:
            for value in question.slot_values:
                if re.search(rf"(?<!\w){re.escape(value)}(?!\w)", item.text, re.IGNORECASE):
                    out.append((value, item.historical))
        elif item.relation == question.relation and item.text in question.slot_values:
            out.append((item.text, item.historical))
    return out


def gold_present(question: Question, items: Sequence[Item]) -> bool:
    return any(value == question.gold for value, _ in _mentions(question, items))


def gold_labelled(question: Question, items: Sequence[Item]) -> bool:
    mentions = _mentions(question, items)
    gold = [bool(label) for value, label in mentions if value == question.gold]
    if not gold:
        return False
    if question.gold_historical:
        return all(gold)
    others = [bool(label) for value, label in mentions if value != question.gold]
    return (not all(gold)) and all(others)


def token_counter(encoder) -> tuple[Callable[[str], int], str]:
    """``(count, description)``: MiniLM WordPiece for the sentence encoder, else whitespace words."""
    if isinstance(encoder, SentenceEncoder):
        tokenizer = encoder._encoder._load().tokenizer  # the encoder's own WordPiece vocabulary

        def count(text: str) -> int:
            return len(
                tokenizer(text, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
            )

        return count, "MiniLM WordPiece tokens"
    return (lambda text: len(text.split())), "whitespace words"


def evaluate(
    bench: StateUpdateBenchmark,
    memory: TemporalMemory,
    configs: Sequence[str],
    reader: Reader,
    count_tokens: Callable[[str], int],
    k: int = 15,
) -> list[dict]:
    """One row per (configuration, question)."""
    lookups = {
        "persona": {s.session_id: s.persona for s in bench.sessions},
        "date": {s.session_id: s.date for s in bench.sessions},
    }
    rows = []
    for config in configs:
        for q in bench.questions:
            evidence = evidence_for(config, memory, bench, q, k, lookups)
            answer = reader(q.text, evidence.text)
            rows.append(
                dict(
                    config=config,
                    qid=q.qid,
                    question_type=q.qtype,
                    subtype=q.subtype,
                    gold=q.gold,
                    answer=answer,
                    present=gold_present(q, evidence.items),
                    labelled=gold_labelled(q, evidence.items),
                    hit=q.gold.lower() in answer.lower(),
                    tokens=count_tokens(evidence.text),
                    words=len(evidence.text.split()),
                )
            )
    return rows


def summarise(rows: Sequence[dict], reader: str, tokens: str) -> list[dict]:
    """Per configuration x question type (and ``all``): rates in percent, mean tokens."""
    out = []
    configs = list(dict.fromkeys(r["config"] for r in rows))
    for config in configs:
        for qtype in (*QUESTION_TYPES, "all"):
            part = [r for r in rows if r["config"] == config and qtype in ("all", r["question_type"])]
            n = len(part)
            out.append(
                dict(
                    config=config,
                    question_type=qtype,
                    questions=n,
                    gold_present_pct=round(100 * sum(r["present"] for r in part) / n, 2),
                    gold_labelled_pct=round(100 * sum(r["labelled"] for r in part) / n, 2),
                    reader_hit_pct=round(100 * sum(r["hit"] for r in part) / n, 2),
                    evidence_tokens=round(sum(r["tokens"] for r in part) / n, 1),
                    evidence_words=round(sum(r["words"] for r in part) / n, 1),
                    reader=reader,
                    tokens_counted_as=tokens,
                )
            )
    return out


def markdown(summary: Sequence[dict], reader: str, tokens: str, notes: Sequence[str]) -> str:
    lines = []
    for qtype in (*QUESTION_TYPES, "all"):
        part = [s for s in summary if s["question_type"] == qtype]
        n = part[0]["questions"]
        lines += [
            f"**{qtype}** ({n} questions; answers by: {reader}; tokens: {tokens})",
            "",
            "| configuration | gold present % | gold labelled % | reader hit % | evidence tokens "
            "| evidence words |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for s in part:
            lines.append(
                f"| {TITLES[s['config']]} | {s['gold_present_pct']:.2f} | {s['gold_labelled_pct']:.2f} | "
                f"{s['reader_hit_pct']:.2f} | {s['evidence_tokens']:.1f} | {s['evidence_words']:.1f} |"
            )
        lines.append("")
    return "\n".join(lines + [f"- {note}" for note in notes]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--personas", type=int, default=60)
    parser.add_argument("--sessions", type=int, default=10, help="sessions per persona")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--k", type=int, default=15, help="evidence items per question (all configurations)")
    parser.add_argument("--encoder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    parser.add_argument(
        "--generate", help="package.module:name of a reader(question, evidence) -> str (default: rule reader)"
    )
    parser.add_argument("--fit-epochs", type=int, default=TrainConfig.epochs, help="0: RoMem not fitted")
    parser.add_argument(
        "--gate", help="a Semantic Speed Gate file (gate.pt) for RoMem's speeds (default alpha = 1)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (the machine is shared)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--name", default="state_update", help="output file stem")
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return run(args, argv)
    finally:
        torch.set_num_threads(threads)


def run(args: argparse.Namespace, argv: list[str] | None) -> int:
    command = "python -m benchmarks.state_update " + " ".join(sys.argv[1:] if argv is None else argv)

    bench = generate(args.personas, args.sessions, args.seed)
    encoder = SentenceEncoder() if args.encoder == "minilm" else HashingEncoder(256)
    fit = FitConfig(epochs=args.fit_epochs) if args.fit_epochs > 0 else None
    memory, stats = build_memory(bench, CachedEncoder(encoder), fit, args.gate)
    if args.generate:
        reader_fn, reader = load_reader(args.generate), args.generate
    else:
        reader_fn, reader = LabelAwareReader(bench.personas, bench.values), READER_NAME
    count_tokens, tokens = token_counter(encoder)
    t0 = time.perf_counter()
    rows = evaluate(bench, memory, args.configs, reader_fn, count_tokens, args.k)
    stats["evaluate_s"] = time.perf_counter() - t0
    summary = summarise(rows, reader, tokens)

    notes = [
        f"command: `{command.strip()}`",
        f"{len(bench.personas)} personas, {len(bench.sessions)} sessions, {len(bench.questions)} questions "
        f"(seed {args.seed}); {stats['records']} stored records; k = {args.k} evidence items per question; "
        f"encoder {encoder.name}",
        f"t_happen read from the session text equals the true day for "
        f"{100 * t_happen_recovery(bench, memory):.1f}% of stored facts",
        f"ingestion {stats['ingest_s']:.1f} s (embedding included); evaluation {stats['evaluate_s']:.1f} s",
    ]
    if fit is not None:
        speeds = memory.model.speed.table.tolist() if memory.model.speed.source == "gate" else None
        alpha = (
            "alpha = 1 (no gate)"
            if speeds is None
            else "gate alpha "
            + ", ".join(f"{r} {a:.2f}" for r, a in zip(memory.model.relations, speeds, strict=True))
        )
        notes.append(
            f"RoMem online fit: {int(stats['facts'])} facts, {fit.epochs} epochs, "
            f"dim {fit.family['init_args']['dim']}, {alpha}, "
            f"{stats['fit_s']:.1f} s, final loss {stats['loss']:.3f}"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / f"{args.name}.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(summary[0]))
        writer.writeheader()
        writer.writerows(summary)
    text = markdown(summary, reader, tokens, notes)
    (args.out / f"{args.name}.md").write_text(text)
    print(text)
    print(f"wrote {args.out / (args.name + '.csv')} and {args.out / (args.name + '.md')}")
    return 0
