"""RoMem on a ComplEx backbone: its score against a transcription of the formula, the history's
counts by hand, the loss against a dense reference, saving and loading."""

from __future__ import annotations

import pytest
import torch

from rotmem import load_model
from rotmem.losses import one_vs_all_loss
from rotmem.models import HistorySpec, RoMemComplEx
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
    ]
)


def as_complex(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1] // 2
    return torch.complex(x[..., :n], x[..., n:])


def make(history=(1, 7), day_table=True, seed=0, pairs=(2,)) -> RoMemComplEx:
    torch.manual_seed(seed)
    model = RoMemComplEx(
        N,
        R,
        dim=8,
        tau0=FIRST,
        num_days=DAYS,
        speed="learned",
        init_s=0.3,
        init_scale=0.5,
        day_table=day_table,
    )
    if history:
        model.attach_history(HistorySpec(slot_windows=history, pair_windows=pairs), FACTS)
    model = model.double()
    with torch.no_grad():
        if model.day is not None:
            model.day.normal_(0, 0.3)
        model.speed.logit.normal_()
        if model.history is not None:
            model.history.weight.normal_()
    return model


def formula(model: RoMemComplEx, h, r, t, day, head=False) -> torch.Tensor:
    """``Re(Σ_j h_j (s_j + d_j e^{iθ_j} u_j) conj(t_j))`` at whole days, without history."""
    rows = r + R * head
    e = as_complex(model.entity)
    alpha = torch.sigmoid(model.speed.logit[r])[..., None]
    omega = torch.exp(-model.spectrum.log_base * torch.arange(model.n, dtype=torch.float64) / model.n)
    theta = alpha * torch.exp(model.spectrum.log_s) * (day[..., None] - FIRST) * omega
    u = as_complex(model.day)[day - FIRST] if model.day is not None else 1
    dynamic = as_complex(model.rel_dynamic)[rows] * torch.exp(1j * theta) * u
    return (e[h] * (as_complex(model.rel_static)[rows] + dynamic) * e[t].conj()).real.sum(-1)


def counts(history, e, rel, day, exclude=None) -> dict[int, list[float]]:
    rows, answers, features = history.features(
        torch.tensor([e]),
        torch.tensor([rel]),
        torch.tensor([float(day)]),
        None if exclude is None else torch.tensor([exclude]),
    )
    assert (rows == 0).all()
    return dict(zip(answers.tolist(), torch.expm1(features).round().tolist(), strict=True))


def test_history_counts_by_hand():
    history = FactHistory(N, R, slot_windows=(1, 7), pair_windows=(2,), facts=FACTS)
    # tail query (0, r0, ?, day 1001): answer 1 on days 1000 and 1002 (within 1 and 7 days), 1020
    # outside; answer 2 on day 1001 (gap 0). Pair counts (any relation, within 2 days): the same.
    assert counts(history, 0, 0, 1001) == {1: [2.0, 2.0, 2.0], 2: [1.0, 1.0, 1.0]}
    # as the training fact (0, r0, 2, 1001) it leaves itself out, of both kinds of counts
    assert counts(history, 0, 0, 1001, exclude=2) == {1: [2.0, 2.0, 2.0]}
    # head query (?, r0, 1, day 1019) asks slot (1, R + 0): head 0 on day 1020, within 1 day
    assert counts(history, 1, R, 1019) == {0: [1.0, 1.0, 1.0]}
    # pair counts ignore the relation: (0, r1, ?, 1003) has no slot history, but 0 met 1 on 1002
    # and 2 on 1001, both within 2 days
    assert counts(history, 0, 1, 1003) == {1: [0.0, 0.0, 1.0], 2: [0.0, 0.0, 1.0]}
    # far from every fact: nothing
    assert history.features(torch.tensor([0]), torch.tensor([0]), torch.tensor([5000.0]))[0].numel() == 0


def test_a_history_needs_a_window():
    with pytest.raises(ValueError, match="at least one window"):
        FactHistory(N, R, slot_windows=None, pair_windows=())


