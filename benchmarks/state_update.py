"""The controlled state-update benchmark (TEM.md): seven memory configurations, one evidence budget.

python -m benchmarks.state_update                      # MiniLM encoder, label-aware rule reader
python -m benchmarks.state_update --generate mypkg.llm:reader     # a real reader (an LLM)

The data is ``benchmarks.datasets.state_update``; ``LabelAwareReader`` answers without an LLM.
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.state_update (from the checkout's root)")

import argparse
import dataclasses
import itertools
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from benchmarks.datasets.state_update import QUESTION_TYPES, Question, StateUpdateBenchmark, generate
from benchmarks.memory_common import add_name, encoder_of, token_counter
from benchmarks.memory_common import main as run_main
from benchmarks.runner import Benchmark, Row
from rotmem.memory import CachedEncoder, FitConfig, TemporalMemory, render
from rotmem.memory.llm import load_reader
from rotmem.memory.temporal.time_expressions import QueryMode, as_day, extract_time, query_mode
from rotmem.training import TrainConfig

CONFIGS = ("naive-rag", "session-rag", "overwrite", "unmarked", "tem", "tem-dated", "romem")
OVERWRITE_POOL = 200  # records searched before keeping only current ones (>= 15 current always)
READER_NAME = "label-aware rule reader (no LLM)"
_HEADER = re.compile(r"^\[session (\d{4}-\d{2}-\d{2})\]")
_DATE_PREFIX = re.compile(r"^(\d{4}-\d{2}-\d{2}):")
_SLOT_WORDS = (("drink", "drinks"), ("live", "lives in"), ("job", "works as"), ("work", "works as"))
_FAR_PAST = -(10**9)


@dataclass(frozen=True)
class Item:
    """One evidence unit: a record (``relation`` set, ``text`` = its object) or a turn."""

    persona: str | None
    relation: str | None
    text: str
    historical: bool | None  # the label shown; None: no label shown


def build_memory(bench: StateUpdateBenchmark, encoder, fit):
    """All sessions in one batch; RoMem fitted (alpha 1) unless ``fit`` is None."""
    memory = TemporalMemory(encoder=encoder)
    t0 = time.perf_counter()
    memory.add_sessions(
        dict(session_id=s.session_id, facts=[(f.subject, f.relation, f.object) for f in s.facts],
             date=s.date, text=s.text, turns=[turn.render() for turn in s.turns])
        for s in bench.sessions
    )  # fmt: skip
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
    right = sum(truth[(f.source, f.head, f.relation, f.tail)] == f.t_happen for f in facts)
    return right / max(1, len(facts))


def evidence_for(config: str, memory: TemporalMemory, bench, question: Question, k: int, sessions: dict):
    """``(text, items)``: the evidence of one configuration for one question (benchmarks/README.md);
    ``sessions``: the benchmark's sessions by id."""
    store = memory.store
    if config in ("naive-rag", "session-rag"):
        turns = store.retrieve_turns(question.text, k=k, kind="turn")
        if config == "naive-rag":
            turns = sorted(turns, key=lambda p: -(p.score or 0.0))
            lines = [p.text for p in turns]
        else:  # in session order, each session's run of turns under its date
            lines = []
            for session_id, passages in itertools.groupby(turns, key=lambda p: p.session_id):
                lines += [f"[session {sessions[session_id].date}]", *(p.text for p in passages)]
        return "\n".join(lines), [Item(sessions[p.session_id].persona, None, p.text, None) for p in turns]
    if config in ("tem-dated", "romem"):
        if config == "tem-dated":
            timed = memory.with_times(store.retrieve(question.text, k=k))
        else:
            timed = memory.retrieve(question.text, k=k, now=bench.now)
        records, text = [t.record for t in timed], memory.render(timed)
    else:
        records = store.retrieve(question.text, k=OVERWRITE_POOL if config == "overwrite" else k)
        if config == "overwrite":
            current = sorted((r for r in records if not r.historical), key=lambda r: -(r.score or 0.0))[:k]
            records = sorted(current, key=lambda r: (r.session_index, r.id))
        elif config == "unmarked":
            records = [dataclasses.replace(r, historical=False) for r in records]
        elif config != "tem":
            raise ValueError(f"unknown configuration {config!r}; expected one of {CONFIGS}")
        text = render(records, show_session=False, group_subjects=True)
    labelled = config not in ("overwrite", "unmarked")  # the labels the evidence shows
    return text, [Item(r.subject, r.relation, r.object, r.historical if labelled else None) for r in records]


