"""The online Phase-2 fit: a plain torch loop (no Lightning), RoMem and the discrete-time TNTComplEx."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import pytest
import torch

from rotmem.data import TemporalKG, day_of
from rotmem.memory.temporal.fit import FitConfig, fit_model
from rotmem.models import HistorySpec, RoMem, TNTComplEx

# One slot per person whose city changes each year: the model must learn which city holds when.
PEOPLE, CITIES, YEARS = 6, 4, range(2015, 2019)


def moving_kg() -> TemporalKG:
    entities = [f"p{i}" for i in range(PEOPLE)] + [f"c{j}" for j in range(CITIES)]
    rows = []
    for i in range(PEOPLE):
        for y, year in enumerate(YEARS):
            city = PEOPLE + (i + y) % CITIES
            for month in ("01", "04", "07", "10"):
                rows.append([i, 0, city, day_of(f"{year}-{month}-15")])
    empty = torch.zeros(0, 4, dtype=torch.int64)
    return TemporalKG("moving", entities, ["lives in"], torch.tensor(rows), empty, empty)


def city_hits(model, kg: TemporalKG) -> float:
    """Fraction of facts whose tail is the model's top city at the fact's day."""
    h, r, t, day = kg.train.unbind(1)
    with torch.no_grad():
        scores = model.score_tails(h, r, day.double())[:, PEOPLE:]
    return float((scores.argmax(1) + PEOPLE == t).float().mean())


@pytest.mark.parametrize("family, model_class", [("romem", RoMem), ("tntcomplex", TNTComplEx)])
@pytest.mark.slow
def test_fit_learns_which_value_holds_when(family: str, model_class: type) -> None:
    kg = moving_kg()
    rotation = dict(init_s=0.003) if family == "romem" else {}
    config = FitConfig(family=family, dim=16, epochs=60, lr=0.2, batch_size=32, **rotation)
    model, loss = fit_model(kg, config)
    assert isinstance(model, model_class) and not model.training and math.isfinite(loss)
    assert model.entities == kg.entities and model.relations == kg.relations
    # a static model can do no better than 1 in CITIES per person; time-aware ones learn the moves
    assert city_hits(model, kg) >= 0.75


@pytest.mark.slow
def test_fit_is_seeded() -> None:
    kg = moving_kg()
    config = FitConfig(dim=8, epochs=3, batch_size=16)
    (a, loss_a), (b, loss_b) = fit_model(kg, config), fit_model(kg, config)
    assert loss_a == loss_b and torch.equal(a.entity, b.entity)


def test_frozen_speeds_stay_frozen() -> None:
    kg = moving_kg()
    model, _ = fit_model(kg, FitConfig(dim=8, epochs=2), alpha=torch.tensor([0.25]))
    assert model.speed.source == "gate" and model.speed.table.tolist() == [0.25]


@pytest.mark.slow
def test_fit_runs_with_lightning_unimportable() -> None:
    code = textwrap.dedent(
        """
        import sys
        for name in ("pytorch_lightning", "lightning", "lightning_modules"):
            sys.modules[name] = None  # import raises ImportError
        from rotmem.memory import HashingEncoder, TemporalMemory
        from rotmem.memory.temporal.fit import FitConfig
        memory = TemporalMemory(encoder=HashingEncoder(64), verify=False)
        memory.add_session("s1", [("Ana", "lives in", "Lisbon")], date="2018-01-10")
        memory.add_session("s2", [("Ana", "lives in", "Porto")], date="2019-06-01")
        stats = memory.fit(FitConfig(dim=8, epochs=2))
        assert stats["facts"] == 2.0, stats
        loaded = [m for m in sys.modules if sys.modules[m] is not None]
        assert not any(m.startswith(("pytorch_lightning", "lightning")) for m in loaded)
        print("fit ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "fit ok" in done.stdout


@pytest.mark.parametrize("family", ["romem", "tntcomplex"])
def test_fit_with_history_term(family: str) -> None:
    # the accuracy work's history term over the fitted facts: with it, even a 4-wide TNTComplEx (which
    # alone gets about 0.6 of these in 30 epochs) reads who lives where from the memory's own facts
    kg = moving_kg()
    spec = HistorySpec(slot_windows=(30, 90))
    config = FitConfig(family=family, history=spec, dim=4, epochs=30, lr=0.2, batch_size=32)
    model, loss = fit_model(kg, config)
    assert math.isfinite(loss) and HistorySpec.of(model.history) == spec
    assert city_hits(model, kg) >= 0.95


def test_fit_with_rule_counts_only() -> None:
    # the rule counts alone (no slot or pair windows) make a history of their own and train
    kg = moving_kg()
    config = FitConfig(
        "tntcomplex", history=dict(rule_windows=(0, 30)), dim=4, epochs=5, lr=0.2, batch_size=32
    )
    model, loss = fit_model(kg, config)
    assert math.isfinite(loss) and HistorySpec.of(model.history) == HistorySpec(rule_windows=(0, 30))
    assert (
        model.history.weight.shape[1] == 0 and model.history.pair_relations.numel() == 2 * kg.train.shape[0]
    )
    rules = model.history.rule_weight
    assert not torch.equal(rules, torch.full_like(rules, -4.0))  # the fit moved the rules' weights
