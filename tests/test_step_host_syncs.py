"""A training step never waits for the device: no op whose result the host must read (``.item()``,
``nonzero``, ``unique``, boolean masks...) in the forward and backward of the Phase-2 objective, for
every family, with the history term counted beforehand on the host (``FactHistory.training_counts``,
as the data loader does). ``rotmem.host_syncs`` sees those ops at the dispatcher, so the CPU shows
what ``torch.cuda.set_sync_debug_mode`` would show on a GPU."""

from __future__ import annotations

import pytest
import torch

from lightning_modules.kg_data import TemporalKGDataModule
from rotmem.data import synthetic_kg
from rotmem.host_syncs import HostSyncCounter, cpu_only
from rotmem.losses import Objective, one_vs_all_loss
from rotmem.models import HistorySpec, RoMem, RoMemComplEx, TNTComplEx
from rotmem.ops import backend

HISTORY = HistorySpec(slot_windows=(1, 30, 365), pair_windows=(7, 120), rule_windows=(0, 1, 7))


@pytest.fixture(scope="module")
def kg():
    return synthetic_kg(num_people=60, num_cities=10, num_companies=8, num_countries=4, seed=1).kg


def families(kg):
    n, r = kg.num_entities, kg.num_relations
    tau0 = float(kg.train[:, 3].min())
    days = int(kg.train[:, 3].max() - kg.train[:, 3].min() + 1)
    return {
        "romem": RoMem(n, r, tau0=tau0, dim=16, k=1, speed="learned"),
        "romem-complex+history": RoMemComplEx(
            n, r, tau0=tau0, num_days=days, dim=16, day_table=True
        ).attach_history(HISTORY),
        "tntcomplex+history": TNTComplEx(n, r, tau0=tau0, num_days=days, dim=16).attach_history(HISTORY),
    }


def objective_step(model, facts, counts, objective) -> torch.Tensor:
    parts = {"fit": one_vs_all_loss(model, facts, counts)}
    parts |= objective.batch_terms(model, facts, None, 0.5, sparse_grad=True)
    parts |= objective.model_terms(model)
    loss = objective.total(parts)
    loss.backward()
    return loss


@pytest.mark.parametrize("name", ["torch", "native"])
@pytest.mark.parametrize("family", ["romem", "romem-complex+history", "tntcomplex+history"])
def test_the_step_has_no_host_sync(kg, monkeypatch, name, family):
    if not backend.available(name, "cpu"):
        pytest.skip(f"{name} cannot run here")
    monkeypatch.setenv("ROTMEM_BACKEND", name)
    torch.manual_seed(0)
    model = families(kg)[family]
    if model.history is not None:
        model.history.index(kg.train)
    facts = kg.train[:200]
    counts = model.training_history_counts(facts)
    objective = Objective("modulus3", 1e-3, 0.0, 1.0)
    objective_step(model, facts, counts, objective)  # the first step checks the days' range once
    model.zero_grad()
    with HostSyncCounter() as syncs:
        objective_step(model, facts, counts, objective)
    assert syncs.total == 0, syncs.summary()


def test_counts_made_beforehand_give_the_same_loss_and_gradients(kg):
    torch.manual_seed(0)
    model = families(kg)["romem-complex+history"]
    model.history.index(kg.train)
    facts = kg.train[:200]
    objective = Objective("modulus3", 1e-3, 0.0, 1.0)
    losses, grads = [], []
    for counts in (None, model.training_history_counts(facts)):
        model.zero_grad()
        losses.append(objective_step(model, facts, counts, objective))
        grads.append([p.grad.to_dense().clone() for p in model.parameters() if p.grad is not None])
    # the same ops on the same numbers in the same order: equal to the last bit
    assert torch.equal(losses[0], losses[1])
    for a, b in zip(*grads, strict=True):
        assert torch.equal(a, b)


def test_without_counts_the_history_term_syncs(kg):
    """The counter sees the counting itself: what the data loader takes off the step."""
    model = families(kg)["romem-complex+history"]
    model.history.index(kg.train)
    with HostSyncCounter() as syncs:
        one_vs_all_loss(model, kg.train[:50])
    assert syncs.calls["_unique2"] > 0 and syncs.calls["repeat_interleave"] > 0, syncs.summary()


def test_the_counter_sees_each_kind_of_sync_and_skips_cpu_only_checks():
    x = torch.arange(6.0)
    with HostSyncCounter() as syncs:
        x.sum().item()
        x.nonzero()
        x[x > 2]
        torch.unique(x)
        torch.repeat_interleave(torch.tensor([1, 2]))
        torch.repeat_interleave(torch.tensor([1, 2]), output_size=3)  # sized: no sync
        x[torch.tensor([0, 2])]  # integer indices: no sync
        with cpu_only():
            x.max().item()
    assert syncs.calls == {
        "_local_scalar_dense": 1,
        "nonzero": 1,
        "index": 1,
        "_unique2": 1,
        "repeat_interleave": 1,
    }, syncs.summary()


def test_the_data_module_carries_the_counts_of_each_batch(kg):
    torch.manual_seed(0)
    model = families(kg)["romem-complex+history"]
    model.history.index(kg.train)
    data = TemporalKGDataModule(kg=kg, batch_size=64, num_negative_times=0)
    data.history = model.history
    batch = data.make_batch(list(range(64)))
    want = model.history.training_counts(kg.train[:64])
    for got, expected in zip(batch["history_counts"], want, strict=True):
        assert torch.equal(got, expected)


def test_a_fused_evaluation_waits_for_the_device_once_per_split(kg, monkeypatch):
    """The known answers' rows are made on the host, the non-finite check runs once over all
    batches: one readback for the whole split, not several per batch (11 batches here)."""
    if not backend.available("native", "cpu"):
        pytest.skip("the native backend is not built")
    from rotmem.evaluation import evaluate_all

    monkeypatch.setenv("ROTMEM_BACKEND", "native")
    model = families(kg)["romem"]
    evaluate_all(model, kg, "test", batch_size=100)  # the one-time day-range check
    with HostSyncCounter() as syncs:
        evaluate_all(model, kg, "test", batch_size=100)
    assert kg.test.shape[0] > 1000 and syncs.total == 1, syncs.summary()
