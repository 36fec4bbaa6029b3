"""Pin of the Phase-2 losses: a few seeded steps of each family through ``Phase2Module`` (Lightning)
and through ``TemporalMemory.fit`` (the online fit), against the losses the code gave before the
training core (``rotmem.training``) replaced the copies of the step.

The expected values were recorded from the code at commit 6a48e20 (one torch thread, CPU). The
refactor keeps the same ops in the same order, so the values agree to float rounding: a relative
tolerance of 1e-6 (float32's epsilon is 1.2e-7; a few ulps of slack for a summation order that a
library update may change).
"""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch

from lightning_modules.kg_data import TemporalKGDataModule
from lightning_modules.phase2 import Phase2Module
from rotmem.data import synthetic_kg
from rotmem.memory import FitConfig, HashingEncoder, TemporalMemory
from rotmem.models import HistorySpec, RoMem, RoMemComplEx, TNTComplEx

RTOL = 1e-6
HISTORY = HistorySpec(slot_windows=(30, 365), pair_windows=(30,))


@pytest.fixture(autouse=True)
def one_thread():
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture(scope="module")
def kg():
    return synthetic_kg(num_people=20, num_cities=6, num_companies=4, num_countries=3, seed=1).kg


class Losses(pl.Callback):
    def __init__(self):
        self.values: list[float] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.values.append(float(outputs["loss"]))


def family(kg, data, name: str, history: bool):
    sizes = (data.num_entities, data.num_relations)
    if name == "romem":
        model = RoMem(*sizes, dim=16, k=1, speed="learned", init_s=0.01, tau0=data.tau0)
    elif name == "romem-complex":
        model = RoMemComplEx(*sizes, dim=16, tau0=data.tau0, num_days=data.num_days)
    else:
        model = TNTComplEx(*sizes, dim=16, tau0=data.tau0, num_days=data.num_days)
    return model.attach_history(HISTORY) if history else model


def phase2_losses(kg, name: str, history: bool, **module_args) -> list[float]:
    torch.manual_seed(0)
    data = TemporalKGDataModule(kg=kg, batch_size=64, num_negative_times=4, seed=0)
    module = Phase2Module(family(kg, data, name, history), **module_args)
    losses = Losses()
    trainer = pl.Trainer(
        max_steps=4, accelerator="cpu", logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
        num_sanity_val_steps=0, gradient_clip_val=1.0, callbacks=[losses],
    )  # fmt: skip
    trainer.fit(module, datamodule=data)
    return losses.values


PHASE2 = {
    ("romem", False): [4.303031921386719, 4.298110485076904, 4.288808822631836, 4.277718544006348],
    ("romem", True): [4.1864399909973145, 4.14262056350708, 4.142029285430908, 4.13646125793457],
    ("romem-complex", False): [4.301226615905762, 4.300589561462402, 4.2943620681762695, 4.248749732971191],
    ("romem-complex", True): [4.184628963470459, 4.145256042480469, 4.147059440612793, 4.10892915725708],
    ("tntcomplex", False): [4.301226615905762, 4.302210330963135, 4.295774936676025, 4.279035568237305],
    ("tntcomplex", True): [4.184629440307617, 4.146897315979004, 4.148377418518066, 4.137355327606201],
}


ADAM_SMOOTHNESS = [4.301235198974609, 4.3012189865112305, 4.301208972930908, 4.301156997680664]


@pytest.mark.parametrize("name, history", list(PHASE2))
def test_phase2_losses_are_pinned(kg, name: str, history: bool) -> None:
    losses = phase2_losses(kg, name, history, lr=0.1)
    assert losses == pytest.approx(PHASE2[name, history], rel=RTOL)


def test_phase2_adam_and_smoothness_are_pinned(kg) -> None:
    losses = phase2_losses(kg, "tntcomplex", False, optimizer="adam", lr=0.01, smoothness_weight=0.1)
    assert losses == pytest.approx(ADAM_SMOOTHNESS, rel=RTOL)


def memory_loss(**settings) -> float:
    memory = TemporalMemory(encoder=HashingEncoder(64), verify=False)
    for year in range(2015, 2019):
        for i in range(6):
            city = ("Lisbon", "Porto", "Braga", "Faro")[(i + year) % 4]
            memory.add_session(f"s{year}-{i}", [(f"p{i}", "lives in", city)], date=f"{year}-0{1 + i}-10")
    return memory.fit(FitConfig(dim=8, epochs=3, batch_size=8, **settings))["loss"]


MEMORY = {
    "romem": 2.949023644129435,
    "romem-history": 2.9205636183420816,
    "tntcomplex": 2.1019136905670166,
    "tntcomplex-history": 2.1067930857340493,
}


@pytest.mark.parametrize("case", list(MEMORY))
def test_memory_fit_loss_is_pinned(case: str) -> None:
    settings = dict(family=case.removesuffix("-history"))
    if case.endswith("-history"):
        settings |= dict(history=HISTORY)
    assert memory_loss(**settings) == pytest.approx(MEMORY[case], rel=RTOL)
