"""A seeded generator for TEM's controlled state-update benchmark (see ``shared/design/TEM.md``)."""

import calendar
import datetime as dt
from dataclasses import dataclass, field

import numpy as np

QUESTION_TYPES = ("current", "historical", "pre_move")
RESIDENCE, OCCUPATION, DRINK, LIKES, OWNS = "lives in", "works as", "drinks", "likes", "owns"
STATE_RELATIONS = (RESIDENCE, OCCUPATION, DRINK)


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _items(text: str) -> tuple[str, ...]:
    return tuple(text.split(", "))


FIRST_NAMES = _words(
    "Ana Ben Chloe Dario Elena Farid Greta Hugo Ines Jonas Kaia Luca Maren Nils Olga Pavel Quinn Rosa "
    "Sami Tara Umar Vera Wim Xenia Yusuf Zoe Aldo Bianca Cyril Dalia Emil Flora Gideon Hanna Ivo Jana "
    "Kofi Lena Milo Nadia Otto Petra Rafael Sofia Tomas Ulla Viktor Wanda Yara Zeno Amira Bruno Carla "
    "Dmitri Edith Felix Gala Henrik Ilse Joao Kira Leon Mira Noah"
)
LAST_NAMES = _words(
    "Silva Moreau Keller Rossi Novak Lindqvist Horvat Costa Weber Fischer Duarte Kowalski Berg Marino "
    "Janssen Petrov Laine Ferreira Schulz Moretti Dvorak Nielsen Popescu Almeida Varga Holm Bauer Conti"
)
CITIES = _words(
    "Lisbon Porto Madrid Valencia Seville Lyon Marseille Bordeaux Toulouse Nantes Munich Hamburg Leipzig "
    "Cologne Dresden Vienna Graz Zurich Geneva Milan Turin Bologna Naples Florence Prague Brno Krakow "
    "Gdansk Warsaw Budapest Ljubljana Zagreb Oslo Bergen Stockholm Gothenburg Copenhagen Aarhus Helsinki "
    "Tallinn Riga Dublin Edinburgh Glasgow Bristol Leeds Amsterdam Utrecht Rotterdam Antwerp Ghent"
)
OCCUPATIONS = _items(
    "nurse, architect, pharmacist, carpenter, data analyst, schoolteacher, paramedic, translator, "
    "graphic designer, accountant, electrician, veterinarian, librarian, journalist, pastry chef, "
    "dentist, physiotherapist, software developer, civil engineer, wedding photographer, florist, "
    "airline pilot, lawyer, social worker, museum curator, urban planner, sound technician, "
    "marine biologist"
)
DRINKS = _items(
    "green tea, black coffee, oat milk latte, espresso, chai, rooibos, hot chocolate, "
    "sparkling water, kombucha, mint tea, cold brew, matcha, yerba mate, orange juice, lemonade, "
    "ginger ale, flat white, cappuccino, chamomile"
)
HOBBIES = _items(
    "hiking, chess, pottery, salsa dancing, birdwatching, rock climbing, knitting, surfing, jazz, "
    "gardening, board games, sailing, cycling, astronomy, woodworking"
)
POSSESSIONS = _items(
    "cat, dog, bicycle, piano, telescope, motorbike, vintage camera, kayak, sewing machine, record player"
)
SMALL_TALK = (
    ("The weather has been awful this week.", "Hopefully it clears up soon!"),
    ("I have been reading a great novel lately.", "Nice, tell me how it ends."),
    ("Work has been really busy.", "Remember to take breaks."),
    ("My sister visited over the weekend.", "That sounds lovely."),
    ("I am trying to sleep earlier.", "Good habit to build."),
)
# (phrase, amount, unit) for "I moved ... <phrase>": the true day is the session day minus the amount.
OFFSETS = (
    ("", 0, "day"),
    ("a few days ago", 3, "day"),
    ("two weeks ago", 14, "day"),
    ("three weeks ago", 21, "day"),
    ("a month ago", 1, "month"),
    ("two months ago", 2, "month"),
)
# A question's subtype: (question type, relation asked about, the gold's index in the slot's values
# (None: the job held in {month}), the question; {new} is the slot's latest value).
SUBTYPES = {
    "current_residence": ("current", RESIDENCE, -1, "Where does {name} live now?"),
    "current_occupation": ("current", OCCUPATION, -1, "What does {name} do for work these days?"),
    "current_drink": ("current", DRINK, -1, "What does {name} usually drink nowadays?"),
    "first_residence": ("historical", RESIDENCE, 0, "Where did {name} live when we first talked?"),
    "previous_drink": ("historical", DRINK, -2, "What did {name} drink before switching to {new}?"),
    "occupation_at_date": ("historical", OCCUPATION, None, "What was {name}'s job in {month}?"),
    "pre_move_residence": ("pre_move", RESIDENCE, -2, "Where did {name} live just before moving to {new}?"),
}
FIRST_DAY = dt.date(2018, 1, 1)
_EPOCH = dt.date(1970, 1, 1).toordinal()