def _whole_word(value: str) -> re.Pattern:
    """``value`` standing alone (not inside a longer word), in any case."""
    return re.compile(rf"(?<!\w){re.escape(value)}(?!\w)", re.IGNORECASE)


def _mentions(question: Question, items: Sequence[Item]) -> list[tuple[str, bool | None]]:
    """``(value, label shown)`` of every mention of the asked slot's values in the evidence."""
    out = []
    for item in items:
        if item.persona != question.persona:
            continue
        if item.relation is None:
            out += [(v, item.historical) for v in question.slot_values if _whole_word(v).search(item.text)]
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
    return (not all(gold)) and all(bool(label) for value, label in mentions if value != question.gold)


# --- the deterministic label-aware reader (no LLM) ---------------------------------------------------
@dataclass(frozen=True)
class Mention:
    value: str
    historical: bool | None
    day: int | None
    position: tuple[int, int]

    def key(self) -> tuple[int, tuple[int, int]]:
        return (_FAR_PAST if self.day is None else self.day, self.position)


def _newest(mentions: Sequence[Mention], historical: bool) -> str:
    """The newest value among the mentions labelled ``historical`` or not (no label: current); among
    them all when none is."""
    pool = [m for m in mentions if bool(m.historical) == historical] or mentions
    return max(pool, key=Mention.key).value


