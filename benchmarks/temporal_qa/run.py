"""Temporal question answering over ICEWS05-15 as an agent memory sees it (MultiTQ-style questions).

ROTMEM_DATA_DIR=../shared/data python -m benchmarks.temporal_qa            # test set, 2012
python -m benchmarks.temporal_qa --split dev --alpha-g 0.3 1 3 --beta 0.5 1 2 4   # tune here: a grid
python -m benchmarks.temporal_qa --quick                                       # smoke, seconds
python -m benchmarks.temporal_qa ingest     # facts/s, day by day, embedding included: ingest_speed.csv
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.temporal_qa (from the checkout's root)")

import argparse
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby, pairwise
from pathlib import Path

import numpy as np

from benchmarks.datasets.temporal_qa import SPLITS, Question, generate
from benchmarks.memory_common import add_name, encoder_of, icews_facts, p, parse
from benchmarks.runner import Benchmark, Row, command_line, save, subplots
from rotmem import configs
from rotmem.data import date_of, day_of
from rotmem.memory import CachedEncoder, FitConfig, TemporalMemory, TEMStore
from rotmem.memory.retrieval.baselines import POOL, best, bm25, dense, hybrid, symbolic, tem, temporal
from rotmem.memory.tem.store import fact_text

MEMORIES = (
    "dense", "bm25", "hybrid", "symbolic", "symbolic-named", "tem", "romem-gate", "romem-no-gate", "discrete",
    "romem-hybrid", "romem-hybrid-no-gate", "history", "history-hybrid", "hybrid-time", "romem-hybrid-time",
    "history-hybrid-time",
)  # fmt: skip
# re-ranking memory -> the fitted memory whose model re-ranks (the ``-time`` ones: with the time constraint)
RERANKS = {
    "romem-hybrid": "romem-gate", "romem-hybrid-no-gate": "romem-no-gate", "history-hybrid": "history",
    "romem-hybrid-time": "romem-gate", "history-hybrid-time": "history",
}  # fmt: skip
HISTORY_CONFIG = "icews05-15-tntcomplex-history"  # the accuracy work's best model on validation
TIME_POOL = 100  # hybrid candidates the time constraint sees (BestMemory's default)
MODES = {"questions": None, "ingest": "ingest_speed"}  # mode: its CSV's stem
PUBLISHED = (
    "Published MultiTQ retrieval MRR (RoMem paper): RoMem 0.337, without RoMem 0.203, no gate 0.104, "
    "discrete time 0.045. Those use MultiTQ's own questions, an LLM and another embedder: they are "
    "not comparable to the numbers here, only the signs of the ablations are."
)


@dataclass
class Setup:
    facts: list[tuple[str, str, str, int]]  # the whole graph
    window: tuple[int, int]
    questions: list[Question]


def ingest(memory: TemporalMemory, facts: Sequence[tuple[str, str, str, int]], days_per_batch: int) -> dict:
    """The facts in date order, one session per day; returns facts, sessions, seconds, facts/s."""
    day = lambda f: f[3]
    by_day = {d: list(same_day) for d, same_day in groupby(sorted(facts, key=day), key=day)}
    days = list(by_day)
    t0 = time.perf_counter()
    for start in range(0, len(days), days_per_batch):
        batch = days[start : start + days_per_batch]
        memory.add_sessions(dict(session_id=date_of(d), facts=by_day[d], date=d) for d in batch)
    seconds = time.perf_counter() - t0
    return dict(facts=len(facts), sessions=len(days), ingest_s=seconds, facts_per_s=len(facts) / seconds)


def change_rate_speeds(facts) -> dict[str, float]:
    """Per relation, the share of consecutive same-slot observations whose tail changed (``--quick``)."""
    slots: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
    for f in facts:
        slots[(f.head, f.relation)].append((f.t_happen, f.tail))
    changed, pairs = defaultdict(int), defaultdict(int)
    for (_, relation), seen in slots.items():
        for (_, a), (_, b) in pairwise(sorted(seen)):
            pairs[relation] += 1
            changed[relation] += a != b
    return {r: changed[r] / pairs[r] for r in pairs}


# what a fact answers in each answer slot: its head, its tail, its day
SLOTS = {"head": lambda f: f.head, "tail": lambda f: f.tail, "time": lambda f: date_of(f.t_happen)}


def correct(answer: str, q: Question) -> bool:
    return any(answer.startswith(g) for g in q.gold) if q.answer_type == "time" else answer in q.gold


def relevant(fact, q: Question) -> bool:
    """The fact has the question's relation and named entities and its answer slot holds a gold answer."""
    side = q.answer_side
    named = (side == "head" or fact.head == q.head) and (side == "tail" or fact.tail == q.tail)
    return fact.relation == q.relation and named and correct(SLOTS[side](fact), q)


