"""TNTComplEx against a direct transcription of its formula with complex tensors."""

from __future__ import annotations

import pytest
import torch

from rotmem import load_model
from rotmem.models import TNTComplEx

N, R, DAYS, FIRST = 13, 4, 9, 1000


def as_complex(x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1] // 2
    return torch.complex(x[..., :n], x[..., n:])


def formula(model: TNTComplEx, h, r, t, day) -> torch.Tensor:
    """``Re(Σ_j h_j (r_j T_j + r'_j) conj(t_j))`` at whole days, written out."""
    e = as_complex(model.entity.double())
    rel_t, rel_s = as_complex(model.rel_time.double()), as_complex(model.rel_static.double())
    time = as_complex(model.time.double())[day - FIRST]
    return (e[h] * (rel_t[r] * time + rel_s[r]) * e[t].conj()).real.sum(-1)


@pytest.fixture
def model() -> TNTComplEx:
    torch.manual_seed(0)
    return TNTComplEx(N, R, dim=10, tau0=FIRST, num_days=DAYS, init_scale=0.5).double()


def test_scores_match_the_formula_in_both_directions(model):
    h, t = torch.randint(0, N, (50,)), torch.randint(0, N, (50,))
    r, day = torch.randint(0, R, (50,)), torch.randint(FIRST, FIRST + DAYS, (50,))
    expected = formula(model, h, r, t, day)
    torch.testing.assert_close(model.score(h, r, t, day), expected)
    tails = model.score_tails(h, r, day)
    torch.testing.assert_close(tails[torch.arange(50), t], expected)
    # head queries use the reciprocal relation R + r: f(t, r⁻¹, h)
    heads = model.score_heads(r, t, day)
    torch.testing.assert_close(heads[torch.arange(50), h], formula(model, t, r + R, h, day))
    both = model.query_tails_and_heads(h, r, t, day)
    torch.testing.assert_close(both, torch.cat([model.query_tails(h, r, day), model.query_heads(r, t, day)]))


def test_fractional_and_out_of_range_days(model):
    h, r, t = torch.tensor([1, 2]), torch.tensor([0, 3]), torch.tensor([4, 5])
    low, high = model.score(h, r, t, torch.tensor([1003.0, 1003.0])), model.score(h, r, t, 1004.0)
    # the score is linear in T(τ), and T is interpolated linearly between days
    torch.testing.assert_close(model.score(h, r, t, 1003.25), 0.75 * low + 0.25 * high)
    torch.testing.assert_close(model.score(h, r, t, FIRST - 50.0), model.score(h, r, t, float(FIRST)))
    last = float(FIRST + DAYS - 1)
    torch.testing.assert_close(model.score(h, r, t, last + 400), model.score(h, r, t, last))
    several = model.score(h, r, t, torch.tensor([[1003.0, 1004.0, 1003.25], [1000.0, 999.0, 2000.0]]))
    assert several.shape == (2, 3)
    torch.testing.assert_close(several[0, 2], 0.75 * low[0] + 0.25 * high[0])


def test_regularisers_are_tkbc_s(model):
    facts = torch.tensor([[1, 2, 3, 1004], [5, 0, 6, 1001]])
    h, r, t, day = facts.unbind(1)
    e = as_complex(model.entity)
    time = as_complex(model.time)
    total = 0.0
    for lhs, rel, rhs in ((h, r, t), (t, r + R, h)):
        timed = as_complex(model.rel_time)[rel] * time[day - FIRST]
        static = as_complex(model.rel_static)[rel]
        for factor in (2 ** (1 / 3) * e[lhs].abs(), timed.abs(), static.abs(), 2 ** (1 / 3) * e[rhs].abs()):
            total = total + (factor**3).sum()
    torch.testing.assert_close(model.regularizer(facts, "modulus3"), total / 4)
    smooth = ((time[1:] - time[:-1]).abs() ** 3).sum() / (DAYS - 1)
    torch.testing.assert_close(model.time_regularizer(), smooth)


def test_gradients_flow_to_every_table(model):
    facts = torch.tensor([[1, 2, 3, 1004], [5, 0, 6, 1001]])
    h, r, t, day = facts.unbind(1)
    loss = model.score_tails(h, r, day).logsumexp(1).sum() + model.regularizer(facts)
    loss = loss + model.time_regularizer()
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_gradcheck_in_float64(model):
    h, r, t = torch.tensor([1, 2]), torch.tensor([0, 3]), torch.tensor([4, 5])
    tau = torch.tensor([1003.5, 1007.0], dtype=torch.float64)  # between days: the interpolation too
    names = ("entity", "rel_time", "rel_static", "time")
    tables = [getattr(model, name).detach().clone().requires_grad_() for name in names]

    def score(*values):
        return torch.func.functional_call(model, dict(zip(names, values, strict=True)), (h, r, t, tau))

    assert torch.autograd.gradcheck(score, tables)


def test_save_and_load_round_trip(tmp_path, model):
    model.set_vocabulary([f"e{i}" for i in range(N)], [f"r{i}" for i in range(R)])
    model.save(str(tmp_path / "tnt.pt"))
    loaded = load_model(tmp_path / "tnt.pt").double()
    assert isinstance(loaded, TNTComplEx) and loaded.entities == model.entities
    h, r, day = torch.tensor([1, 2]), torch.tensor([0, 3]), torch.tensor([1003, 1005])
    torch.testing.assert_close(loaded.score_tails(h, r, day), model.score_tails(h, r, day))
