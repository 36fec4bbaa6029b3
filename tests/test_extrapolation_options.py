"""The options for temporal extrapolation: a causal history (counts by hand), the facts it knows
while evaluated (and the training index restored after, also around a Lightning fit), and the
rotation held past the training range."""

from __future__ import annotations

import math

import pytest
import pytorch_lightning as pl
import torch

from lightning_modules.kg_data import TemporalKGDataModule
from lightning_modules.phase2 import Phase2Module
from rotmem import evaluate, load_model
from rotmem.data import split_by_time, synthetic_kg
from rotmem.data.temporal_kg import TemporalKG, date_of
from rotmem.models import HistorySpec, RoMemComplEx
from rotmem.models.history import BUFFERS, FactHistory, known_facts

N, R, FIRST, DAYS = 8, 2, 1000, 30
TRAIN = torch.tensor([[0, 0, 1, 1000], [0, 0, 1, 1002], [0, 0, 2, 1001], [3, 1, 4, 1010]])
VALID = torch.tensor([[0, 0, 2, 1031]])
TEST = torch.tensor([[0, 0, 2, 1033], [0, 0, 1, 1034]])


def counts(history: FactHistory, e: int, rel: int, day: float) -> dict[int, list[float]]:
    """``{answer: [count per window]}`` for one query."""
    rows, answers, features = history.features(torch.tensor([e]), torch.tensor([rel]), torch.tensor([day]))
    pairs = zip(answers.tolist(), features.tolist(), strict=True)
    return {a: [round(math.expm1(v), 6) for v in f] for a, f in pairs}


def test_a_causal_history_counts_only_earlier_days():
    plain = FactHistory(N, R, slot_windows=(1, 7), pair_windows=(2,), facts=TRAIN)
    causal = FactHistory(N, R, slot_windows=(1, 7), pair_windows=(2,), facts=TRAIN, causal=True)
    # (0, r0, ?, 1001): 1000 and 1002 are within a day; 1001 is the asked day itself
    assert counts(plain, 0, 0, 1001) == {1: [2.0, 2.0, 2.0], 2: [1.0, 1.0, 1.0]}
    assert counts(causal, 0, 0, 1001) == {1: [1.0, 1.0, 1.0]}
    # 1003: answer 1 on 1000 (3 days back) and 1002 (1), answer 2 on 1001 (2)
    assert counts(causal, 0, 0, 1003) == {1: [1.0, 2.0, 1.0], 2: [0.0, 1.0, 1.0]}
    # a fractional day is floored: 1000.9 asks about day 1000, which has nothing before it
    assert counts(causal, 0, 0, 1000.9) == {}
    # reciprocal slot (1, r0⁻¹, ?): head 0 on 1000 and 1002
    assert counts(causal, 1, R, 1002) == {0: [0.0, 1.0, 1.0]}


@pytest.mark.parametrize(
    ("splits", "causal", "message"),
    [
        (("train", "valid"), False, "need causal=True"),
        (("train", "tests"), True, "must include 'train'"),
        (("valid",), True, "must include 'train'"),
    ],
)
def test_bad_eval_splits_are_refused(splits, causal, message):
    with pytest.raises(ValueError, match=message):
        FactHistory(N, R, slot_windows=(1,), causal=causal, eval_splits=splits)


def model(eval_splits=("train",), causal=True, hold=False) -> RoMemComplEx:
    torch.manual_seed(0)
    family = RoMemComplEx(
        N,
        R,
        dim=8,
        tau0=FIRST,
        num_days=DAYS,
        speed="learned",
        init_s=0.3,
        init_scale=0.5,
        day_table=True,
        hold_rotation=hold,
    )
    spec = HistorySpec(slot_windows=(1, 7), pair_windows=(2,), causal=causal, eval_splits=eval_splits)
    return family.attach_history(spec, TRAIN)


def kg() -> TemporalKG:
    return TemporalKG("tiny", [f"e{i}" for i in range(N)], [f"r{i}" for i in range(R)], TRAIN, VALID, TEST)