def evaluate(name: str, rank: Callable, questions: Sequence[Question], by_id: dict, encoder) -> list[dict]:
    """One row per question: the first relevant fact's rank, the reader's hits, the ranking's latency."""
    rows = []
    for q in questions:
        vector = encoder.encode([q.text])[0]
        t0 = time.perf_counter()
        ids = rank(q.text, vector, day_of(q.asked_on))
        latency = time.perf_counter() - t0
        facts = [by_id[i] for i in ids]
        first = next((i + 1 for i, f in enumerate(facts) if relevant(f, q)), None)
        answers = list(dict.fromkeys(SLOTS[q.answer_side](f) for f in facts))  # the deterministic reader
        rows.append(dict(memory=name, qtype=q.qtype, answer_type=q.answer_type, granularity=q.granularity,
                         rank=first, answer_hit1=bool(answers) and correct(answers[0], q),
                         answer_hit10=any(correct(a, q) for a in answers[:10]),
                         latency_ms=1000 * latency))  # fmt: skip
    return rows


def summarise(rows: Sequence[dict]) -> list[dict]:
    """Metrics per memory x slice (``all``, time-constrained, each type, granularity, answer type)."""
    slices: list[tuple[str, str, Callable[[dict], bool]]] = [
        ("all", "all", lambda r: True), ("time_constrained", "yes", lambda r: r["qtype"] != "current")
    ]  # fmt: skip
    for key in ("qtype", "granularity", "answer_type"):
        slices += [(key, v, lambda r, key=key, v=v: r[key] == v) for v in sorted({r[key] for r in rows})]
    mean = lambda xs: round(statistics.fmean(xs), 4)
    out = []
    for name in dict.fromkeys(r["memory"] for r in rows):
        for key, value, keep in slices:
            part = [r for r in rows if r["memory"] == name and keep(r)]
            if not part:
                continue
            ranks, latency = [r["rank"] for r in part], [r["latency_ms"] for r in part]
            out.append(dict(
                memory=name, slice=key, value=value, questions=len(part),
                mrr=mean(1 / x if x else 0.0 for x in ranks),
                **{f"hits{n}": mean(bool(x and x <= n) for x in ranks) for n in (1, 5, 10)},
                answer_hits1=mean(r["answer_hit1"] for r in part),
                answer_hits10=mean(r["answer_hit10"] for r in part),
                latency_p50_ms=round(p(latency, 50), 3), latency_p95_ms=round(p(latency, 95), 3),
            ))  # fmt: skip
    return out


def plot(rows: list[Row], path: Path) -> None:
    """Retrieval MRR@10 per memory, overall and per question type (mode ``questions``)."""
    if "mrr" not in rows[0]:
        return
    names = list(dict.fromkeys(r["memory"] for r in rows))
    kept = [r for r in rows if r["slice"] in ("all", "qtype")]
    types = list(dict.fromkeys(r["value"] for r in kept))
    fig, ax = subplots(figsize=(14, 5.5))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        mrr = {r["value"]: r["mrr"] for r in kept if r["memory"] == name}
        ax.bar(np.arange(len(types)) + i * width, [mrr.get(t, 0) for t in types], width, label=name)
    ax.set_xticks(np.arange(len(types)) + 0.4 - width / 2, types)
    ax.set_ylabel("retrieval MRR@10")
    ax.set_title(f"temporal QA ({rows[0]['questions']} questions)")
    ax.legend(fontsize=8, ncols=2)
    save(fig, path, dpi=110)


def load_setup(args: argparse.Namespace) -> Setup:
    window = (day_of(args.start), day_of(args.end))
    facts = icews_facts(args.data_dir, *((window[0] - 30, window[1] + 30) if args.quick else ()))
    seed, scale = SPLITS[args.split]
    questions = generate(facts, window, seed, scale=0.02 if args.quick else scale, prefix=args.split)
    return Setup(facts, window, questions)