@dataclass(frozen=True)
class Fact:
    """``subject relation object`` told in a session; ``day`` is when it happened (days since 1970)."""

    subject: str
    relation: str
    object: str
    day: int


@dataclass(frozen=True)
class Turn:
    speaker: str
    text: str

    def render(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass
class Session:
    """One conversation: ``index`` is its position in the global, chronological session order."""

    session_id: str
    persona: str
    index: int
    date: str
    turns: list[Turn]
    facts: list[Fact]

    @property
    def day(self) -> int:
        return dt.date.fromisoformat(self.date).toordinal() - _EPOCH

    @property
    def text(self) -> str:
        return "\n".join(turn.render() for turn in self.turns)


@dataclass(frozen=True)
class Question:
    """A question with its gold key entity.

    ``relation`` is the slot asked about and ``slot_values`` every value that slot ever took for the
    persona (oldest first); ``gold_historical`` says whether the gold value is superseded today.
    """

    qid: str
    persona: str
    qtype: str
    subtype: str
    text: str
    gold: str
    relation: str
    gold_historical: bool
    slot_values: tuple[str, ...]


@dataclass
class StateUpdateBenchmark:
    sessions: list[Session]
    questions: list[Question]
    personas: list[str]
    values: dict[str, tuple[str, ...]] = field(default_factory=dict)
    now: str = ""


def _day(date: dt.date) -> int:
    return date.toordinal() - _EPOCH


def _month(date: dt.date, shift: int) -> tuple[int, int]:
    """(year, month) ``shift`` months after ``date``'s month."""
    year, month = divmod(date.year * 12 + date.month - 1 + shift, 12)
    return year, month + 1


def _minus(date: dt.date, amount: int, unit: str) -> dt.date:
    """``date`` minus ``amount`` days or months (month ends clamped, as the time parser does)."""
    if unit == "day":
        return date - dt.timedelta(days=amount)
    year, month = _month(date, -amount)
    return dt.date(year, month, min(date.day, calendar.monthrange(year, month)[1]))


def _article(noun: str) -> str:
    return f"an {noun}" if noun[0] in "aeiou" else f"a {noun}"


@dataclass
class _Timeline:
    """The changing values of one slot: ``values[i]`` holds from ``starts[i]`` (a day)."""

    values: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)


@dataclass
class _Draft:
    """The turns and facts of the session being written; ``state`` also extends the timelines."""

    name: str
    timelines: dict[str, _Timeline]
    turns: list[Turn] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)

    def say(self, text: str, reply: str | None = None) -> None:
        self.turns.append(Turn(self.name, text))
        if reply:
            self.turns.append(Turn("Assistant", reply))

    def state(self, relation: str, value: str, happened: int) -> None:
        self.facts.append(Fact(self.name, relation, value, happened))
        timeline = self.timelines[relation]
        if not timeline.values or timeline.values[-1] != value:
            timeline.values.append(value)
            timeline.starts.append(happened)


def _change_sessions(rng: np.random.Generator, sessions: int, low: int, high: int) -> set[int]:
    count = int(rng.integers(low, high + 1))
    return set(int(s) for s in rng.choice(np.arange(1, sessions), size=count, replace=False))


