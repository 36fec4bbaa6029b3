"""MultiTQ-style temporal questions generated from a temporal KG (ICEWS05-15: train + valid + test)."""

import bisect
import calendar
import datetime as dt
import functools
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace

from benchmarks.temporal_qa.phrasings import PHRASINGS
from rotmem.data import date_of, day_of
from rotmem.memory.temporal.time_expressions import extract_time

GRANULARITIES = ("day", "month", "year")
MAX_GOLD = 10
SPLITS = {"dev": (1, 0.5), "test": (2, 1.0)}  # seed, scale of COUNTS
# Questions per (type, answer type) of a full set; ``scale`` multiplies them (test 1.0, dev 0.5).
COUNTS = {
    ("equal", "entity"): 300, ("equal", "time"): 200, ("before_after", "entity"): 300,
    ("first_last", "entity"): 200, ("first_last", "time"): 200, ("equal_multi", "entity"): 250,
    ("after_first", "entity"): 250, ("before_last", "entity"): 250, ("current", "entity"): 300,
}  # fmt: skip
QUESTION_TYPES = tuple(dict.fromkeys(qtype for qtype, _ in COUNTS))

Fact = tuple[str, str, str, int]  # (head, relation, tail, day)


@dataclass(frozen=True)
class Question:
    """One question. ``head``/``tail``: the fact pattern's named entities (None on the answer side of an
    entity question); ``answer_side``: the slot of a fact that holds the answer (``head``, ``tail``
    or ``time``); ``gold``: every correct answer (entity names, or time prefixes at ``granularity``);
    ``asked_on``: the day the question is asked (``YYYY-MM-DD``)."""

    qid: str
    qtype: str
    answer_type: str
    granularity: str
    text: str
    asked_on: str
    relation: str
    head: str | None
    tail: str | None
    answer_side: str
    gold: tuple[str, ...]


PERIOD_LENGTH = {"year": 4, "month": 7, "day": 10}


@functools.lru_cache(maxsize=1 << 16)
def iso(day: int) -> str:
    """``date_of``, cached: a graph has a few thousand distinct days."""
    return date_of(day)


def period(day: int, granularity: str) -> str:
    """The ``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD`` string of ``day`` at ``granularity``."""
    return iso(day)[: PERIOD_LENGTH[granularity]]


def period_span(day: int, granularity: str) -> tuple[int, int]:
    """First and last day (inclusive) of the period holding ``day``."""
    if granularity == "day":
        return day, day
    date = dt.date.fromisoformat(iso(day))
    first, last = (date.month, date.month) if granularity == "month" else (1, 12)
    end = calendar.monthrange(date.year, last)[1]
    return day_of(f"{date.year}-{first:02d}-01"), day_of(f"{date.year}-{last:02d}-{end}")


def time_phrase(day: int, granularity: str, preposition: str | None, rng: random.Random) -> str:
    """A surface form of the period of ``day``; ``preposition`` None picks ``in``/``on``/``during``."""
    d = dt.date.fromisoformat(iso(day))
    name, abbr = calendar.month_name[d.month], calendar.month_abbr[d.month]
    if granularity == "year":
        body = str(d.year)
        prep = preposition or rng.choice(("in", "during"))
    elif granularity == "month":
        body = rng.choice((f"{name} {d.year}", f"{abbr} {d.year}", f"{name} of {d.year}"))
        prep = preposition or "in"
    else:
        suffix = "th" if 11 <= d.day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(d.day % 10, "th")
        body = rng.choice((f"{d.day} {name} {d.year}", f"{name} {d.day}, {d.year}",
                           f"{abbr} {d.day}{suffix}, {d.year}", d.isoformat()))  # fmt: skip
        prep = preposition or "on"
    return f"{prep} {body}"


