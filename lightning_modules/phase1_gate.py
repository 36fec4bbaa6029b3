"""Phase 1 (gate pretraining): fit the Semantic Speed Gate to transitions mined from the training split.

The loss is ``rotmem.gate.loss`` (ROMEM.md): ``p_change = 1 − exp(−α_r · s_pre · Δt)`` against the
``changed`` labels, a weighted BCE; ``s_pre`` (per day) is learned from ``ln 2 / (0.5 · median Δt)``
in log space. Adam (lr 5e-4), 100 full-batch
epochs (at most 300k rows), gradient-norm clip 1.0 (as the reference code).
"""

from __future__ import annotations

import math

import pytorch_lightning as pl
import torch
from pytorch_lightning.cli import LightningCLI
from torch import nn
from torch.utils.data import DataLoader

from rotmem.data import TemporalKG, load_dataset
from rotmem.gate.encoder import DEFAULT_ENCODER, RelationEncoder
from rotmem.gate.loss import gate_loss, row_weights
from rotmem.gate.speed_gate import DEFAULT_TEMPLATE, SemanticSpeedGate, relation_sentences
from rotmem.gate.transitions import Transitions, mine_transitions


class GateTransitionData(pl.LightningDataModule):
    """Mines transitions from a dataset's training split and serves them as one full batch.

    The batch is a dict: ``embeddings [R, D]`` (embeddings of every relation in ``template``),
    ``relation [P]``, ``delta_days [P]``, ``changed [P]`` and ``weight [P]`` (``row_weights``).
    ``train_relations`` (relation strings) keeps only those relations' transitions, for zero-shot
    experiments; ``max_rows`` caps the batch by a seeded random subset (the paper's 300k).
    """

    def __init__(
        self,
        dataset: str = "icews05-15",
        data_dir: str | None = None,
        encoder: str = DEFAULT_ENCODER,
        template: str = DEFAULT_TEMPLATE,
        min_observations: int = 3,
        max_pairs_per_slot: int = 256,
        max_delta_days: float = 18250.0,
        max_functional_ratio: float | None = 0.5,
        max_rows: int = 300_000,
        train_relations: list[str] | None = None,
        seed: int = 0,
        kg: TemporalKG | None = None,
        relation_encoder: RelationEncoder | None = None,
    ):
        super().__init__()
        self.save_hyperparameters(ignore=["kg", "relation_encoder"])
        self.kg = kg if kg is not None else load_dataset(dataset, data_dir)
        self.encoder = encoder
        self.template = template
        mined = mine_transitions(
            self.kg.train,  # the only split mining ever sees
            self.kg.num_relations,
            min_observations=min_observations,
            max_pairs_per_slot=max_pairs_per_slot,
            max_delta_days=max_delta_days,
            max_functional_ratio=max_functional_ratio,
        )
        self.all_transitions = mined
        if train_relations is not None:
            mined = mined.restrict(torch.tensor([self.kg.relation_id(r) for r in train_relations]))
        if len(mined) == 0:
            raise ValueError(
                f"no transitions mined from the training split of {self.kg.name!r} with these filters: "
                f"{mined.stats['filters']} (need slots with >= {min_observations} observations, "
                f"on different days)"
            )
        self.transitions = _subsample(mined, max_rows, seed)
        relation_encoder = relation_encoder or RelationEncoder(encoder)
        if relation_encoder.name != encoder:
            raise ValueError(f"relation_encoder is {relation_encoder.name!r} but encoder={encoder!r}")
        self.embeddings = relation_encoder.encode(relation_sentences(list(self.kg.relations), template))

    @property
    def embedding_dim(self) -> int:
        return int(self.embeddings.shape[1])

    @property
    def median_delta_days(self) -> float:
        return float(self.transitions.delta_days.median())

    def full_batch(self) -> dict[str, torch.Tensor]:
        tr = self.transitions
        return {
            "embeddings": self.embeddings,
            "relation": tr.relation,
            "delta_days": tr.delta_days,
            "changed": tr.changed,
            "weight": row_weights(tr.changed, tr.slot_observations),
        }

    def train_dataloader(self) -> DataLoader:
        return DataLoader([self.full_batch()], batch_size=None)