def measure_questions(args: argparse.Namespace) -> Iterator[Row]:
    setup = args.setup or load_setup(args)
    encoder = CachedEncoder(encoder_of(args.encoder))
    if args.encoder_cache:  # serve the fact sentences of an earlier run's memory from its vectors
        with TEMStore(str(args.encoder_cache), encoder, read_only=True) as cached:
            texts, vectors = cached.fact_vectors()
        encoder.put(texts, vectors)
        print(f"{len(texts)} vectors from {args.encoder_cache}", flush=True)
    window_facts = [f for f in setup.facts if setup.window[0] <= f[3] <= setup.window[1]]
    memory = TemporalMemory(encoder=encoder, verify=False, synchronous="OFF")
    stats = ingest(memory, window_facts, args.days_per_batch)
    print(f"ingested {stats}", flush=True)
    encoder.encode([q.text for q in setup.questions])  # every question embedded once, beforehand
    stored = memory.facts()
    by_id = {f.record_id: f for f in stored}
    fit = dict(batch_size=args.batch_size, dim=args.dim, threads=args.threads)  # FitConfig's settings
    needed = {RERANKS.get(name, name) for name in args.memories}  # the fitted memories asked for or used
    if args.quick:
        gate = change_rate_speeds(stored)
        gate_note = "gate speeds: each relation's change rate in the window (the --quick stand-in, no MLP)"
    elif "romem-gate" in needed:
        from benchmarks.gate import pretrain_icews_gate

        gate = Path(args.gate) if args.gate else pretrain_icews_gate(args.out.with_name("gate.pt"))
        gate_note = f"gate: Semantic Speed Gate {gate} (Phase 1 on the ICEWS05-15 train split)"
    else:
        gate, gate_note = None, "no gate (no memory of this run uses one)"
    history = {"history": configs.load(configs.resolve(HISTORY_CONFIG))["model"]["history"]}
    variants, fit_s = {}, {}  # fitted memory -> its TemporalMemory, its fit's seconds
    for name, speeds, family, extra in (
        ("romem-gate", gate, "romem", {}), ("romem-no-gate", None, "romem", {}),
        ("discrete", None, "tntcomplex", {}), ("history", None, "tntcomplex", history),
    ):  # fmt: skip
        if name not in needed:
            continue
        variants[name] = TemporalMemory(store=memory.store, speeds=speeds)
        t0 = time.perf_counter()
        epochs = args.fit_epochs if name == "romem-gate" else (args.ablation_epochs or args.fit_epochs)
        result = variants[name].fit(FitConfig(family, epochs=epochs, **fit, **extra))
        fit_s[name] = time.perf_counter() - t0
        print(f"fitted {name}: {result}, {fit_s[name]:.1f} s", flush=True)
    builders = {
        "dense": dense, "bm25": bm25, "hybrid": hybrid, "symbolic": symbolic, "tem": tem,
        "symbolic-named": lambda memory: symbolic(memory, named_first=True),
        "hybrid-time": lambda memory: best(memory, 0.0, constrain=True, pool=args.time_pool),
    }  # fmt: skip
    rows = []
    for name in args.memories:
        rankers = {}  # setting -> ranker: one per --alpha-g (a fitted memory) or --beta (its re-rank)
        if name in variants:
            for alpha_g in args.alpha_g:
                tuned = TemporalMemory(store=memory.store, alpha_g=alpha_g)
                tuned.use_model(variants[name].model)
                rankers[f"alpha_g={alpha_g:g}"] = temporal(tuned)
        elif name in RERANKS:
            constrain = name.endswith("-time")
            pool = args.time_pool if constrain else POOL
            for beta in args.beta:
                rankers[f"beta={beta:g}"] = best(variants[RERANKS[name]], beta, constrain, pool)
        else:
            rankers[""] = builders[name](memory)
        for setting, rank in rankers.items():  # a grid's rows name their setting
            label = f"{name} {setting}" if len(rankers) > 1 else name
            rows += evaluate(label, rank, setup.questions, by_id, encoder)
            print(f"evaluated {label}", flush=True)
    counts = ", ".join(f"{t} {n}" for t, n in Counter(q.qtype for q in setup.questions).items())
    cached = (
        f"; fact vectors read from {args.encoder_cache}: not an ingestion speed" if args.encoder_cache else ""
    )
    fits = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in fit_s.items())
    notes = [
        f"{args.split} set (seed {SPLITS[args.split][0]}): {len(setup.questions)} questions ({counts}) about "
        f"{args.start}..{args.end}, all asked on {setup.questions[0].asked_on}; "
        f"gold over {len(setup.facts)} facts",
        f"memory: {stats['facts']} facts in {stats['sessions']} daily sessions; encoder {encoder.name}; "
        f"ingestion {stats['ingest_s']:.1f} s = {stats['facts_per_s']:.0f} facts/s including embedding "
        f"(sessions of {args.days_per_batch} days per add_sessions call){cached}",
        f"RoMem: fitted online on the memory's facts (TemporalMemory.fit, no Lightning): {args.fit_epochs} "
        f"epochs (no-gate, discrete and history: {args.ablation_epochs or args.fit_epochs}), batch "
        f"{args.batch_size}, dim {args.dim}; fit time {fits}; {gate_note}; TemporalMemory alpha_g "
        f"{' / '.join(f'{a:g}' for a in args.alpha_g)}, romem-hybrid: hybrid top 50 + "
        f"{' / '.join(f'{b:g}' for b in args.beta)} x S_kge",
        PUBLISHED,
    ]
    args.notes += [f"- {note}" for note in notes]
    yield from summarise(rows)