class FactIndex:
    """The graph's facts by slot: ``answers(side, relation, entity)`` is the sorted ``(day, answer)``
    list of facts ``(answer, relation, entity)`` (side ``head``) or ``(entity, relation, answer)``
    (side ``tail``); ``days(h, r, t)`` the sorted days of one triple; ``of_entity[e]`` the facts
    naming ``e``."""

    def __init__(self, facts: Iterable[Fact]):
        answers: dict[tuple[str, str, str], list[tuple[int, str]]] = defaultdict(list)  # (side, r, e)
        triples: dict[tuple[str, str, str], list[int]] = defaultdict(list)
        of_entity: dict[str, list[Fact]] = defaultdict(list)
        for h, r, t, d in facts:
            answers[("head", r, t)].append((d, h))
            answers[("tail", r, h)].append((d, t))
            triples[(h, r, t)].append(d)
            of_entity[h].append((h, r, t, d))
            if t != h:
                of_entity[t].append((h, r, t, d))
        self._answers = {k: sorted(set(v)) for k, v in answers.items()}
        self._days = {k: sorted(set(v)) for k, v in triples.items()}
        self.of_entity = {e: sorted(v, key=lambda f: f[3]) for e, v in of_entity.items()}
        self._entity_days = {e: [f[3] for f in v] for e, v in self.of_entity.items()}

    def answers(self, side: str, relation: str, entity: str) -> list[tuple[int, str]]:
        return self._answers.get((side, relation, entity), [])

    def days(self, head: str, relation: str, tail: str) -> list[int]:
        return self._days.get((head, relation, tail), [])

    def entity_facts(self, entity: str, start: int, end: int) -> list[Fact]:
        """The facts naming ``entity`` on days ``start..end``, by day."""
        days = self._entity_days.get(entity, [])
        lo, hi = bisect.bisect_left(days, start), bisect.bisect_right(days, end)
        return self.of_entity[entity][lo:hi]


# --- gold answers: ``(day, answer)`` supporting pairs; gold = their answers ------------------------------
def within(pairs: Sequence[tuple[int, str]], start: int, end: int) -> list[tuple[int, str]]:
    lo = bisect.bisect_left(pairs, (start, ""))
    hi = bisect.bisect_left(pairs, (end + 1, ""))
    return list(pairs[lo:hi])


def extreme(pairs: Sequence[tuple[int, str]], last: bool) -> list[tuple[int, str]]:
    """The pairs on the earliest (or latest) day."""
    if not pairs:
        return []
    day = pairs[-1][0] if last else pairs[0][0]
    return [p for p in pairs if p[0] == day]


# --- the generator ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Draft:
    """A question before its id, the days supporting its gold and the span its text's time expression
    must resolve to (None: not checked)."""

    question: Question
    support_days: tuple[int, ...]
    span: tuple[int, int] | None


