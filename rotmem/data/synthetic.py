"""A seeded synthetic temporal KG whose true answer is known at every day.

People have static relations (``born in``, ``citizen of``) that hold for the whole time span and
dynamic ones (``lives in``, ``works for``, ``president of``) that change on known schedules.
Facts are observations of a holding value on random days inside its validity interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rotmem.data.temporal_kg import TemporalKG, day_of

SYNTHETIC_NAME = "synthetic"
STATIC_RELATIONS = ("born in", "citizen of")
DYNAMIC_RELATIONS = ("lives in", "works for", "president of")


@dataclass(frozen=True)
class Interval:
    """``subject relation object`` holds for days ``start <= day < end``."""

    subject: str
    relation: str
    object: str
    start: int
    end: int


@dataclass
class SyntheticKG:
    """The generated graph and its ground truth."""

    kg: TemporalKG
    intervals: list[Interval]
    first_day: int
    last_day: int

    def holder(self, subject: str, relation: str, day: int) -> str:
        """The object of ``(subject, relation)`` that holds on ``day`` (tail query)."""
        for iv in self.intervals:
            if iv.subject == subject and iv.relation == relation and iv.start <= day < iv.end:
                return iv.object
        raise KeyError(f"no value of ({subject!r}, {relation!r}) holds on day {day}")

    def subject_of(self, relation: str, obj: str, day: int) -> str:
        """The subject of ``(?, relation, obj)`` on ``day`` (head query, e.g. who is president)."""
        for iv in self.intervals:
            if iv.relation == relation and iv.object == obj and iv.start <= day < iv.end:
                return iv.subject
        raise KeyError(f"nobody holds ({relation!r}, {obj!r}) on day {day}")


def _schedule(rng: np.random.Generator, first: int, last: int, mean_days: float) -> list[int]:
    """Change days: the span cut into stints of random length around ``mean_days``."""
    cuts = [first]
    day = first
    while True:
        day += int(rng.uniform(0.5, 1.5) * mean_days)
        if day >= last:
            break
        cuts.append(day)
    return cuts + [last + 1]


def synthetic_kg(
    num_people: int = 240,
    num_cities: int = 24,
    num_countries: int = 8,
    num_companies: int = 16,
    first_date: str = "2000-01-01",
    last_date: str = "2010-12-31",
    observations_per_year: float = 4.0,
    seed: int = 0,
) -> SyntheticKG:
    """Generate the graph; identical arguments give identical graphs."""
    rng = np.random.default_rng(seed)
    first, last = day_of(first_date), day_of(last_date)
    people = [f"person_{i:03d}" for i in range(num_people)]
    cities = [f"city_{i:02d}" for i in range(num_cities)]
    countries = [f"country_{i}" for i in range(num_countries)]
    companies = [f"company_{i:02d}" for i in range(num_companies)]
    intervals: list[Interval] = []

    def changing(subject: str, relation: str, values: list[str], mean_days: float) -> None:
        cuts = _schedule(rng, first, last, mean_days)
        previous = None
        for start, end in zip(cuts[:-1], cuts[1:], strict=True):
            choices = [v for v in values if v != previous]
            previous = choices[rng.integers(len(choices))]
            intervals.append(Interval(subject, relation, previous, start, end))

    for person in people:
        intervals.append(Interval(person, "born in", cities[rng.integers(num_cities)], first, last + 1))
        country = countries[rng.integers(num_countries)]
        intervals.append(Interval(person, "citizen of", country, first, last + 1))
        changing(person, "lives in", cities, mean_days=900)
        changing(person, "works for", companies, mean_days=1300)
    for country in countries:
        cuts = _schedule(rng, first, last, mean_days=1460)
        for start, end in zip(cuts[:-1], cuts[1:], strict=True):
            intervals.append(Interval(people[rng.integers(num_people)], "president of", country, start, end))

    entities = people + cities + countries + companies
    relations = list(STATIC_RELATIONS + DYNAMIC_RELATIONS)
    entity_id = {e: i for i, e in enumerate(entities)}
    relation_id = {r: i for i, r in enumerate(relations)}
    facts = set()
    for iv in intervals:
        count = max(1, rng.poisson(observations_per_year * (iv.end - iv.start) / 365.25))
        for day in rng.integers(iv.start, iv.end, size=count):
            facts.add((entity_id[iv.subject], relation_id[iv.relation], entity_id[iv.object], int(day)))
    quads = torch.tensor(sorted(facts), dtype=torch.int64)
    quads = quads[torch.from_numpy(rng.permutation(len(quads)))]
    n_test = n_valid = len(quads) // 10
    kg = TemporalKG(
        name=SYNTHETIC_NAME,
        entities=entities,
        relations=relations,
        train=quads[n_valid + n_test :],
        valid=quads[:n_valid],
        test=quads[n_valid : n_valid + n_test],
    )
    return SyntheticKG(kg=kg, intervals=intervals, first_day=first, last_day=last)
