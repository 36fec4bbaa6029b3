"""LoCoMo evidence retrieval: which memory finds the dialogue turns a question's answer rests on.

python -m benchmarks.locomo                               # all 10 conversations, MiniLM
python -m benchmarks.locomo --generate mypkg.llm:reader    # also answers, token F1

A conversation (``rotmem.data.locomo``) is written into a memory one store session per LoCoMo session,
dated (``add_conversation``); then every configuration retrieves each question's evidence.
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.locomo (from the checkout's root)")

import argparse
import itertools
import math
import os
import re
import statistics
import string
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.memory_common import add_name, encoder_of, p, token_counter
from benchmarks.memory_common import main as run_main
from benchmarks.runner import Benchmark, Row, save, subplots, torch_threads
from rotmem.data.locomo import CATEGORIES, Conversation, Observation, Session, load_locomo
from rotmem.memory import CachedEncoder, FitConfig, TemporalMemory, TEMStore
from rotmem.memory.llm import load_reader
from rotmem.memory.records import ExtractedFact
from rotmem.memory.retrieval.hybrid import HybridRetriever, render_evidence
from rotmem.memory.retrieval.lexical import LexicalIndex
from rotmem.memory.temporal.time_expressions import extract_time
from rotmem.training import TrainConfig

CONFIGS = ("dense-turns", "bm25-turns", "hybrid-turns", "tem-observations", "temporal-observations",
           "rotmem-hybrid", "rotmem-hybrid-no-time", "rotmem-hybrid-dense")  # fmt: skip
KS = (5, 10, 15)
TUNING = ("conv-26", "conv-30", "conv-41")
PUBLISHED = {"RoMem (paper)": 0.857, "HippoRAG (in the RoMem paper)": 0.815}
PUBLISHED_NOTE = (
    "published figures (evidence recall@10: RoMem 0.857, HippoRAG 0.815) use an LLM to extract facts and "
    "OpenAI text-embedding-3-small; every rotmem row of this run uses no LLM and the encoder named below"
)
GROUPS = ["all", "cat1-4", *(f"cat{c}" for c in CATEGORIES), "tuning", "held-out"]


# --- a conversation written into a memory ----------------------------------------------------------
SAID = "said"
_AUXILIARIES = {
    "is", "was", "are", "were", "has", "had", "have", "will", "would", "can", "could", "does", "did",
    "has been", "had been", "is not", "was not", "does not", "did not", "also", "recently", "often",
}  # fmt: skip
_DETERMINERS = {"a", "an", "the", "his", "her", "their", "its", "some", "no", "many", "two", "three"}
_PARTICLES = {"in", "at", "to", "for", "with", "of", "from", "on", "as", "about", "into", "up", "out"}


def observation_fact(observation: Observation, day: int) -> ExtractedFact:
    """The fact of one observation told on ``day`` (benchmarks/README.md)."""
    speaker, text = observation.speaker, observation.text.strip().rstrip(".").strip()
    name = next((n for n in (speaker, speaker.split()[0]) if text.startswith(n + " ")), None)
    found = extract_time(text, day)
    when = None if found is None else float(math.floor(found.midpoint))
    words, relation = text[len(name) :].split() if name else [], []
    if words and words[0].lower() not in ("and", "or", "&"):  # else a compound subject
        while words and len(relation) < 3 and words[0].lower() in _AUXILIARIES:
            if len(words) > 1 and words[1].lower() in _DETERMINERS:  # "has a dog": the auxiliary is the verb
                break
            relation.append(words.pop(0))
        if words:
            relation.append(words.pop(0))
        if words and words[0].lower() in _PARTICLES and len(words) > 1:
            relation.append(words.pop(0))
    if not relation or not words:  # no name first, a compound subject, or too short to split: kept whole
        return ExtractedFact(speaker, SAID, text, when, observation.evidence)
    return ExtractedFact(
        speaker, " ".join(relation), re.sub(r"\s+", " ", " ".join(words)), when, observation.evidence
    )


def turns_input(conversation: Conversation, session: Session) -> dict[str, Any]:
    """``add_sessions`` input of one LoCoMo session's turns: ``"speaker: text"`` with their ids (README)."""
    return dict(
        session_id=f"{conversation.sample_id}/session_{session.n}",
        turns=[f"{t.speaker}: {t.text}" for t in session.turns],
        turn_ids=[t.dia_id for t in session.turns],
    )