def _change(rng: np.random.Generator, pool: tuple[str, ...], timeline: _Timeline) -> tuple[str, str]:
    """The slot's value so far and a new one from ``pool`` that it never held."""
    return timeline.values[-1], str(rng.choice([v for v in pool if v not in timeline.values]))


def _offset(rng: np.random.Generator, date: dt.date, gap_days: int, keep_days: int) -> tuple[str, int]:
    """How long ago a change happened (``" two weeks ago"``, or ``""`` for the session day), and its
    day, at least ``keep_days`` after the previous session (a job's stint must span a whole month for
    the dated question)."""
    options = [o for o in OFFSETS if gap_days - (date - _minus(date, o[1], o[2])).days >= keep_days]
    phrase, amount, unit = options[int(rng.integers(len(options)))]
    return f" {phrase}" if phrase else "", _day(_minus(date, amount, unit))


def _persona_sessions(
    rng: np.random.Generator, name: str, pid: int, num_sessions: int
) -> tuple[list[Session], dict[str, _Timeline]]:
    first = name.split()[0]
    dates = [FIRST_DAY + dt.timedelta(days=int(rng.integers(0, 200)))]
    for _ in range(num_sessions - 1):
        dates.append(dates[-1] + dt.timedelta(days=int(rng.integers(90, 241))))
    moves = _change_sessions(rng, num_sessions, 2, 3)
    job_changes = _change_sessions(rng, num_sessions, 1, 2)
    drink_changes = _change_sessions(rng, num_sessions, 1, 2)
    timelines = {rel: _Timeline() for rel in STATE_RELATIONS}
    hobbies = list(rng.permutation(HOBBIES))
    possessions = list(rng.permutation(POSSESSIONS))
    sessions = []
    for j, date in enumerate(dates):
        day = _day(date)
        gap = (date - dates[j - 1]).days if j else 10_000
        draft = _Draft(name, timelines)
        say, state, facts = draft.say, draft.state, draft.facts

        if j == 0:
            city, job, drink = (str(rng.choice(pool)) for pool in (CITIES, OCCUPATIONS, DRINKS))
            say(
                f"Hi, I'm {first}. I live in {city} and I work as {_article(job)}.",
                f"Nice to meet you, {first}! What do you usually drink in the morning?",
            )
            say(f"Mostly {drink}, it keeps me going.")
            for rel, value in ((RESIDENCE, city), (OCCUPATION, job), (DRINK, drink)):
                state(rel, value, day)
        else:
            if j in moves:
                old, new = _change(rng, CITIES, timelines[RESIDENCE])
                when, happened = _offset(rng, date, gap, keep_days=7)
                if rng.random() < 0.5:
                    say(f"Big news: I moved from {old} to {new}{when}.", f"How are you settling into {new}?")
                else:
                    say(f"I finally moved to {new}{when}.", "Exciting! How is the new place?")
                state(RESIDENCE, new, happened)
            elif rng.random() < 0.3:
                city = timelines[RESIDENCE].values[-1]
                say(f"Still enjoying life in {city}.", "Glad to hear it.")
                state(RESIDENCE, city, day)
            if j in job_changes:
                old, new = _change(rng, OCCUPATIONS, timelines[OCCUPATION])
                when, happened = _offset(rng, date, gap, keep_days=70)
                if rng.random() < 0.5:
                    say(f"I started a new job as {_article(new)}{when}.", "Congratulations on the new role!")
                else:  # no time words: it happened on the session day
                    say(f"I stopped being {_article(old)}; I work as {_article(new)} now.", "What a change!")
                    happened = day
                state(OCCUPATION, new, happened)
            if j in drink_changes:
                old, new = _change(rng, DRINKS, timelines[DRINK])
                if rng.random() < 0.5:
                    say(f"I switched from {old} to {new}.", "Interesting switch!")
                else:
                    say(f"These days I mostly drink {new}.")
                state(DRINK, new, day)
            elif rng.random() < 0.2:
                drink = timelines[DRINK].values[-1]
                say(f"Having my usual {drink} right now.")
                state(DRINK, drink, day)
        if rng.random() < 0.5 and hobbies:
            hobby = hobbies.pop()
            say(f"Lately I have really been into {hobby}.", "Sounds like fun!")
            facts.append(Fact(name, LIKES, str(hobby), day))
        if rng.random() < 0.35 and possessions:
            thing = possessions.pop()
            say(f"I just got {_article(thing)}.", f"Enjoy the {thing}!")
            facts.append(Fact(name, OWNS, str(thing), day))
        if not facts or rng.random() < 0.4:
            say(*SMALL_TALK[int(rng.integers(len(SMALL_TALK)))])
            if not facts:
                hobby = hobbies.pop() if hobbies else str(rng.choice(HOBBIES))
                say(f"I also spent the weekend on {hobby}.")
                facts.append(Fact(name, LIKES, str(hobby), day))
        sessions.append(Session(f"p{pid:02d}-s{j}", name, -1, date.isoformat(), draft.turns, facts))
    return sessions, timelines


