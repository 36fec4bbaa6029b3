"""RoMem: the unrotation trick, static relations, angles, persistence, vocabulary errors."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from rotmem import RoMem, load_model
from rotmem.models import complex_dims


def small_model(backbone: str = "chronor", speed: str = "learned", seed: int = 0) -> RoMem:
    torch.manual_seed(seed)
    model = RoMem(13, 4, dim=12, k=3, backbone=backbone, speed=speed, tau0=100.0, init_s=0.05)
    if speed == "learned":
        with torch.no_grad():
            model.speed.logit.normal_()
    return model


def batch(b: int = 7):
    g = torch.Generator().manual_seed(1)
    return (
        torch.randint(0, 13, (b,), generator=g),
        torch.randint(0, 4, (b,), generator=g),
        torch.randint(0, 13, (b,), generator=g),
        torch.rand(b, generator=g, dtype=torch.float64) * 400,
    )


def test_complex_dims_follow_the_paper():
    assert complex_dims(500, 3) == 249
    assert complex_dims(64, 1) == 32
    with pytest.raises(ValueError):
        complex_dims(2, 3)


@pytest.mark.parametrize("backbone", ["chronor", "distmult"])
def test_score_equals_unrotation_trick_for_heads_and_tails(backbone):
    model = small_model(backbone)
    h, r, t, tau = batch()
    direct = model.score(h, r, t, tau)
    tails = model.score_tails(h, r, tau)
    heads = model.score_heads(r, t, tau)
    assert tails.shape == heads.shape == (7, 13)
    torch.testing.assert_close(tails.gather(1, t[:, None]).squeeze(1), direct)
    torch.testing.assert_close(heads.gather(1, h[:, None]).squeeze(1), direct)


@pytest.mark.parametrize("tau", ["per fact", 250.0])
def test_both_directions_in_one_call_equal_the_two_queries(tau):
    model = small_model("chronor")
    h, r, t, days = batch()
    tau = days if tau == "per fact" else tau
    both = model.query_tails_and_heads(h, r, t, tau)
    torch.testing.assert_close(both, torch.cat([model.query_tails(h, r, tau), model.query_heads(r, t, tau)]))


def test_score_at_several_times_matches_one_at_a_time():
    model = small_model()
    h, r, t, tau = batch()
    times = torch.stack([tau, tau + 30, tau - 500], dim=1)
    many = model.score(h, r, t, times)
    for j in range(3):
        torch.testing.assert_close(many[:, j], model.score(h, r, t, times[:, j]))


def test_zero_speed_makes_scores_independent_of_time():
    model = small_model(speed="gate")
    model.speed.set_speeds(torch.tensor([0.0, 1.0, 0.0, 0.5]))
    h, _, t, tau = batch()
    static = torch.zeros_like(h)
    a = model.score_tails(h, static, tau)
    b = model.score_tails(h, static, tau + 1234.5)
    torch.testing.assert_close(a, b)
    dynamic = torch.ones_like(h)
    assert not torch.allclose(model.score_tails(h, dynamic, tau), model.score_tails(h, dynamic, tau + 1234.5))


def test_theta_is_alpha_s_dt_omega():
    model = small_model(speed="gate")
    model.speed.set_speeds(torch.tensor([0.25, 1.0, 0.0, 0.5]))
    theta = model.theta(torch.tensor([0]), torch.tensor([110.0]))
    n = model.n
    expected = [0.25 * 0.05 * 10.0 * 10000 ** (-j / n) for j in range(n)]
    torch.testing.assert_close(theta[0], torch.tensor(expected), rtol=1e-5, atol=1e-7)
    assert math.isclose(model.tau0, 100.0)


def test_checkpoint_round_trip_gives_identical_scores(tmp_path):
    model = small_model()
    model.set_vocabulary([f"e{i}" for i in range(13)], ["r0", "r1", "r2", "r3"])
    model.save(tmp_path / "m.pt")
    loaded = load_model(tmp_path / "m.pt")
    h, r, _, tau = batch()
    torch.testing.assert_close(loaded.score_tails(h, r, tau), model.score_tails(h, r, tau), rtol=0, atol=0)
    assert loaded.tau0 == 100.0 and loaded.entities == model.entities


def test_unknown_strings_at_query_time_are_named():
    model = small_model()
    model.set_vocabulary([f"e{i}" for i in range(13)], ["r0", "r1", "r2", "r3"])
    assert model.entity_ids(["e3", "e0"]).tolist() == [3, 0]
    with pytest.raises(KeyError, match=r"unknown entities: \['Atlantis', 'El Dorado'\]"):
        model.entity_ids(["e1", "Atlantis", "El Dorado"])
    with pytest.raises(KeyError, match=r"unknown relation: \['teleports to'\]"):
        model.relation_ids(["teleports to"])


def test_bad_constructor_arguments_are_named():
    with pytest.raises(ValueError, match="unknown backbone 'transe'"):
        RoMem(3, 2, dim=8, k=1, backbone="transe")
    with pytest.raises(ValueError, match="unknown speed source 'fast'"):
        RoMem(3, 2, dim=8, k=1, speed="fast")


def test_bfloat16_model_keeps_single_days_apart():
    """bfloat16 holds days near 16,000 only to 64-day steps: angles and queries must see days in
    at least float32, so a bfloat16 model still tells one day from the next (and the losses pass
    their int64 days straight in)."""
    torch.manual_seed(0)
    model = RoMem(13, 4, dim=12, k=3, speed="learned", tau0=12784.0, init_s=0.05).to(torch.bfloat16)
    h, r, t = torch.tensor([1]), torch.tensor([2]), torch.tensor([3])
    days = torch.tensor([16001]), torch.tensor([16002])
    thetas = [model.theta(r, d) for d in days]
    assert thetas[0].dtype == torch.float32
    assert not torch.equal(thetas[0], thetas[1])
    queries = [model.query_tails(h, r, d) for d in days]
    assert not torch.equal(queries[0], queries[1])
    scores = [model.score(h, r, t, d) for d in days]
    assert not torch.equal(scores[0], scores[1])


def test_gate_speeds_must_be_set_before_use(tmp_path):
    """speed="gate" before set_speeds (or a loaded checkpoint) raises instead of silently using alpha = 1."""
    model = small_model(speed="gate")
    h, r = torch.tensor([0, 1]), torch.tensor([1, 2])
    with pytest.raises(RuntimeError, match="speed='gate' but no speeds were set"):
        model.score_tails(h, r, 150.0)
    model.speed.set_speeds(torch.tensor([0.25, 1.0, 0.0, 0.5]))
    expected = model.score_tails(h, r, 150.0)
    model.save(str(tmp_path / "m.pt"))
    loaded = load_model(tmp_path / "m.pt")  # the speeds travel in the state dict
    torch.testing.assert_close(loaded.score_tails(h, r, 150.0), expected, rtol=0, atol=0)


def test_days_far_from_tau0_warn_about_float32_angles():
    h, r = torch.tensor([0]), torch.tensor([1])
    far = RoMem(13, 4, dim=12, k=3, tau0=0.0)
    with pytest.warns(RuntimeWarning, match=r"days up to 16,000 from tau0=0; float32 angles"):
        far.score_tails(h, r, 16000.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        far.score_tails(h, r, 16000.0)  # once per model
        RoMem(13, 4, dim=12, k=3, tau0=12784.0).score_tails(h, r, 16000.0)  # 3216 days: fine
        RoMem(13, 4, dim=12, k=3, tau0=0.0).double().score_tails(h, r, 16000.0)  # float64 angles