def session_input(conversation: Conversation, session: Session) -> dict[str, Any]:
    """``TemporalMemory.add_sessions`` input for one LoCoMo session."""
    return turns_input(conversation, session) | dict(
        facts=[observation_fact(o, session.day) for o in session.observations],
        date=session.day,
        summaries=[session.summary] if session.summary else [],
    )


def add_conversation(memory: TemporalMemory, conversation: Conversation) -> None:
    """Write every session of ``conversation`` into ``memory`` (one batch, README). The memory's
    store should be opened with ``verify=False``: observations paraphrase the turns."""
    memory.add_sessions(session_input(conversation, s) for s in conversation.sessions)


class Memories:
    """One conversation's stores: everything dated (``full``), the turns alone, BM25 over the turns."""

    def __init__(self, conversation: Conversation, encoder, fit: TrainConfig | None, fit_threads: int):
        self.full = TemporalMemory(encoder=encoder, verify=False)  # observations + turns + summaries
        add_conversation(self.full, conversation)
        self.turns = TEMStore(encoder=encoder, verify=False)
        self.turns.add_sessions(turns_input(conversation, s) for s in conversation.sessions)
        self.fit_s = None
        if fit is not None:
            with torch_threads(fit_threads):
                t0 = time.perf_counter()
                self.full.fit(fit)
                self.fit_s = time.perf_counter() - t0
        self.turn_rows = self.turns.passages("turn")
        self.bm25 = LexicalIndex([p.text for p in self.turn_rows])
        self.hybrid = {
            "hybrid-turns": HybridRetriever(self.turns, time_boost=0.0),
            "rotmem-hybrid": HybridRetriever(self.full),
            "rotmem-hybrid-no-time": HybridRetriever(self.full, time_boost=0.0),
            "rotmem-hybrid-dense": HybridRetriever(self.full, lexical_weight=0.0, time_boost=0.0),
        }

    def retrieve(self, config: str, question: str, day: int, vector: np.ndarray, k: int):
        """``(id sets in score order, render(n))`` of ``config``'s top ``k``."""
        if config in self.hybrid:
            units = self.hybrid[config].ranked(question, k=k, vector=vector, now=day)
            return [u.ids for u in units], lambda n: render_evidence(units[:n])
        if config == "tem-observations":
            found = sorted(self.full.store.retrieve(question, k=k), key=lambda r: -(r.score or 0))
            return [r.sources for r in found], lambda n: self.full.store.render(found[:n], show_session=False)
        if config == "temporal-observations":
            found = sorted(self.full.retrieve(question, k=k, now=day), key=lambda r: -r.score)
            return [r.record.sources for r in found], lambda n: self.full.render(found[:n])
        if config == "dense-turns":
            found = self.turns.retrieve_turns(question, k=k, kind="turn")
            found = sorted(found, key=lambda p: -(p.score or 0))
        else:  # bm25-turns
            found = [self.turn_rows[i] for i in np.argsort(-self.bm25.scores(question), kind="stable")[:k]]
        return [p.sources for p in found], lambda n: "\n".join(p.text for p in found[:n])

    def close(self) -> None:
        self.full.close()
        self.turns.close()


def recall(ranked: Sequence[tuple[str, ...]], evidence: Sequence[str], k: int) -> float:
    """Fraction of ``evidence`` ids among the ids of the first ``k`` items."""
    covered = {i for ids in ranked[:k] for i in ids}
    return sum(e in covered for e in evidence) / len(evidence)