def _subsample(transitions: Transitions, max_rows: int, seed: int) -> Transitions:
    if len(transitions) <= max_rows:
        return transitions
    keep = torch.randperm(len(transitions), generator=torch.Generator().manual_seed(seed))[:max_rows]
    return transitions.select(keep.sort().values, subsampled_to=max_rows)


class GatePretrainModule(pl.LightningModule):
    """Trains ``gate`` (a ``SemanticSpeedGate``) and the pretraining time scale ``s_pre``.

    Args:
        embedding_dim: ``D`` of the relation encoder.
        encoder: the relation encoder's name (saved with the gate).
        template: the sentence relation texts are embedded in (saved with the gate).
        median_delta_days: median ``Δt`` of the training pairs; sets ``s_pre``'s initial value.
        lr: Adam learning rate.
        cpu_threads: torch intra-op threads during the fit (restored afterwards); ``None`` keeps
            torch's setting. The full batch is a few hundred thousand rows of elementwise work on
            tiny matrices, so extra threads only add synchronisation: on a shared 2-core machine,
            100 epochs on the synthetic KG took 4 s with 1 thread and 50-60 s with 2.
    """

    def __init__(
        self,
        embedding_dim: int,
        encoder: str = DEFAULT_ENCODER,
        template: str = DEFAULT_TEMPLATE,
        median_delta_days: float = 1.0,
        lr: float = 5e-4,
        cpu_threads: int | None = 1,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.gate = SemanticSpeedGate(embedding_dim, encoder, template)
        init_scale = math.log(2.0) / (0.5 * max(median_delta_days, 1.0))
        self.log_scale = nn.Parameter(torch.tensor(math.log(init_scale)))
        self.losses: list[float] = []
        self._saved_threads: int | None = None

    def on_fit_start(self) -> None:
        if self.hparams.cpu_threads is not None:
            self._saved_threads = torch.get_num_threads()
            torch.set_num_threads(self.hparams.cpu_threads)

    def on_fit_end(self) -> None:
        if self._saved_threads is not None:
            torch.set_num_threads(self._saved_threads)
            self._saved_threads = None

    @property
    def scale(self) -> torch.Tensor:
        """``s_pre``, per day."""
        return self.log_scale.exp()

    def loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return gate_loss(self.gate, self.scale, batch)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.loss(batch)
        self.losses.append(float(loss.detach()))
        self.log("train/loss", loss, prog_bar=True, batch_size=1)
        self.log("train/s_pre", self.scale.detach(), batch_size=1)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


# What ``rotmem gate pretrain`` uses without a config (= the packaged config gate-icews05-15): the paper's
# Adam 5e-4 x 100 epochs leaves the MLP far from convergence on MiniLM embeddings (see that config).
CLI_DEFAULTS = {"model.lr": 1e-2, "trainer.max_epochs": 200}


class GateCLI(LightningCLI):
    """Links the encoder, its width and the median ``Δt`` from the data into the model."""

    def add_arguments_to_parser(self, parser) -> None:
        parser.set_defaults(CLI_DEFAULTS)
        parser.link_arguments("data.encoder", "model.encoder")
        parser.link_arguments("data.template", "model.template")
        for name in ("embedding_dim", "median_delta_days"):
            parser.link_arguments(f"data.{name}", f"model.{name}", apply_on="instantiate")


TRAINER_DEFAULTS = {
    "max_epochs": 100,
    "gradient_clip_val": 1.0,
    "accelerator": "cpu",
    "devices": 1,
    "logger": False,
    "enable_checkpointing": False,
    "enable_progress_bar": False,
    "enable_model_summary": False,
}


def pretrain_gate(
    data: GateTransitionData, lr: float = 5e-4, seed: int = 0, **trainer_kwargs
) -> GatePretrainModule:
    """Fit a gate on ``data`` with the paper's settings (``trainer_kwargs`` override ``TRAINER_DEFAULTS``)."""
    pl.seed_everything(seed, verbose=False)
    module = GatePretrainModule(
        data.embedding_dim, data.encoder, data.template, data.median_delta_days, lr=lr
    )
    pl.Trainer(**{**TRAINER_DEFAULTS, **trainer_kwargs}).fit(module, datamodule=data)
    return module
