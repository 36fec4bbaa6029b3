"""The training core (``rotmem.training``): one step for every family, no host sync inside it, the
online fit of any family, clear errors, and no import that runs back up into ``lightning_modules``."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch

import rotmem
from rotmem.data import synthetic_kg
from rotmem.errors import BadSettingError
from rotmem.losses import Objective
from rotmem.memory import FitConfig, HashingEncoder, TemporalMemory
from rotmem.memory.temporal.fit import fit_model
from rotmem.models import HistorySpec, RoMemComplEx
from rotmem.training import TrainConfig, build_family, build_optimizer, fit, train_step


@pytest.fixture(scope="module")
def kg():
    return synthetic_kg(num_people=12, num_cities=4, num_companies=3, num_countries=2, seed=3).kg


SPECS = {
    "romem": {"class_path": "rotmem.models.RoMem", "init_args": {"dim": 8, "k": 1}},
    "romem-complex": {"class_path": "rotmem.models.RoMemComplEx", "init_args": {"dim": 8}},
    "tntcomplex": {"class_path": "tntcomplex", "init_args": {"dim": 8}},
}
SPECS["history"] = SPECS["tntcomplex"]  # with HistorySpec(slot_windows=(30,)) attached


LIBRARY = os.path.dirname(rotmem.__file__) + os.sep
OPS = os.path.join(LIBRARY, "ops") + os.sep
HOST_READS = ("item", "tolist", "cpu", "nonzero", "__bool__", "__float__", "__int__")


def refuse_outside_ops(read):
    """``read`` (a tensor method that waits for the device), refused when the library's own code
    calls it, but for the ops: their CPU fast paths read CPU scalars after checking the device (no
    sync), as torch's optimisers read their CPU step counts."""

    def guarded(*args, **kwargs):
        caller = sys._getframe(1).f_code.co_filename
        if caller.startswith(LIBRARY) and not caller.startswith(OPS):
            raise AssertionError(f"train_step read a value back to the host in {caller}")
        return read(*args, **kwargs)

    return guarded


@pytest.mark.parametrize("name", list(SPECS))
def test_train_step_reads_nothing_back_to_the_host(kg, name: str, monkeypatch) -> None:
    model = build_family(SPECS[name], kg, HistorySpec(slot_windows=(30,)) if name == "history" else None)
    optimizer = build_optimizer(model.parameters(), "adagrad", 0.1)
    batch = {
        "facts": kg.train[:32],
        "negative_days": kg.train[:32, 3:].double() + torch.tensor([[-40.0, 50.0]]),
    }
    if model.history is not None:  # counted with the batch, as the data loader does
        batch["history_counts"] = model.history.training_counts(batch["facts"])
    # with a history, the time-contrastive term (which no shipped config weighs beside one) would
    # count its candidates' history in the step: left out, as the configs leave it
    objective = Objective(smoothness_weight=0.1, time_weight=0.0 if model.history is not None else 0.5)
    train_step(model, batch, objective, optimizer)  # a model's one-off checks (RoMem's day range) run here
    before = model.entity.detach().clone()

    for owner, names in ((torch.Tensor, HOST_READS), (torch, ("nonzero",))):
        for name in names:
            monkeypatch.setattr(owner, name, refuse_outside_ops(getattr(owner, name)))
    loss = train_step(model, batch, objective, optimizer)
    monkeypatch.undo()
    assert isinstance(loss, torch.Tensor) and loss.dim() == 0 and not loss.requires_grad
    assert math.isfinite(loss.item()) and not torch.equal(model.entity.detach(), before)


def test_fit_returns_one_mean_loss_per_epoch(kg) -> None:
    config = TrainConfig(family=SPECS["romem-complex"], epochs=3, batch_size=64, lr=0.2)
    torch.manual_seed(0)
    model = build_family(config.family, kg)
    history = fit(model, kg, config)
    assert len(history) == 3 and history[-1] < history[0] and not model.training


def test_fit_calls_on_epoch_and_stops_when_it_says(kg) -> None:
    """``on_epoch`` sees each epoch's number and mean loss, in train mode; True stops the loop there,
    and the epochs run before the stop equal a plain run's (same seed, same optimiser state)."""
    config = TrainConfig(family=SPECS["romem-complex"], epochs=4, batch_size=64, lr=0.2)
    seen: list[tuple[int, float, bool]] = []

    def on_epoch(epoch: int, loss: float) -> bool:
        seen.append((epoch, loss, model.training))
        model.eval()  # a validation pass would leave it so; fit puts it back in train mode
        return epoch == 2

    torch.manual_seed(0)
    model = build_family(config.family, kg)
    stopped = fit(model, kg, config, on_epoch)
    torch.manual_seed(0)
    plain = fit(build_family(config.family, kg), kg, TrainConfig(**{**config.__dict__, "epochs": 2}))
    assert stopped == plain and [(e, loss) for e, loss, _ in seen] == list(enumerate(plain, 1))
    assert all(training for _, _, training in seen) and not model.training


def test_memory_fits_the_best_family() -> None:
    memory = TemporalMemory(encoder=HashingEncoder(64), verify=False)
    memory.add_session("s1", [("Ana", "lives in", "Lisbon")], date="2018-01-10")
    memory.add_session("s2", [("Ana", "lives in", "Porto")], date="2019-06-01")
    stats = memory.fit(FitConfig("romem-complex", history={"slot_windows": [30]}, dim=8, epochs=2))
    assert isinstance(memory.model, RoMemComplEx) and math.isfinite(stats["loss"])
    assert HistorySpec.of(memory.model.history) == HistorySpec(slot_windows=(30,))
    assert memory.model.config["init_s"] == 0.001


def test_frozen_speeds_of_romem_complex(kg) -> None:
    alpha = torch.linspace(0.1, 0.9, kg.num_relations)
    model, _ = fit_model(kg, FitConfig("romem-complex", dim=8, epochs=1), alpha=alpha)
    assert model.speed.source == "gate" and torch.allclose(model.speed.table, alpha)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: FitConfig("tntcomplex", init_s=0.1), "unknown setting 'init_s' for TNTComplEx"),
        (lambda: FitConfig("distmult"), "'distmult' is not a model family"),
        (lambda: TrainConfig(optimizer="sgd"), "optimizer: unknown 'sgd'"),
        (lambda: TrainConfig(batch_size=0), "batch_size >= 1"),
        (lambda: build_optimizer([], "rmsprop", 0.1), "unknown optimizer 'rmsprop'"),
    ],
)
def test_bad_settings_say_which(make, message: str) -> None:
    with pytest.raises(BadSettingError, match=message):
        make()


def test_library_imports_do_not_run_up_into_lightning_modules() -> None:
    code = (
        "import sys, rotmem, rotmem.training, rotmem.memory, rotmem.cli, rotmem.gate\n"
        "up = [m for m in sys.modules if m.split('.')[0] in ('lightning_modules', 'pytorch_lightning')]\n"
        "print(up)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