def test_known_facts_adds_the_eval_splits_and_restores_the_training_index():
    m = model(eval_splits=("train", "valid", "test"))
    before = {name: getattr(m.history, name).clone() for name in BUFFERS}
    # (0, r0, ?, 1034): only the valid fact on 1031 and the test fact on 1033 are within 7 days
    assert counts(m.history, 0, 0, 1034) == {}
    with known_facts(m, kg()):
        assert counts(m.history, 0, 0, 1034) == {2: [1.0, 2.0, 1.0]}
        # the asked fact itself (answer 1 on 1034) is never counted
        assert 1 not in counts(m.history, 0, 0, 1034)
    for name, value in before.items():
        assert torch.equal(getattr(m.history, name), value), name
    with pytest.raises(RuntimeError, match="boom"), known_facts(m, kg()):
        raise RuntimeError("boom")
    assert torch.equal(m.history.slot_codes, before["slot_codes"])


def test_train_and_valid_only_leave_the_test_split_out():
    m = model(eval_splits=("train", "valid"))
    with known_facts(m, kg()):
        assert counts(m.history, 0, 0, 1034) == {2: [0.0, 1.0, 0.0]}  # the valid fact, 3 days back


def test_evaluation_uses_the_known_facts():
    tiny = kg()
    online, offline = model(eval_splits=("train", "valid", "test")), model(eval_splits=("train",))
    offline.load_state_dict(online.state_dict())
    with torch.no_grad():
        online.history.weight.fill_(5.0)  # a history term that decides the ranking
        offline.history.weight.fill_(5.0)
    # the test fact (0, r0, 2, 1033) follows the valid fact (0, r0, 2, 1031): only the online
    # history sees it, and ranks answer 2 first
    assert (
        evaluate(online, tiny, "test", filter="static")["hits@1"]
        > evaluate(offline, tiny, "test", filter="static")["hits@1"]
    )


def test_held_rotation_stops_at_the_ends_of_the_training_range():
    held, turning = model(hold=True), model(hold=False)
    h, r = torch.tensor([0, 3, 5]), torch.tensor([0, 1, 1])
    last = FIRST + DAYS - 1
    with torch.no_grad():
        for day in (FIRST, FIRST + 7.5, last):  # inside the range the two agree
            torch.testing.assert_close(held.score_tails(h, r, day), turning.score_tails(h, r, day))
        torch.testing.assert_close(held.score_tails(h, r, last + 365), held.score_tails(h, r, last))
        torch.testing.assert_close(held.score_tails(h, r, FIRST - 40), held.score_tails(h, r, FIRST))
        assert not torch.allclose(turning.score_tails(h, r, last + 365), turning.score_tails(h, r, last))


@pytest.mark.slow
def test_a_fit_with_an_online_history_checkpoints_the_training_index(tmp_path):
    base = synthetic_kg(num_people=40, num_cities=8, num_companies=6, num_countries=3, seed=2).kg
    days = torch.unique(base.all_facts[:, 3])
    valid_from, test_from = (date_of(int(days[len(days) * k // 5])) for k in (3, 4))
    split, _ = split_by_time(base, valid_from, test_from)
    data = TemporalKGDataModule(kg=split, batch_size=256, num_negative_times=0)
    family = RoMemComplEx(
        data.num_entities,
        data.num_relations,
        tau0=data.tau0,
        num_days=data.num_days,
        dim=16,
        init_scale=0.1,
        init_s=0.01,
        day_table=True,
        hold_rotation=True,
    )
    module = Phase2Module(
        family,
        history=HistorySpec(
            slot_windows=(1, 30), pair_windows=(7,), causal=True, eval_splits=("train", "valid", "test")
        ),
        regularizer="modulus3",
        regularizer_weight=1e-3,
        time_weight=0.0,
    )
    fit = pl.Trainer(
        max_epochs=1,
        default_root_dir=tmp_path,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[pl.callbacks.ModelCheckpoint(dirpath=tmp_path, monitor="val/time-aware/mrr", mode="max")],
    )
    fit.fit(module, datamodule=data)
    fit.test(module, datamodule=data, verbose=False)
    train_entries = 2 * split.train.shape[0]
    assert module.model.history.slot_codes.numel() == train_entries
    loaded = load_model(fit.checkpoint_callback.best_model_path)
    assert loaded.history.slot_codes.numel() == train_entries
    assert loaded.history.causal and loaded.history.eval_splits == ("train", "valid", "test")
    assert loaded.config["hold_rotation"]
    tie = fit.callback_metrics["test/time-aware/mrr"]
    assert torch.isfinite(tie) and 0 < float(tie) <= 1
