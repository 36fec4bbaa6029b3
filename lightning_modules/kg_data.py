"""DataModule for Phase 2: batches of training facts with their negative times/entities."""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, DistributedSampler

from lightning_modules.resumable_loader import ResumableDataLoader
from lightning_modules.settings import check_settings
from rotmem.data import TemporalKG, load_dataset, split_by_time
from rotmem.data.negatives import SlotDays, SlotIndex, conflict_aware_negatives, negative_times
from rotmem.data.time_split import hold_out_weeks as hold_out_weeks_of
from rotmem.errors import BadSettingError
from rotmem.models.history import FactHistory


class TemporalKGDataModule(pl.LightningDataModule):
    """Loads a temporal KG (by name, directory, or an in-memory ``kg``) and serves Phase-2 batches.

    A training batch is a dict: ``facts [B, 4]`` int64 ``(h, r, t, day)``, ``negative_days [B, J]``
    float64 (``J = num_negative_times``; J = 0 disables), and, when ``num_negative_entities > 0``,
    ``negative_tails``/``negative_heads [B, K]`` (conflict-aware). Validation/test batches are dicts
    of ``facts`` of the valid/test split and their ``index`` (positions in the split).
    ``time_split=(valid_from, test_from)`` re-splits the graph by date for temporal extrapolation
    (``rotmem.data.split_by_time``); ``hold_out_weeks=n`` holds every n-th week out of training and
    validates and tests on those days (``rotmem.data.hold_out_weeks``). Under DDP each rank draws its
    negatives from the seed plus its rank.

    ``history``: a model's ``FactHistory`` (``Phase2Module`` sets a host copy at setup): each
    training batch then carries its ``history_counts`` (``FactHistory.training_counts``), counted
    here on the host so that the step on a GPU never waits for them. ``drop_last``: leave out an
    epoch's last, smaller batch, so that every step has the same shapes. ``num_workers``: processes
    that make the training batches (and their history counts) while the step runs; only for batches
    without negatives, which are drawn from the one generator a checkpoint resumes.
    """

    def __init__(
        self,
        dataset: str = "icews05-15",
        data_dir: str | None = None,
        batch_size: int = 1000,
        eval_batch_size: int = 1000,
        num_negative_times: int = 4,
        jitter_years: float = 0.02,
        far_negative_days: float = 365.0,
        num_negative_entities: int = 0,
        seed: int = 0,
        shuffle: bool = True,
        drop_last: bool = False,
        num_workers: int = 0,
        time_split: tuple[str, str] | None = None,
        hold_out_weeks: int | None = None,
        kg: TemporalKG | None = None,
    ):
        super().__init__()
        check_settings(
            "data",
            at_least_one=dict(batch_size=batch_size, eval_batch_size=eval_batch_size),
            non_negative=dict(
                num_negative_times=num_negative_times,
                num_negative_entities=num_negative_entities,
                jitter_years=jitter_years,
                far_negative_days=far_negative_days,
                num_workers=num_workers,
            ),
        )
        if num_workers > 0 and (num_negative_times > 0 or num_negative_entities > 0):
            raise BadSettingError(
                f"data.num_workers: {num_workers} needs batches without negatives (num_negative_times: 0, "
                "num_negative_entities: 0): negatives are drawn from one generator that a checkpoint resumes"
            )
        self.save_hyperparameters(ignore=["kg"])
        self.kg = kg if kg is not None else load_dataset(dataset, data_dir)
        if time_split is not None:
            self.kg, _ = split_by_time(self.kg, *time_split)
        if hold_out_weeks is not None:
            self.kg, _ = hold_out_weeks_of(self.kg, hold_out_weeks)
        self.tail_slots = SlotIndex(self.kg.train, self.kg.num_relations, "tail")
        self.head_slots = SlotIndex(self.kg.train, self.kg.num_relations, "head")
        self.slot_days = SlotDays(self.kg.train, self.kg.num_relations)
        days = self.kg.train[:, 3]
        self.day_range = (int(days.min()), int(days.max()))
        self.generator = torch.Generator().manual_seed(seed)
        self.history: FactHistory | None = None

    def setup(self, stage: str) -> None:
        if self.trainer is not None:  # ranks of a DDP run must not draw the same negatives
            self.generator.manual_seed(self.hparams.seed + self.trainer.global_rank)

    @property
    def num_entities(self) -> int:
        return self.kg.num_entities

    @property
    def num_relations(self) -> int:
        return self.kg.num_relations

    @property
    def tau0(self) -> float:
        """Reference day: the first day of the training split."""
        return float(self.kg.first_day)

    @property
    def num_days(self) -> int:
        """Days from the first to the last day of the training split, both included."""
        days = self.kg.train[:, 3]
        return int(days.max()) - int(days.min()) + 1

    def make_batch(self, indices: list[int]) -> dict[str, torch.Tensor]:
        hp = self.hparams
        facts = self.kg.train[torch.as_tensor(indices)]
        batch = {"facts": facts}
        if self.history is not None:
            batch["history_counts"] = self.history.training_counts(facts)
        if hp.num_negative_times > 0:
            batch["negative_days"] = negative_times(
                self.slot_days,
                facts,
                hp.num_negative_times,
                self.generator,
                hp.jitter_years,
                hp.far_negative_days,
                self.day_range,
            )
        if hp.num_negative_entities > 0:
            h, r, t, _ = facts.unbind(1)
            n, k, g = self.kg.num_entities, hp.num_negative_entities, self.generator
            batch["negative_tails"] = conflict_aware_negatives(self.tail_slots, h, r, t, k, n, g)
            batch["negative_heads"] = conflict_aware_negatives(self.head_slots, t, r, h, k, n, g)
        return batch

    def train_dataloader(self) -> DataLoader:
        # One permutation per epoch (seed + epoch) for any number of ranks, each rank taking every
        # world-th fact of it: a step's global batch is the same facts whatever the world size, so
        # DDP on N ranks with batch_size B trains as one process with N·B, and a resumed run
        # continues the same order. Lightning keeps a DistributedSampler and sets its epoch.
        trainer = self.trainer
        world, rank = (trainer.world_size, trainer.global_rank) if trainer is not None else (1, 0)
        sampler = DistributedSampler(
            range(self.kg.train.shape[0]), world, rank, shuffle=self.hparams.shuffle, seed=self.hparams.seed
        )
        return ResumableDataLoader(  # a DataLoader whose mid-epoch checkpoints resume exactly
            range(self.kg.train.shape[0]),
            batch_size=self.hparams.batch_size,
            sampler=sampler,
            drop_last=self.hparams.drop_last,
            num_workers=self.hparams.num_workers,
            persistent_workers=self.hparams.num_workers > 0,
            pin_memory=torch.cuda.is_available(),
            collate_fn=self.make_batch,
            generator=self.generator,  # the negatives' draws; its state is what a checkpoint saves
        )

    def _eval_loader(self, split: torch.Tensor) -> DataLoader:
        def collate(indices: list[int]) -> dict[str, torch.Tensor]:
            index = torch.as_tensor(indices)  # the facts' positions, so DDP can drop sampler repeats
            return {"facts": split[index], "index": index}

        return DataLoader(range(split.shape[0]), batch_size=self.hparams.eval_batch_size, collate_fn=collate)

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader(self.kg.valid)

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader(self.kg.test)
