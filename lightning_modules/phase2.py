"""Phase 2 (spectrum learning): train RoMem's embeddings and spectrum with the gate frozen."""

from __future__ import annotations

import copy
import math
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch

from lightning_modules import entity_parallel
from lightning_modules.evaluation_ranks import EvaluationRanks
from lightning_modules.family_settings import family_spec
from lightning_modules.settings import check_settings
from rotmem.distributed import ShardedRanking, entity_parallel_loss
from rotmem.errors import BadSettingError
from rotmem.evaluation.filters import FILTERS
from rotmem.evaluation.ranking import DEFAULT_TIE, answer_filters, batch_ranks
from rotmem.losses import Objective
from rotmem.models import HistorySpec, TemporalKGE
from rotmem.models.checkpoint import check_digest, model_state
from rotmem.models.digest import DIGEST_KEY, state_digest
from rotmem.models.history import known_facts
from rotmem.ops.id_checks import check_fact_ids, unchecked_on_device
from rotmem.training import LOSSES, OPTIMIZERS, build_optimizer, phase2_loss

MATMUL_PRECISIONS = ("highest", "high", "medium")  # torch.set_float32_matmul_precision: high = TF32


class Phase2Module(pl.LightningModule):
    """``L = ½(CE_tail + CE_head) + λ·N3 + λ_t·L_time + λ_s·smoothness`` (or the self-adversarial
    loss for DistMult), for any model family (``rotmem.models.FAMILIES``).

    The model is ``family``, any ``rotmem.models.TemporalKGE``: in a config its class and its own
    arguments (``lightning_modules.family_settings``; ``RoMemCLI`` links the dataset's sizes,
    ``tau0`` and ``num_days`` into them), e.g. ``rotmem.models.RoMem`` (the paper's model: ``dim, k,
    backbone, speed, init_scale, init_s, init_base``), ``rotmem.models.TNTComplEx`` (``dim`` = ``2 ·
    rank``, ``init_scale``; its per-day table spans the training days from ``tau0``) or
    ``rotmem.models.RoMemComplEx``. ``history`` (a config's ``model.history`` block,
    ``rotmem.models.HistorySpec``: ``slot_windows``, ``pair_windows``, ``rule_windows``, ``causal``,
    ``eval_splits``) attaches the history term to the family (``TemporalKGE.attach_history``; a family
    given with one attached keeps it); its
    history is the training split, indexed at setup, and the facts of its ``eval_splits``
    while it is evaluated (``rotmem.models.history.known_facts``). This module's own arguments are
    the training's: the loss and its weights, the optimiser, ``gate_path`` (the pretrained gate a
    family with ``speed="gate"`` reads its per-relation speeds from, once) and ``entity_parallel``.
    Per-day tables are kept smooth by ``smoothness_weight`` (tkbc's ``time_reg``). The loss is the
    training core's (``rotmem.training.phase2_loss``: ``rotmem.losses.Objective`` around the fit
    term), the same for the entity-parallel step; the optimiser is ``rotmem.training.build_optimizer``'s.

    Validation and test log filtered MRR and Hits@k under both filters and the three tie rules
    (``val/time-aware/mrr``, realistic ties, is the checkpoint metric; ``val/time-aware/pessimistic/mrr``
    and ``.../optimistic/mrr`` beside it).

    Under DDP the metrics are gathered over ranks without the sampler's repeats (equal to one
    process's). ``entity_parallel=True`` with the DDP strategy shards the entity table's rows over the
    ranks (``lightning_modules.entity_parallel``; the 1-vs-all loss, no history term).
    ``compile_step=True`` runs the step's objective (``rotmem.training.phase2_loss``) through
    ``torch.compile``: one graph, forward and backward, that a GPU runs without the Python between
    its kernels (the first steps compile it: seconds). ``matmul_precision="high"``: float32 matrix
    products in TF32 on NVIDIA GPUs (``torch.set_float32_matmul_precision``; bfloat16 products with
    float32 weights: the trainer's ``precision="bf16-mixed"``).
    """

    def __init__(
        self,
        family: TemporalKGE,
        history: HistorySpec | None = None,
        gate_path: str | None = None,
        loss: str = "1vsall",
        adversarial_temperature: float = 1.0,
        regularizer: str = "l4",
        regularizer_weight: float = 0.01,
        time_weight: float = 0.5,
        smoothness_weight: float = 0.0,
        sigma_years: float = 0.5,
        sigma_final_years: float | None = None,
        optimizer: str = "adagrad",
        lr: float = 0.1,
        entity_parallel: bool = False,
        compile_step: bool = False,
        matmul_precision: str = "highest",
    ):
        super().__init__()
        if not isinstance(family, TemporalKGE):
            raise TypeError(
                f"family must be a model (a rotmem.models.TemporalKGE, e.g. TNTComplEx(...)), got "
                f"{type(family).__name__}: a config gives its class and arguments (model.family)"
            )
        check_settings(
            "model",
            positive=dict(lr=lr, sigma_years=sigma_years),
            non_negative=dict(
                regularizer_weight=regularizer_weight,
                time_weight=time_weight,
                smoothness_weight=smoothness_weight,
            ),
        )
        if matmul_precision not in MATMUL_PRECISIONS:
            raise BadSettingError(
                f"model.matmul_precision: unknown {matmul_precision!r}; expected one of {MATMUL_PRECISIONS}"
            )
        if loss not in LOSSES:
            raise BadSettingError(f"model.loss: unknown loss {loss!r}; expected one of {LOSSES}")
        if optimizer not in OPTIMIZERS:
            raise BadSettingError(
                f"model.optimizer: unknown {optimizer!r}; expected one of {tuple(OPTIMIZERS)}"
            )
        if history is not None:
            try:
                family.attach_history(history)
            except ValueError as error:
                raise BadSettingError(f"model.history: {error}") from None
        if entity_parallel and (loss != "1vsall" or family.history is not None):
            raise ValueError(
                "entity_parallel=True trains the plain 1-vs-all loss only, without a history term "
                f"(loss={loss!r}, history={family.history is not None})"
            )
        if family.config.get("speed") == "gate" and not gate_path:
            raise BadSettingError(
                "model.family.speed 'gate' needs model.gate_path (a gate.pt from `rotmem gate pretrain`)"
            )
        gate_path = str(Path(gate_path).expanduser()) if gate_path else None
        # the model is saved as its class and arguments, never pickled (checkpoints load weights-only)
        self.save_hyperparameters(ignore=["family", "history"])
        self.hparams.family = family_spec(family)
        self.hparams.history = None if family.history is None else HistorySpec.of(family.history).as_dict()
        self.hparams.gate_path = gate_path
        self.model = family
        self.objective = Objective(regularizer, regularizer_weight, time_weight, smoothness_weight)
        self._ranks = EvaluationRanks()
        self._evaluating = ExitStack()  # the history's evaluation facts, for one evaluation epoch
        self.entity_table = None  # this rank's shard, with entity_parallel under DDP
        # the whole objective as one compiled graph (forward and backward); batches of a new size
        # (a history's counts, an epoch's last batch without data.drop_last) compile once more, with
        # dynamic sizes, then run compiled too
        self._phase2_loss = torch.compile(phase2_loss) if compile_step else phase2_loss

    # --- setup ------------------------------------------------------------------------------
    @property
    def kg(self):
        return self.trainer.datamodule.kg

    def setup(self, stage: str) -> None:
        torch.set_float32_matmul_precision(self.hparams.matmul_precision)
        kg = self.kg
        if self.model.entities is None:
            self.model.set_vocabulary(kg.entities, kg.relations)
        check_fact_ids(kg.train, self.model.num_entities, self.model.num_relations, f"{kg.name} train split")
        history = getattr(self.model, "history", None)
        if history is not None and history.is_empty:
            history.index(kg.train)
        data = self.trainer.datamodule if self.trainer is not None else None
        if history is not None and stage == "fit" and hasattr(data, "history"):
            # the batches carry their history counts, made on the host (no GPU wait in the step)
            data.history = copy.deepcopy(history).cpu()
        if self.model.config.get("speed") == "gate" and stage == "fit":
            from rotmem.gate import relation_speeds

            if not Path(self.hparams.gate_path).is_file():
                raise FileNotFoundError(
                    f"gate checkpoint {self.hparams.gate_path} not found; make it with "
                    f"`rotmem gate pretrain --data {kg.name} --out {Path(self.hparams.gate_path).parent}`"
                )
            self.model.speed.set_speeds(relation_speeds(self.hparams.gate_path, kg.relations))

    def configure_model(self) -> None:
        if self.hparams.entity_parallel and self.entity_table is None:
            self.entity_table = entity_parallel.shard_entities(self)

    def sigma(self) -> float:
        """σ in years: fixed, or cosine-annealed to ``sigma_final_years`` over the run."""
        hp = self.hparams
        if hp.sigma_final_years is None or self.trainer is None or not self.trainer.max_epochs:
            return hp.sigma_years
        progress = min(1.0, self.current_epoch / max(1, self.trainer.max_epochs - 1))
        cosine = 0.5 * (1 + math.cos(math.pi * progress))
        return hp.sigma_final_years + (hp.sigma_years - hp.sigma_final_years) * cosine

    # --- training ---------------------------------------------------------------------------
    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        hp = self.hparams
        if self.entity_table is not None:
            return self._entity_parallel_step(entity_parallel.global_batch(self, batch))
        # the batches are rows of the training split, whose ids setup checked on the host: the
        # ops' per-call id checks, which on a GPU would wait for it, are skipped (the backward's
        # kernels never check)
        with unchecked_on_device():
            loss, parts = self._phase2_loss(
                self.model, batch, self.objective, self.sigma(), hp.loss, hp.adversarial_temperature
            )
        return self._log_loss(loss, parts, batch["facts"].shape[0])

    def _entity_parallel_step(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The same objective over the global batch, with the table sharded (every rank gets its value)."""
        negative_days, sigma = batch.get("negative_days"), self.sigma()

        def terms(model, facts):  # on the batch's gathered rows, ids local to them
            return self.objective.batch_terms(model, facts, negative_days, sigma)

        parts = entity_parallel_loss(self.model, self.entity_table, batch["facts"], terms)
        parts |= self.objective.model_terms(self.model)  # per-day tables: replicated, no entity row
        return self._log_loss(self.objective.total(parts), parts, batch["facts"].shape[0])

    def _log_loss(self, loss: torch.Tensor, parts: dict[str, torch.Tensor], batch_size: int) -> torch.Tensor:
        # sync_dist: under DDP each rank's loss is over its micro-batch; their mean is the global batch's
        logs = {f"train/{name}": value for name, value in parts.items()} | {"train/loss": loss}
        self.log_dict(
            logs, prog_bar=False, on_step=True, on_epoch=True, batch_size=batch_size, sync_dist=True
        )
        self.log("loss", loss, prog_bar=True, logger=False, batch_size=batch_size, sync_dist=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return build_optimizer(self.parameters(), self.hparams.optimizer, self.hparams.lr)

    # --- evaluation -------------------------------------------------------------------------
    def _rank_step(self, batch: dict[str, torch.Tensor], split: str, batch_idx: int) -> None:
        """Ranks of the batch's facts, kept by their index in the split (``batch["index"]``)."""
        where = f"{split} split, batch {batch_idx}"
        filters = answer_filters(self.kg, FILTERS)
        if self.entity_table is None:
            ranks = batch_ranks(self.model, batch["facts"], filters, FILTERS, where)
        else:  # every rank ranks the global batch over the whole (sharded) table
            batch = entity_parallel.global_batch(self, batch)
            view = ShardedRanking(self.model, self.entity_table)
            ranks = batch_ranks(view, batch["facts"], filters, FILTERS, where, rank_counts=view.rank_counts)
        self._ranks.add(batch["index"], ranks)

    def _log_ranks(self, prefix: str) -> dict[str, float]:
        # each DDP rank ranked its own facts; with a sharded table every rank holds every rank
        gather = self.all_gather if self.trainer.world_size > 1 and self.entity_table is None else None
        flat = {}
        for (kind, tie), metrics in self._ranks.metrics(gather).items():
            name = f"{prefix}/{kind}" if tie == DEFAULT_TIE else f"{prefix}/{kind}/{tie}"
            flat.update({f"{name}/{metric}": value for metric, value in metrics.items()})
        # the values are the same on every rank; sync_dist only tells Lightning so
        self.log_dict(flat, prog_bar=False, sync_dist=True)
        self.log(f"{prefix}_mrr", flat[f"{prefix}/time-aware/mrr"], prog_bar=True, sync_dist=True)
        return flat

    def on_validation_epoch_start(self) -> None:
        self._evaluating.enter_context(known_facts(self.model, self.kg))

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._rank_step(batch, "valid", batch_idx)

    def on_validation_epoch_end(self) -> None:
        self._evaluating.close()  # before any checkpoint: it saves the training index
        if self._ranks:
            self._log_ranks("val")

    def on_test_epoch_start(self) -> None:
        self._evaluating.enter_context(known_facts(self.model, self.kg))

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._rank_step(batch, "test", batch_idx)

    def on_test_epoch_end(self) -> None:
        self._evaluating.close()
        if self._ranks:
            self._log_ranks("test")

    # --- checkpoints ------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if self.entity_table is not None:
            entity_parallel.save_whole_table(self, self.entity_table, checkpoint)
        digest = state_digest(model_state(checkpoint["state_dict"]))
        checkpoint["rotmem"] = self.model.checkpoint_payload() | {DIGEST_KEY: digest}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        payload = checkpoint.get("rotmem", {})
        check_digest("the checkpoint to resume", payload, model_state(checkpoint["state_dict"]))
        if payload.get("entities") is not None and self.model.entities is None:
            self.model.set_vocabulary(payload["entities"], payload["relations"])
        if self.entity_table is not None:
            entity_parallel.load_my_rows(self, self.entity_table, checkpoint)
