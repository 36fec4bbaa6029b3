"""``TemporalMemory.fit``'s plain torch loop against the Lightning fit it replaced, same settings.

The Lightning path is the former ``rotmem.memory.online_fit`` (``Phase2Module`` +
``TemporalKGDataModule`` + ``pl.Trainer``, gradient clip 1.0); both train RoMem on the synthetic
graph's training split (60 people) for 20 epochs, dim 32, three seeds, one torch thread. Reported:
last epoch's mean loss and the raw tail MRR on the test split (rank = 1 + #higher scores).

    python -m benchmarks.temporal_qa.fit_parity      # writes benchmarks/results/temporal_qa/fit_parity.csv
"""

from __future__ import annotations

import sys
import time

import torch

from benchmarks.harness import write_rows
from benchmarks.temporal_qa.run import RESULTS
from rotmem.data import TemporalKG, synthetic_kg
from rotmem.memory.online_fit import FitConfig, fit_model


def lightning_fit(kg: TemporalKG, config: FitConfig):
    """The Lightning fit of the former ``online_fit.fit_romem`` (alpha = 1)."""
    import pytorch_lightning as pl

    from lightning_modules.kg_data import TemporalKGDataModule
    from lightning_modules.phase2 import Phase2Module
    from rotmem.models import RoMem

    data = TemporalKGDataModule(
        kg=kg, batch_size=config.batch_size, num_negative_times=config.num_negative_times, seed=config.seed
    )
    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        family = RoMem(
            kg.num_entities, kg.num_relations, tau0=data.tau0, dim=config.dim, k=config.k,
            backbone=config.backbone, init_scale=config.init_scale, init_s=config.init_s,
        )  # fmt: skip
        module = Phase2Module(
            family, optimizer=config.optimizer, lr=config.lr, regularizer_weight=config.regularizer_weight,
            time_weight=config.time_weight, sigma_years=config.sigma_years,
        )  # fmt: skip
        trainer = pl.Trainer(
            max_epochs=config.epochs, accelerator="cpu", logger=False, enable_checkpointing=False,
            enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
            num_sanity_val_steps=0, gradient_clip_val=1.0,
        )  # fmt: skip
        trainer.fit(module, datamodule=data)
    return module.model.eval(), float(trainer.callback_metrics["train/loss_epoch"])


def tail_mrr(model, test: torch.Tensor) -> float:
    h, r, t, day = test.unbind(1)
    with torch.no_grad():
        scores = model.score_tails(h, r, day.double())
    rank = 1 + (scores > scores.gather(1, t[:, None])).sum(1)
    return float((1.0 / rank).mean())


def main() -> int:
    torch.set_num_threads(1)
    full = synthetic_kg(num_people=60).kg
    empty = full.valid[:0]
    kg = TemporalKG("synthetic-60", full.entities, full.relations, full.train, empty, empty)
    rows = []
    for seed in (0, 1, 2):
        config = FitConfig(epochs=20, dim=32, seed=seed)
        for name, fit in (("lightning", lightning_fit), ("plain torch loop", fit_model)):
            t0 = time.perf_counter()
            model, loss = fit(kg, config)
            mrr, seconds = tail_mrr(model, full.test), time.perf_counter() - t0
            rows.append(
                dict(
                    fit=name,
                    seed=seed,
                    loss=round(loss, 4),
                    tail_mrr=round(mrr, 4),
                    seconds=round(seconds, 1),
                )
            )
            print(rows[-1], flush=True)
    write_rows(RESULTS / "fit_parity.csv", rows, "python -m benchmarks.temporal_qa.fit_parity")
    return 0


if __name__ == "__main__":
    sys.exit(main())