class Generator:
    """Draws questions of each type from the window's facts (benchmarks/README.md)."""

    def __init__(self, facts: Sequence[Fact], window: tuple[int, int], seed: int):
        self.index = FactIndex(facts)
        self.window = window
        self.asked = window[1] + 1
        self.asked_on = date_of(self.asked)
        self.rng = random.Random(seed)
        self.seen: set[str] = set()  # the texts drawn so far
        self.pool = sorted(f for f in facts if window[0] <= f[3] <= window[1] and f[1] in PHRASINGS)
        if not self.pool:
            span = f"{date_of(window[0])} and {date_of(window[1])}"
            raise ValueError(f"no facts of a phrased relation between {span}")
        self.builders: dict[tuple[str, str], Callable[[Fact], Draft | None]] = {
            ("equal", "entity"): self.equal_entity,
            ("equal", "time"): lambda f: self.time_draft("equal", f),
            ("before_after", "entity"): self.before_after,
            ("first_last", "entity"): self.first_last_entity,
            ("first_last", "time"): lambda f: self.time_draft("first_last", f),
            ("equal_multi", "entity"): self.equal_multi,
            ("after_first", "entity"): lambda f: self.after_first(f, after=True),
            ("before_last", "entity"): lambda f: self.after_first(f, after=False),
            ("current", "entity"): self.current,
        }

    # helpers
    def _entity_draft(self, qtype, granularity, text, relation, side, entity, support, span) -> Draft:
        gold = tuple(sorted({a for _, a in support}))
        head, tail = (None, entity) if side == "head" else (entity, None)
        q = Question("", qtype, "entity", granularity, text, self.asked_on, relation, head, tail, side, gold)
        return Draft(q, tuple(sorted({d for d, _ in support})), span)

    def _pattern(self, fact: Fact, granularities: Sequence[str] = GRANULARITIES):
        """A random answer side, the entity the question names (the other side), a granularity and
        the span of that granularity holding the fact's day."""
        side = self.rng.choice(("head", "tail"))
        g = self.rng.choice(granularities)
        return side, fact[2] if side == "head" else fact[0], g, period_span(fact[3], g)

    def _ask(self, side: str, relation: str, entity: str, rest: str = "", who: str = "Who") -> str:
        p = PHRASINGS[relation]
        return f"{who} {p.past} {entity}{rest}?" if side == "head" else f"{who} did {entity} {p.base}{rest}?"

    # builders
    def equal_entity(self, fact: Fact) -> Draft:
        _, r, _, d = fact
        side, entity, g, span = self._pattern(fact)
        when = time_phrase(d, g, None, self.rng)
        if self.rng.random() < 0.3:  # the time expression first
            text = self._ask(side, r, entity, who=f"{when[0].upper()}{when[1:]}, who")
        else:
            text = self._ask(side, r, entity, f" {when}")
        support = within(self.index.answers(side, r, entity), *span)
        return self._entity_draft("equal", g, text, r, side, entity, support, span)

    def before_after(self, fact: Fact) -> Draft:
        _, r, _, d = fact
        side, entity, g, span = self._pattern(fact)
        after = self.rng.random() < 0.5
        when = time_phrase(d, g, "after" if after else "before", self.rng)
        text = self._ask(side, r, entity, f" {when}")
        pairs = self.index.answers(side, r, entity)
        support = [p for p in pairs if (p[0] > span[1] if after else p[0] < span[0])]
        return self._entity_draft("before_after", g, text, r, side, entity, support, span)

    def first_last_entity(self, fact: Fact) -> Draft:
        _, r, _, d = fact
        side, entity, g, span = self._pattern(fact, ("month", "year"))
        last = self.rng.random() < 0.5
        when = time_phrase(d, g, "in", self.rng)
        p, which = PHRASINGS[r], "last" if last else "first"
        text = (f"Who was the {which} to {p.base} {entity} {when}?" if side == "head"
                else f"Who did {entity} {p.base} {which} {when}?")  # fmt: skip
        support = extreme(within(self.index.answers(side, r, entity), *span), last)
        return self._entity_draft("first_last", g, text, r, side, entity, support, span)

    def time_draft(self, qtype: str, fact: Fact) -> Draft:
        """When the triple happened: every day (``equal``), or its first or last day (``first_last``)."""
        h, r, t, _ = fact
        which = "equal" if qtype == "equal" else self.rng.choice(("first", "last"))
        g = self.rng.choice(GRANULARITIES)
        lead = {"day": "When", "month": "In which month", "year": "In what year"}[g]
        adverb = "" if which == "equal" else f" {which}"
        text = f"{lead} did {h}{adverb} {PHRASINGS[r].base} {t}?"
        days = self.index.days(h, r, t)  # all days (``equal``), the first or the last
        days = days[:1] if which == "first" else days[-1:] if which == "last" else days
        gold = tuple(sorted({period(day, g) for day in days}))
        question = Question("", qtype, "time", g, text, self.asked_on, r, h, t, "time", gold)
        return Draft(question, tuple(days), None)

    def equal_multi(self, fact: Fact) -> Draft | None:
        h, r, t, d = fact
        g = self.rng.choice(GRANULARITIES)
        span = period_span(d, g)
        facts = self.index.entity_facts(t, *span)
        candidates = sorted({f[:3] for f in facts if f[1] != r and f[1] in PHRASINGS and f[0] != f[2]})
        self.rng.shuffle(candidates)
        # the anchor's triple must hold in this one period only, over the whole graph
        unique = (c for c in candidates if all(span[0] <= x <= span[1] for x in self.index.days(*c)))
        anchor = next(unique, None)
        if anchor is None:
            return None
        a_head, a_rel, a_tail = anchor
        link = f"{'on' if g == 'day' else 'in'} the same {g} as"
        text = f"Who {PHRASINGS[r].past} {t} {link} {a_head} {PHRASINGS[a_rel].past} {a_tail}?"
        support = within(self.index.answers("head", r, t), *span)
        return self._entity_draft("equal_multi", g, text, r, "head", t, support, None)

    def after_first(self, fact: Fact, after: bool) -> Draft | None:
        _, r, t, _ = fact
        pairs = self.index.answers("head", r, t)
        firsts = {answer: day for day, answer in reversed(pairs)}  # each answer's first day
        candidates = sorted(a for a, day in firsts.items() if self.window[0] <= day <= self.window[1])
        if not candidates:
            return None
        anchor = self.rng.choice(candidates)
        p = PHRASINGS[r]
        text = (f"After {anchor}, who was the first to {p.base} {t}?" if after
                else f"Before {anchor}, who was the last to {p.base} {t}?")  # fmt: skip
        # the others' facts on the first day after (or the last before) the anchor's first
        start = firsts[anchor]
        others = [(day, a) for day, a in pairs if (day > start if after else day < start) and a != anchor]
        qtype = "after_first" if after else "before_last"
        return self._entity_draft(qtype, "none", text, r, "head", t, extreme(others, last=not after), None)

    def current(self, fact: Fact) -> Draft | None:
        h, r, _, _ = fact
        support = extreme([p for p in self.index.answers("tail", r, h) if p[0] < self.asked], last=True)
        seen = {a for day, a in self.index.answers("tail", r, h) if self.window[0] <= day < self.asked}
        if not support or not seen - {a for _, a in support}:
            return None  # no older, different value in the window: recency would not matter
        base = PHRASINGS[r].base
        text = self.rng.choice(
            (f"Who does {h} {base} these days?", f"These days, who does {h} {base}?",
             f"Who does {h} {base} now?", f"Nowadays, who does {h} {base}?")
        )  # fmt: skip
        return self._entity_draft("current", "none", text, r, "tail", h, support, None)

    # acceptance
    def acceptable(self, draft: Draft | None) -> bool:
        if draft is None or not 1 <= len(draft.question.gold) <= MAX_GOLD:
            return False
        if not any(self.window[0] <= d <= self.window[1] for d in draft.support_days):
            return False
        q = draft.question
        found = extract_time(q.text, self.asked)
        if draft.span is None:
            return q.qtype == "equal_multi" or q.answer_type == "time" or found is None
        return found is not None and (found.start, found.end) == draft.span

    def draw(self, qtype: str, answer_type: str, count: int) -> list[Question]:
        """Up to ``count`` acceptable questions of the type, none repeating a text drawn before."""
        build = self.builders[(qtype, answer_type)]
        out: list[Question] = []
        for _ in range(200 * count):
            if len(out) == count:
                break
            draft = build(self.rng.choice(self.pool))
            if self.acceptable(draft) and draft.question.text not in self.seen:
                self.seen.add(draft.question.text)
                out.append(draft.question)
        return out