class TimedEncoder:
    """An encoder that adds up the seconds and texts of its ``encode`` calls."""

    def __init__(self, encoder):
        self.encoder, self.name = encoder, encoder.name
        self.seconds, self.texts = 0.0, 0

    def encode(self, texts: list[str]):
        t0 = time.perf_counter()
        out = self.encoder.encode(texts)
        self.seconds += time.perf_counter() - t0
        self.texts += len(texts)
        return out


def measure_ingest(args: argparse.Namespace) -> Iterator[Row]:
    """Mode ``ingest``: the window's facts, one ``add_sessions`` call per day, into a fresh memory per
    variant; timings in seconds."""
    facts = icews_facts(args.data_dir, day_of(args.start), day_of(args.end))
    distinct = len({fact_text(*f[:3]) for f in facts})
    minilm = encoder_of("minilm")
    minilm.encode(["load the model before the clock starts"])
    for name, encoder, cache in (("minilm, no cache", minilm, 0), ("minilm, cache", minilm, 50_000),
                                 ("hashing, no cache", encoder_of("hashing", 384), 0)):  # fmt: skip
        timed = TimedEncoder(encoder)
        memory = TemporalMemory(encoder=timed, verify=False, synchronous="OFF", embedding_cache=cache)
        stats = ingest(memory, facts, days_per_batch=1)
        assert len(memory.store) == stats["facts"], "every fact must be stored"
        memory.close()
        seconds = stats["ingest_s"]
        yield dict(
            variant=name, window=f"{args.start}..{args.end}", distinct_sentences=distinct,
            facts=stats["facts"], sessions=stats["sessions"], seconds=round(seconds, 2),
            facts_per_s=round(stats["facts_per_s"], 1), texts_embedded=timed.texts,
            encoder_s=round(timed.seconds, 2), store_s=round(seconds - timed.seconds, 2),
            encoder_sentences_per_s=round(timed.texts / timed.seconds, 1) if timed.seconds else None,
        )  # fmt: skip


def measure(args: argparse.Namespace) -> Iterator[Row]:
    return {"questions": measure_questions, "ingest": measure_ingest}[args.mode](args)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("mode", nargs="?", choices=tuple(MODES), default="questions")
    parser.add_argument("--split", choices=tuple(SPLITS), default="test")
    parser.add_argument("--start", default="2012-01-01", help="first day of the question window")
    parser.add_argument("--end", help="last day of the window (default 2012-12-31; ingest: 2012-03-31)")
    parser.add_argument("--data-dir")
    parser.add_argument("--encoder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--memories", nargs="+", choices=MEMORIES, default=list(MEMORIES))
    parser.add_argument("--gate", help="a Semantic Speed Gate file (default: pretrain one beside --out)")
    parser.add_argument("--fit-epochs", type=int, default=20)
    parser.add_argument("--ablation-epochs", type=int, help="no-gate, discrete, history fits")
    parser.add_argument("--alpha-g", type=float, nargs="+", default=[0.3], help="S_sem (1 + alpha_g S_kge)")
    parser.add_argument("--beta", type=float, nargs="+", default=[1.0], help="re-rank: hybrid + beta * S_kge")
    parser.add_argument("--time-pool", type=int, default=TIME_POOL, help="time-constraint candidates")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--encoder-cache", type=Path, help="an earlier run's memory file (same encoder)")
    parser.add_argument("--days-per-batch", type=int, default=1, help="daily sessions per add_sessions call")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--quick", action="store_true", help="two weeks, hashing encoder, 1 epoch: smoke")
    add_name(parser)


SPEC = Benchmark(
    "temporal_qa", __doc__, measure, add_arguments, plot=plot, csv_name="temporal_qa/temporal_qa"
)


def parse_args(argv: list[str] | None = None, setup: Setup | None = None) -> argparse.Namespace:
    """The options (``setup``: the graph and questions, made from them when None)."""
    args = parse(
        SPEC, argv, lambda a: MODES[a.mode] or (None if a.split == "test" else f"temporal_qa_{a.split}")
    )
    args.end = args.end or ("2012-03-31" if args.mode == "ingest" else "2012-12-31")
    if args.quick:
        args.start, args.end, args.encoder, args.fit_epochs = "2012-01-01", "2012-01-14", "hashing", 1
    args.setup = setup
    return args


def main(argv: list[str] | None = None) -> int:
    SPEC.run(parse_args(argv), command_line(SPEC.name, argv))
    return 0
