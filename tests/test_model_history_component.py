"""The history term as a component any family takes: TNTComplEx + history against its formula,
leave-one-out in the loss, the history-zeroed model against plain TNTComplEx, and a Phase-2 run
that trains, checkpoints and reloads it."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch

from lightning_modules.kg_data import TemporalKGDataModule
from lightning_modules.phase2 import Phase2Module
from rotmem import load_model
from rotmem.data import synthetic_kg
from rotmem.losses import one_vs_all_loss
from rotmem.models import HistorySpec, RoMem, TNTComplEx
from rotmem.models.history import FactHistory

N, R, DAYS, FIRST = 11, 3, 30, 1000
FACTS = torch.tensor(
    [
        [0, 0, 1, 1000],
        [0, 0, 1, 1002],
        [0, 0, 1, 1020],
        [0, 0, 2, 1001],
        [3, 1, 4, 1010],
        [5, 2, 6, 1029],
        [0, 1, 1, 1000],  # the pair (0, 1) on the same day in another relation: its rule entry stays
        [1, 2, 0, 1003],  # and in the other direction
    ]
)


def as_complex(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1] // 2
    return torch.complex(x[..., :n], x[..., n:])


def make(history=(1, 7), pairs=(2,), causal=False, seed=0, rules=None) -> TNTComplEx:
    torch.manual_seed(seed)
    model = TNTComplEx(
        N,
        R,
        dim=8,
        tau0=FIRST,
        num_days=DAYS,
        init_scale=0.5,
    )
    if history:
        spec = HistorySpec(slot_windows=history, pair_windows=pairs, rule_windows=rules, causal=causal)
        model.attach_history(spec, FACTS)
    model = model.double()
    if model.history is not None:
        with torch.no_grad():
            model.history.weight.normal_()
            if rules:
                model.history.rule_weight.normal_()
    return model


def tnt_formula(model: TNTComplEx, h, r, t, day, head=False) -> torch.Tensor:
    """``Re(Σ_j h_j (r_j T_j + r'_j) conj(t_j))`` at whole days, written out, without history."""
    rows = r + R * head
    e = as_complex(model.entity)
    time = as_complex(model.time)[day - FIRST]
    relation = as_complex(model.rel_time)[rows] * time + as_complex(model.rel_static)[rows]
    return (e[h] * relation * e[t].conj()).real.sum(-1)


def history_formula(model, e, rel, day, answer, exclude=None) -> torch.Tensor:
    """``Σ_k softplus(v_{rel,k}) · log(1 + count_k)`` of each (query, answer), plus with rule
    windows ``Σ_{r',k} softplus(u_{rel,r',k}) · log(1 + count_{r',k})``, counted by hand from
    ``FACTS`` (both directions; ``exclude``: leave out one entry of the query's own fact)."""
    history = model.history
    softplus = torch.nn.functional.softplus
    out = []
    for i in range(len(e)):
        slot, pair = [], []  # gaps; pair entries with the relation they were filed under
        for h, r, t, d in FACTS.tolist():
            for known, relation, other in ((h, r, t), (t, r + R, h)):
                gap = abs(d - int(day[i]))
                if model.history.causal and d >= int(day[i]):
                    continue
                if known == int(e[i]) and other == int(answer[i]):
                    pair.append((gap, relation))
                    if relation == int(rel[i]):
                        slot.append(gap)
        if exclude is not None and exclude[i]:  # the fact itself: one entry of each kind at gap 0
            slot.remove(0)
            pair.remove((0, int(rel[i])))
        counts = [sum(g <= w for g in slot) for w in history.slot_windows.tolist()]
        counts += [sum(g <= w for g, _ in pair) for w in history.pair_windows.tolist()]
        weight = softplus(history.weight[int(rel[i])])
        total = (weight * torch.log1p(torch.tensor(counts, dtype=torch.float64))).sum()
        if history.rule_weight is not None:
            for known in {relation for _, relation in pair}:
                rule = [sum(g <= w and k == known for g, k in pair) for w in history.rule_windows.tolist()]
                weight = softplus(history.rule_weight[int(rel[i]), known])
                total = total + (weight * torch.log1p(torch.tensor(rule, dtype=torch.float64))).sum()
        out.append(total)
    return torch.stack(out)


# windows up to LISTED_REACH days list their entries, longer ones count per (query, answer): both
# ways, with and without the rule counts
WINDOWS = [((1, 7), (2,), None), ((1, 7, 100, 5000), (2, 90, 5000), None), ((1, 7), (2,), (0, 3, 30))]


@pytest.mark.parametrize("slots,pairs,rules", WINDOWS)
def test_tntcomplex_with_history_scores_the_formula_plus_the_counts(slots, pairs, rules):
    model = make(slots, pairs, rules=rules)
    h, t = torch.randint(0, N, (30,)), torch.randint(0, N, (30,))
    r, day = torch.randint(0, R, (30,)), torch.randint(FIRST, FIRST + DAYS, (30,))
    h[:4], r[:4], t[:4], day[:4] = 0, 0, 1, torch.tensor([1001, 1003, 1019, 1025])  # history hits
    bias = history_formula(model, h, r, day, t)
    assert (bias[:4] > 0).all()
    expected = tnt_formula(model, h, r, t, day) + bias
    torch.testing.assert_close(model.score(h, r, t, day), expected)
    torch.testing.assert_close(model.score_tails(h, r, day)[torch.arange(30), t], expected)
    heads = model.score_heads(r, t, day)[torch.arange(30), h]
    head_bias = history_formula(model, t, r + R, day, h)
    torch.testing.assert_close(heads, tnt_formula(model, t, r, h, day, head=True) + head_bias)
    several = model.score(h[:4], r[:4], t[:4], torch.stack([day[:4], day[:4] + 3], 1))
    torch.testing.assert_close(several[:, 0], expected[:4])


@pytest.mark.parametrize("slots,pairs,rules", WINDOWS)
def test_a_causal_history_on_tntcomplex_counts_only_earlier_days(slots, pairs, rules):
    model = make(slots, pairs, causal=True, rules=rules)
    h, r, t, day = (
        torch.tensor([0, 0]),
        torch.tensor([0, 0]),
        torch.tensor([1, 2]),
        torch.tensor([1001, 1001]),
    )
    bias = history_formula(model, h, r, day, t)
    # answer 1: day 1000 only (1002 is later); answer 2: its fact is on the asked day, not before
    assert bias[0] > 0 and bias[1] == 0
    torch.testing.assert_close(model.score(h, r, t, day), tnt_formula(model, h, r, t, day) + bias)


@pytest.mark.parametrize("slots,pairs,rules", WINDOWS)
def test_the_loss_leaves_exactly_each_fact_out_of_its_own_counts(slots, pairs, rules):
    model = make(slots, pairs, rules=rules)
    loss = one_vs_all_loss(model, FACTS)
    h, r, t, day = FACTS.unbind(1)
    everyone = torch.arange(N)
    logits = []
    for known, rel, answer, head in ((h, r, t, False), (t, r + R, h, True)):
        dense = tnt_formula(
            model, known[:, None], rel[:, None] - R * head, everyone[None], day[:, None], head
        )
        for i in range(len(known)):
            e, rr, d = (x[i].expand(N) for x in (known, rel, day))
            own = everyone == answer[i]  # only the asked answer's counts lose the fact
            dense[i] = dense[i] + history_formula(model, e, rr, d, everyone, exclude=own)
        logits.append(dense)
    expected = torch.nn.functional.cross_entropy(torch.cat(logits), torch.cat([t, h]))
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert model.history.weight.grad.abs().sum() > 0 and model.time.grad.abs().sum() > 0


def test_the_history_zeroed_model_is_plain_tntcomplex():
    plain, with_history = make(history=None), make()
    with torch.no_grad():
        with_history.history.weight.fill_(-float("inf"))  # softplus(-inf) = 0: no say at all
    for name, value in plain.state_dict().items():
        torch.testing.assert_close(with_history.state_dict()[name], value, rtol=0, atol=0)
    h, r, day = torch.tensor([0, 3, 5]), torch.tensor([0, 1, 2]), torch.tensor([1001, 1010, 1029])
    t = torch.tensor([1, 4, 6])  # the facts' own answers: counts everywhere
    for fn, args in (("score_tails", (h, r, day)), ("score_heads", (r, t, day)), ("score", (h, r, t, day))):
        torch.testing.assert_close(
            getattr(with_history, fn)(*args), getattr(plain, fn)(*args), rtol=0, atol=0
        )
    torch.testing.assert_close(one_vs_all_loss(with_history, FACTS), one_vs_all_loss(plain, FACTS))


def test_any_family_takes_the_same_history_and_a_save_file_rebuilds_it(tmp_path):
    torch.manual_seed(0)
    spec = HistorySpec(slot_windows=(1, 7), pair_windows=(2,), rule_windows=(0, 3))
    model = RoMem(N, R, dim=8, k=1, tau0=FIRST).attach_history(spec, FACTS)
    assert HistorySpec.of(model.history) == spec and "history_windows" not in model.config
    h, r, t, day = FACTS[:3].unbind(1)
    assert (model.score(h, r, t, day) > model.embedding_score(h, r, t, day.double())).all()
    model.set_vocabulary([f"e{i}" for i in range(N)], [f"r{i}" for i in range(R)])
    model.save(str(tmp_path / "model.pt"))
    loaded = load_model(tmp_path / "model.pt")
    assert HistorySpec.of(loaded.history) == spec
    torch.testing.assert_close(loaded.score(h, r, t, day), model.score(h, r, t, day), rtol=0, atol=0)
    with pytest.raises(ValueError, match="need causal=True"):
        TNTComplEx(N, R, dim=8).attach_history(HistorySpec(slot_windows=(1,), eval_splits=("train", "test")))
    with pytest.raises(ValueError, match="does not fit"):
        TNTComplEx(N, R, dim=8).attach_history(FactHistory(N + 1, R, slot_windows=(1,)))


@pytest.mark.slow
def test_phase2_trains_tntcomplex_with_history_and_the_checkpoint_reloads_it(tmp_path):
    kg = synthetic_kg(num_people=40, num_cities=8, num_companies=6, num_countries=3, seed=2).kg
    data = TemporalKGDataModule(kg=kg, batch_size=256, num_negative_times=0)
    family = TNTComplEx(
        data.num_entities,
        data.num_relations,
        tau0=data.tau0,
        num_days=data.num_days,
        dim=16,
        init_scale=0.1,
    )
    module = Phase2Module(
        family,
        history=HistorySpec(slot_windows=(1, 30), pair_windows=(7,), rule_windows=(3, 30)),
        regularizer="modulus3",
        regularizer_weight=1e-3,
        time_weight=0.0,
        smoothness_weight=1.0,
    )
    assert isinstance(module.model, TNTComplEx) and module.model.history.is_empty  # indexed at setup
    fit = pl.Trainer(
        max_epochs=1,
        default_root_dir=tmp_path,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[pl.callbacks.ModelCheckpoint(dirpath=tmp_path, monitor="val/time-aware/mrr", mode="max")],
    )
    fit.fit(module, datamodule=data)
    assert module.model.history.slot_codes.numel() == 2 * kg.train.shape[0]
    assert not torch.equal(module.model.history.weight, torch.full_like(module.model.history.weight, -3.0))
    rules = module.model.history.rule_weight
    assert module.model.history.pair_relations.numel() == 2 * kg.train.shape[0]
    assert not torch.equal(rules, torch.full_like(rules, -4.0))
    loaded = load_model(fit.checkpoint_callback.best_model_path)
    assert isinstance(loaded, TNTComplEx) and loaded.config["tau0"] == data.tau0
    assert HistorySpec.of(loaded.history) == HistorySpec.of(module.model.history)
    assert module.hparams.history["rule_windows"] == [3, 30]
    h, r, _, day = kg.test[:40].unbind(1)
    expected = module.model.eval().score_tails(h, r, day.double())
    torch.testing.assert_close(loaded.score_tails(h, r, day.double()), expected, rtol=0, atol=0)


@pytest.mark.parametrize("causal", [False, True])
def test_listing_entries_and_counting_per_answer_give_the_same_features(monkeypatch, causal):
    """The two ways ``FactHistory.features`` counts (listing every entry within reach; one search per
    (query, answer) for long windows) agree exactly, own-fact exclusion included, on a random graph
    with repeats, same-day duplicates and days outside the range."""
    import rotmem.models.history as history_module

    g = torch.Generator().manual_seed(7)
    n, r, m = 25, 4, 3000
    facts = torch.stack(
        [
            torch.randint(0, n, (m,), generator=g),
            torch.randint(0, r, (m,), generator=g),
            torch.randint(0, n, (m,), generator=g),
            torch.randint(2000, 2400, (m,), generator=g),
        ],
        1,
    )
    facts = torch.cat([facts, facts[:50]])  # the same fact twice on its day: one of the two is left out
    history = history_module.FactHistory(n, r, (0, 3, 45, 120, 900), (1, 61, 400), facts, causal=causal)
    asked = torch.cat([facts[:200], torch.tensor([[1, 1, 2, 1500], [3, 2, 4, 9000]])])
    e = torch.cat([asked[:, 0], asked[:, 2]])
    rel = torch.cat([asked[:, 1], asked[:, 1] + r])
    tau = torch.cat([asked[:, 3], asked[:, 3]]).double() + 0.5
    exclude = torch.cat([asked[:, 2], asked[:, 0]])
    for own in (None, exclude):
        monkeypatch.setattr(history_module, "LISTED_REACH", 10**6)
        listed = history.features(e, rel, tau, own)
        monkeypatch.setattr(history_module, "LISTED_REACH", 0)
        searched = history.features(e, rel, tau, own)
        assert listed[0].numel() > 1000  # many (query, answer) rows, so the comparison says something
        for a, b in zip(listed, searched, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