def _month_inside(start: int, end: int) -> tuple[int, int] | None:
    """(year, month) of a calendar month lying wholly in days ``start..end``, nearest the middle."""
    mid = dt.date.fromordinal((start + end) // 2 + _EPOCH)
    for shift in (0, -1, 1, -2, 2, -3, 3):  # the nearest first; of two as near, the earlier
        year, month = _month(mid, shift)
        first = _day(dt.date(year, month, 1))
        if start <= first and first + calendar.monthrange(year, month)[1] - 1 <= end:
            return year, month
    return None


def _questions(name: str, pid: int, timelines: dict[str, _Timeline]) -> list[Question]:
    # The occupation held in a named month: a superseded job whose whole month lies in its stint.
    job = timelines[OCCUPATION]
    stints = (
        (value, _month_inside(start, end - 1))
        for value, start, end in zip(job.values, job.starts, job.starts[1:], strict=False)
    )
    held, month = next(((value, month) for value, month in stints if month is not None), (None, None))
    if month is None:
        raise AssertionError(f"{name}: no superseded occupation spans a whole month")
    label = f"{calendar.month_name[month[1]]} {month[0]}"
    questions = []
    for sub, (qtype, relation, index, question) in SUBTYPES.items():
        values = tuple(timelines[relation].values)  # distinct: a change never returns to a past value
        gold = held if index is None else values[index]
        text = question.format(name=name, new=values[-1], month=label)
        questions.append(
            Question(f"p{pid:02d}-{sub}", name, qtype, sub, text, gold, relation, gold != values[-1], values)
        )
    return questions


def generate(num_personas: int = 60, sessions_per_persona: int = 10, seed: int = 0) -> StateUpdateBenchmark:
    """The benchmark: ``num_personas * sessions_per_persona`` sessions and 7 questions per persona.

    Identical arguments give identical benchmarks. Sessions are returned in chronological order
    (ties by persona), with ``Session.index`` their position in that order.
    """
    if num_personas < 1 or num_personas > len(FIRST_NAMES):
        raise ValueError(f"num_personas must be in 1..{len(FIRST_NAMES)}, got {num_personas}")
    if sessions_per_persona < 4:
        raise ValueError(
            f"sessions_per_persona must be >= 4 (3 moves need 4 sessions), got {sessions_per_persona}"
        )
    rng = np.random.default_rng(seed)
    firsts = rng.permutation(FIRST_NAMES)[:num_personas]
    personas = [f"{first} {rng.choice(LAST_NAMES)}" for first in firsts]
    made = [_persona_sessions(rng, name, pid, sessions_per_persona) for pid, name in enumerate(personas)]
    sessions = sorted((s for mine, _ in made for s in mine), key=lambda s: (s.date, s.session_id))
    for i, session in enumerate(sessions):
        session.index = i
    now = dt.date.fromisoformat(sessions[-1].date) + dt.timedelta(days=14)
    questions = [q for pid, name in enumerate(personas) for q in _questions(name, pid, made[pid][1])]
    values = {RESIDENCE: CITIES, OCCUPATION: OCCUPATIONS, DRINK: DRINKS, LIKES: HOBBIES, OWNS: POSSESSIONS}
    return StateUpdateBenchmark(sessions, questions, personas, values, now.isoformat())