def test_scores_match_the_formula_plus_history():
    model = make()
    h, t = torch.randint(0, N, (40,)), torch.randint(0, N, (40,))
    r, day = torch.randint(0, R, (40,)), torch.randint(FIRST, FIRST + DAYS, (40,))
    h[:4], r[:4], t[:4], day[:4] = 0, 0, 1, torch.tensor([1001, 1003, 1019, 1025])  # history hits
    bias = torch.zeros(40, dtype=torch.float64)
    rows, answers, values = model.history.bias(h, r, day.double())
    hit = answers == t[rows]
    bias.index_add_(0, rows[hit], values[hit])
    assert (bias[:4] > 0).all()
    expected = formula(model, h, r, t, day) + bias
    torch.testing.assert_close(model.score(h, r, t, day), expected)
    torch.testing.assert_close(model.score_tails(h, r, day)[torch.arange(40), t], expected)
    rows, answers, values = model.history.bias(t, r + R, day.double())
    hit = answers == h[rows]
    head_bias = torch.zeros(40, dtype=torch.float64).index_add_(0, rows[hit], values[hit])
    heads = model.score_heads(r, t, day)[torch.arange(40), h]
    torch.testing.assert_close(heads, formula(model, t, r, h, day, head=True) + head_bias)
    several = model.score(h[:4], r[:4], t[:4], torch.stack([day[:4], day[:4] + 3], 1))
    torch.testing.assert_close(several[:, 0], expected[:4])


def test_without_residual_or_history_it_is_pure_functional_time():
    model = make(history=None, day_table=False)
    assert model.day is None and model.history is None and model.time_regularizer() is None
    h, r, t, day = (
        torch.tensor([1, 2]),
        torch.tensor([0, 2]),
        torch.tensor([3, 4]),
        torch.tensor([1003, 1020]),
    )
    torch.testing.assert_close(model.score(h, r, t, day), formula(model, h, r, t, day))
    far = model.score(h, r, t, torch.tensor([1e5, 2e5], dtype=torch.float64))  # any day: finite
    assert torch.isfinite(far).all()


def test_the_loss_is_the_dense_cross_entropy_with_history_leaving_each_fact_out():
    model = make()
    loss = one_vs_all_loss(model, FACTS)
    h, r, t, day = FACTS.unbind(1)
    tails = formula(model, h[:, None], r[:, None], torch.arange(N)[None], day[:, None])
    heads = formula(model, t[:, None], r[:, None], torch.arange(N)[None], day[:, None], head=True)
    logits = torch.cat([tails, heads])
    queries = torch.cat([h, t]), torch.cat([r, r + R]), torch.cat([day, day]).double()
    rows, answers, values = model.history.bias(*queries, exclude=torch.cat([t, h]))
    logits = logits.index_put((rows, answers), values, accumulate=True)
    expected = torch.nn.functional.cross_entropy(logits, torch.cat([t, h]))
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert model.history.weight.grad.abs().sum() > 0 and model.day.grad.abs().sum() > 0


def test_save_and_load_keeps_the_history(tmp_path):
    model = make()
    model.set_vocabulary([f"e{i}" for i in range(N)], [f"r{i}" for i in range(R)])
    model.save(str(tmp_path / "m.pt"))
    loaded = load_model(tmp_path / "m.pt")
    assert isinstance(loaded, RoMemComplEx) and loaded.history.slot_codes.numel() == 2 * FACTS.shape[0]
    h, r, day = torch.tensor([0, 3]), torch.tensor([0, 1]), torch.tensor([1001, 1009])
    torch.testing.assert_close(loaded.double().score_tails(h, r, day), model.score_tails(h, r, day))


@pytest.mark.parametrize("history", [None, (1, 7)])
@pytest.mark.slow
def test_gradcheck_in_float64(history):
    model = make(history=history)
    h, r, t = torch.tensor([0, 2]), torch.tensor([0, 1]), torch.tensor([1, 5])
    tau = torch.tensor([1001.5, 1012.25], dtype=torch.float64)
    names = [name for name, _ in model.named_parameters()]
    params = [p.detach().clone().requires_grad_() for _, p in model.named_parameters()]

    def score(*values):
        return torch.func.functional_call(model, dict(zip(names, values, strict=True)), (h, r, t, tau))

    assert torch.autograd.gradcheck(score, params)