def generate(
    facts: Sequence[Fact],
    window: tuple[int, int],
    seed: int,
    scale: float = 1.0,
    counts: Mapping[tuple[str, str], int] = COUNTS,
    prefix: str = "q",
) -> list[Question]:
    """The question set of ``seed``: ``round(scale * counts[type, answer type])`` questions each
    (fewer where the graph has no more), in generation order, ids ``{prefix}-00000``..."""
    gen = Generator(facts, window, seed)
    drawn = [q for (qtype, answer), n in counts.items() for q in gen.draw(qtype, answer, round(scale * n))]
    return [replace(q, qid=f"{prefix}-{i:05d}") for i, q in enumerate(drawn)]


def counts_table(questions: Sequence[Question]) -> str:
    """A Markdown table: questions per type x granularity (and answer type)."""
    columns = (*GRANULARITIES, "none")
    lines = [
        "| type | " + " | ".join(columns) + " | entity | time | total |",
        "| --- |" + " ---: |" * (len(columns) + 3),
    ]
    for qtype in (*QUESTION_TYPES, "all"):
        part = [q for q in questions if qtype in ("all", q.qtype)]
        cells = [sum(q.granularity == g for q in part) for g in columns]
        cells += [sum(q.answer_type == a for q in part) for a in ("entity", "time")] + [len(part)]
        lines.append(f"| {qtype} | " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.datasets.temporal_qa --split dev --out dev.jsonl``: write, print counts."""
    import argparse
    import json

    from benchmarks.memory_common import icews_facts

    parser = argparse.ArgumentParser(description="Write a temporal-QA question set as JSON lines.")
    parser.add_argument("--split", choices=tuple(SPLITS), default="dev")
    parser.add_argument("--start", default="2012-01-01")
    parser.add_argument("--end", default="2012-12-31")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", help="a .jsonl file (default: print the counts only)")
    args = parser.parse_args(argv)
    facts = icews_facts(args.data_dir)
    seed, scale = SPLITS[args.split]
    questions = generate(facts, (day_of(args.start), day_of(args.end)), seed, scale=scale, prefix=args.split)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(asdict(q)) + "\n" for q in questions)
    print(counts_table(questions))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