class LabelAwareReader:
    """``reader(question, evidence) -> str`` by the rules in benchmarks/README.md.

    Args:
        personas: full names of the personas (the reader finds the question's subject among them).
        values: relation -> the values a slot can take (a reader's world knowledge: what is a city).
    """

    name = READER_NAME

    def __init__(self, personas: Sequence[str], values: Mapping[str, Sequence[str]]):
        self.personas = sorted(personas, key=len, reverse=True)
        self.values = {rel: [(v, _whole_word(v)) for v in vals] for rel, vals in values.items()}

    def __call__(self, question: str, evidence: str) -> str:
        subject = next((p for p in self.personas if p.lower() in question.lower()), None)
        relation = next((rel for word, rel in _SLOT_WORDS if word in question.lower()), None)
        if subject is None or relation is None or relation not in self.values:
            return "unknown"
        mentions = self._mentions(evidence, subject, relation)
        if not mentions:
            return "unknown"
        if "first talked" in question.lower() or "first met" in question.lower():
            return min(mentions, key=Mention.key).value
        if before := re.search(r"before (?:moving|switching|changing) to (.+?)\?*$", question, re.IGNORECASE):
            named = before.group(1).strip().lower()
            others = [m for m in mentions if m.value.lower() != named]
            return _newest(others, historical=True) if others else "unknown"
        asked = query_mode(question, "2000-01-01")  # the dated questions name absolute months
        if asked.mode != QueryMode.EXPLICIT:
            return _newest(mentions, historical=False)
        dated = [m for m in mentions if m.day is not None]
        if not dated:
            return _newest(mentions, historical=True)
        before_end = [m for m in dated if m.day <= asked.span.end]
        return (max(before_end, key=Mention.key) if before_end else min(dated, key=Mention.key)).value

    def _mentions(self, evidence: str, subject: str, relation: str) -> list[Mention]:
        first_name = subject.split()[0].lower()
        mentions = []
        header_day: str | None = None
        about_subject = False  # an indented line continues the previous line's subject
        for line_no, line in enumerate(evidence.splitlines()):
            if header := _HEADER.match(line):
                header_day = header.group(1)
                about_subject = False
                continue
            lowered = line.lower()
            if not (line.startswith("  ") and about_subject):
                named = re.search(rf"\b{re.escape(first_name)}\b", lowered)
                about_subject = subject.lower() in lowered or bool(named)
            if not about_subject:
                continue
            prefix = _DATE_PREFIX.match(line)
            base = prefix.group(1) if prefix else header_day
            day = None
            if base is not None:
                found = extract_time(line[prefix.end() :] if prefix else line, base)
                day = int(found.start) if found is not None else as_day(base)
            historical = "[historical]" in line
            patterns = self.values[relation]
            hits = sorted((m.start(), value) for value, pattern in patterns for m in pattern.finditer(line))
            for i, (start, value) in enumerate(hits):
                older = day is not None and i < len(hits) - 1  # "from X to Y": X held before that day
                when = None if day is None else day - older
                mentions.append(Mention(value, historical, when, (line_no, start)))
        return mentions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--personas", type=int, default=60, help="10 sessions each, seed 0")
    parser.add_argument("--k", type=int, default=15, help="evidence items per question (all configurations)")
    parser.add_argument("--encoder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    parser.add_argument("--generate", help="package.module:name of a reader(question, evidence) -> str")
    parser.add_argument("--fit-epochs", type=int, default=TrainConfig.epochs, help="0: RoMem not fitted")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (the machine is shared)")
    add_name(parser)


def measure(args: argparse.Namespace) -> Iterator[Row]:
    bench = generate(args.personas)  # 10 sessions per persona, seed 0
    encoder = encoder_of(args.encoder)
    fit = FitConfig(epochs=args.fit_epochs) if args.fit_epochs > 0 else None
    memory, stats = build_memory(bench, CachedEncoder(encoder), fit)
    read = load_reader(args.generate) if args.generate else LabelAwareReader(bench.personas, bench.values)
    reader = args.generate or READER_NAME
    count_tokens, tokens = token_counter(encoder)
    sessions = {s.session_id: s for s in bench.sessions}
    t0, rows = time.perf_counter(), []
    for config in args.configs:
        for q in bench.questions:
            text, items = evidence_for(config, memory, bench, q, args.k, sessions)
            answer = read(q.text, text)
            rows.append(dict(config=config, qtype=q.qtype, present=gold_present(q, items),
                             labelled=gold_labelled(q, items), hit=q.gold.lower() in answer.lower(),
                             tokens=count_tokens(text), words=len(text.split())))  # fmt: skip
    notes = [
        f"{len(bench.personas)} personas, {len(bench.sessions)} sessions, {len(bench.questions)} questions "
        f"(seed 0); {stats['records']} stored records; k = {args.k} evidence items per question; "
        f"encoder {encoder.name}; answers by: {reader}; tokens: {tokens}",
        f"t_happen read from the session text equals the true day for "
        f"{100 * t_happen_recovery(bench, memory):.1f}% of stored facts",
        f"ingestion {stats['ingest_s']:.1f} s (embedding included); "
        f"evaluation {time.perf_counter() - t0:.1f} s",
    ]
    if fit is not None:
        notes.append(
            f"RoMem online fit: {int(stats['facts'])} facts, {fit.epochs} epochs, dim "
            f"{fit.family['init_args']['dim']}, alpha = 1 (no gate), {stats['fit_s']:.1f} s, "
            f"final loss {stats['loss']:.3f}"
        )
    args.notes += [f"- {note}" for note in notes]
    for config, qtype in itertools.product(args.configs, (*QUESTION_TYPES, "all")):
        part = [r for r in rows if r["config"] == config and qtype in ("all", r["qtype"])]
        n = len(part)
        yield dict(
            config=config, question_type=qtype, questions=n,
            gold_present_pct=round(100 * sum(r["present"] for r in part) / n, 2),
            gold_labelled_pct=round(100 * sum(r["labelled"] for r in part) / n, 2),
            reader_hit_pct=round(100 * sum(r["hit"] for r in part) / n, 2),
            evidence_tokens=round(sum(r["tokens"] for r in part) / n, 1),
            evidence_words=round(sum(r["words"] for r in part) / n, 1), reader=reader,
            tokens_counted_as=tokens,
        )  # fmt: skip


SPEC = Benchmark("state_update", __doc__, measure, add_arguments)


def main(argv: list[str] | None = None) -> int:
    return run_main(SPEC, argv)


if __name__ == "__main__":
    raise SystemExit(main())