def answer_f1(prediction: str, gold: str) -> float:
    """SQuAD-style token F1 (lower case, punctuation and articles removed)."""

    def tokens(text: str) -> list[str]:
        text = "".join(ch for ch in str(text).lower() if ch not in string.punctuation)
        return [t for t in text.split() if t not in ("a", "an", "the")]

    pred, ref = tokens(prediction), tokens(gold)
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or common == 0:
        return float(pred == ref)
    precision, rec = common / len(pred), common / len(ref)
    return 2 * precision * rec / (precision + rec)


def groups_of(sample_id: str, category: int) -> list[str]:
    return ["all", f"cat{category}", *(["cat1-4"] if category != 5 else []),
            "tuning" if sample_id in TUNING else "held-out"]  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", help="locomo10.json or its folder (default: $ROTMEM_DATA_DIR/locomo)")
    parser.add_argument("--conversations", nargs="+", help="sample ids (default: all)")
    parser.add_argument("--max-questions", type=int, help="per conversation (smoke runs)")
    parser.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    parser.add_argument("--encoder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--fit-epochs", type=int, default=TrainConfig.epochs, help="0: RoMem not fitted")
    parser.add_argument("--generate", help="package.module:name of a reader(question, evidence) -> answer")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads while retrieving")
    parser.add_argument("--fit-threads", type=int, default=2, help="torch CPU threads for TemporalMemory.fit")
    add_name(parser)


def measure(args: argparse.Namespace) -> Iterator[Row]:
    conversations = load_locomo(args.data)
    known = [c.sample_id for c in conversations]
    if unknown := sorted(set(args.conversations or ()) - set(known)):
        raise SystemExit(f"unknown conversation(s) {unknown}; the file has {known}")
    conversations = [c for c in conversations if c.sample_id in (args.conversations or known)]
    encoder = encoder_of(args.encoder)
    cached = CachedEncoder(encoder)
    fit = FitConfig(epochs=args.fit_epochs) if args.fit_epochs > 0 else None
    reader = load_reader(args.generate) if args.generate else None
    count_tokens, tokens = token_counter(encoder)
    load_before, import_s = os.getloadavg(), None
    if fit is not None:  # once per process, not part of any one fit: timed on its own
        t0 = time.perf_counter()
        import lightning_modules.phase2  # noqa: F401  (imports pytorch_lightning)

        import_s = time.perf_counter() - t0
    scores, fits, times = defaultdict(list), [], {c: [] for c in args.configs}
    start, build_s, asked = time.perf_counter(), 0.0, 0
    for conversation in conversations:
        questions = [q for q in conversation.questions if q.evidence][: args.max_questions]
        asked += len(questions)
        t0 = time.perf_counter()
        memories = Memories(conversation, cached, fit, args.fit_threads)
        vectors = cached.encode([q.question for q in questions])
        build_s += time.perf_counter() - t0 - (memories.fit_s or 0.0)
        if memories.fit_s is not None:
            fits.append((conversation.sample_id, memories.fit_s, len(memories.full.facts())))
        for config in args.configs:
            for q, vector in zip(questions, vectors, strict=True):
                t0 = time.perf_counter()  # one retrieval at k = 10, the embedding cached
                memories.retrieve(config, q.question, q.asked_day, vector, 10)
                times[config].append(time.perf_counter() - t0)
                ids, render = memories.retrieve(config, q.question, q.asked_day, vector, max(KS))
                evidence = {k: render(k) for k in KS}
                answer = reader(q.question, evidence[10]) if reader is not None else None
                for k in KS:
                    f1 = None if answer is None or k != 10 else answer_f1(answer, q.answer)
                    score = (recall(ids, q.evidence, k), count_tokens(evidence[k]), f1)
                    for group in groups_of(conversation.sample_id, q.category):
                        scores[config, k, group].append(score)
        memories.close()
        print(f"{conversation.sample_id}: {len(questions)} questions done", file=sys.stderr, flush=True)
    notes = [
        PUBLISHED_NOTE + ".",
        f"{len(conversations)} conversation(s), {asked} questions with evidence; encoder {encoder.name}; "
        f"evidence tokens counted as {tokens}" + (f"; answers by {args.generate}" if reader else ""),
        f"hybrid weights chosen on {', '.join(TUNING)} (rows 'tuning'); 'held-out' = the other conversations",
        f"load average (1, 5, 15 min) {tuple(round(x, 2) for x in load_before)} before, "
        f"{tuple(round(x, 2) for x in os.getloadavg())} after; 2-core machine shared with other jobs; "
        f"torch threads {args.threads} for retrieval, {args.fit_threads} for fit; whole run "
        f"{time.perf_counter() - start:.0f} s (memories built, embedding included, in {build_s:.0f} s)",
    ]
    if fits:
        worst = max(fits, key=lambda x: x[1])
        notes.append(
            f"TemporalMemory.fit ({fit.epochs} epochs, dim {fit.family['init_args']['dim']}, "
            f"{args.fit_threads} threads) per conversation: max {worst[1]:.1f} s ({worst[0]}, {worst[2]} "
            f"facts), mean {statistics.fmean(s for _, s, _ in fits):.1f} s "
            f"({', '.join(f'{n} {s:.1f}' for n, s, _ in fits)}); "
            f"importing Lightning beforehand took {import_s:.1f} s, once per process"
        )
    else:
        notes.append("RoMem not fitted: temporal-observations ranks on S_sem alone")
    args.notes += [f"- {note}" for note in notes]
    for config, k, group in itertools.product(args.configs, KS, GROUPS):
        if not (part := scores.get((config, k, group))):
            continue
        recalls, counts, f1s = zip(*part, strict=True)
        f1 = [x for x in f1s if x is not None]
        yield dict(
            config=config, k=k, group=group, questions=len(part),
            evidence_recall=round(statistics.fmean(recalls), 4),
            evidence_tokens=round(statistics.fmean(counts), 1),
            answer_f1="" if not f1 else round(statistics.fmean(f1), 4),
            p50_ms=round(1000 * statistics.median(times[config]), 3),
            p95_ms=round(1000 * p(times[config], 95), 3),
        )  # fmt: skip


def plot(rows: list[Row], path: Path) -> None:
    """Bars of evidence recall@10, overall and temporal (category 2), beside the published figures."""
    at = {(r["config"], r["group"]): r["evidence_recall"] for r in rows if r["k"] == 10}
    configs = list(dict.fromkeys(r["config"] for r in rows))
    fig, ax = subplots(figsize=(10, 4.5))
    x = np.arange(len(configs))
    ax.bar(x - 0.2, [at.get((c, "all"), 0.0) for c in configs], 0.4, label="all categories")
    ax.bar(x + 0.2, [at.get((c, "cat2"), 0.0) for c in configs], 0.4, label="temporal (category 2)")
    ax.bar(len(configs) + np.arange(len(PUBLISHED)), list(PUBLISHED.values()), 0.4, color="grey",
           label="published (LLM + OpenAI embedder)")  # fmt: skip
    ax.set_xticks(np.arange(len(configs) + len(PUBLISHED)), configs + [n.split(" (")[0] for n in PUBLISHED],
                  rotation=30, ha="right")  # fmt: skip
    ax.set_ylabel("evidence recall@10")
    ax.set_ylim(0, 1)
    ax.set_title("LoCoMo evidence recall@10 (rotmem rows: no LLM)")
    ax.legend(loc="upper left", fontsize=8)
    save(fig, path)


SPEC = Benchmark("locomo", __doc__, measure, add_arguments, plot=plot)


def main(argv: list[str] | None = None) -> int:
    return run_main(SPEC, argv)


if __name__ == "__main__":
    raise SystemExit(main())
