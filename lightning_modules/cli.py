"""LightningCLI entry point for Phase 2 (``rotmem fit|validate|test --config FILE``)."""

from __future__ import annotations

import sys
from pathlib import Path
from unittest import mock

from pytorch_lightning.cli import LightningCLI

from lightning_modules.kg_data import TemporalKGDataModule
from lightning_modules.phase2 import Phase2Module
from rotmem.errors import InputFileNotFoundError, UserInputError
from rotmem.models.checkpoint import read_checkpoint

LIGHTNING_CKPT_NAMES = ("last", "best", "hpc", "registry")


class RoMemCLI(LightningCLI):
    """Links the dataset's sizes and reference day into the model's arguments."""

    def add_arguments_to_parser(self, parser) -> None:
        for name in ("num_entities", "num_relations", "tau0", "num_days"):
            parser.link_arguments(f"data.{name}", f"model.{name}", apply_on="instantiate")

    def before_instantiate_classes(self) -> None:
        """A training run whose gate file is missing stops here, before anything is written."""
        config = self.config.get(self.subcommand, self.config) if self.subcommand else self.config
        model = config.get("model", {})
        if self.subcommand != "fit" or model.get("speed") != "gate":
            return
        gate_path = model.get("gate_path")
        if not gate_path:
            raise UserInputError("model.speed is 'gate' but model.gate_path is not set (a gate.pt file)")
        path = Path(gate_path).expanduser()
        if not path.is_file():
            dataset = config.get("data", {}).get("dataset", "<dataset>")
            raise InputFileNotFoundError(
                f"gate file {path} not found (model.gate_path): make it with "
                f"`rotmem gate pretrain --data {dataset} --out {path.parent}`, or train without a gate "
                "(--model.speed constant)"
            )

    def before_fit(self) -> None:
        """``--ckpt_path last`` resumes the newest ``last*.ckpt`` of the earlier runs under the logger's
        folder: every run logs into a new ``version_N``, where Lightning alone would look (and find
        nothing, and start from scratch). A checkpoint file is checked first (``check_ckpt_path``)."""
        config = self.config_init[self.subcommand]
        if config.get("ckpt_path") != "last":
            check_ckpt_path(config.get("ckpt_path"))
            return
        trainer = self.trainer
        if trainer.loggers:
            logger = trainer.loggers[0]
            runs = Path(logger.save_dir or trainer.default_root_dir) / str(logger.name)
            found = list(runs.glob("*/checkpoints/last*.ckpt"))
        else:
            found = list(Path(trainer.default_root_dir).glob("checkpoints/last*.ckpt"))
        if found:  # else Lightning warns that there is nothing to resume and starts at step 0
            config["ckpt_path"] = str(max(found, key=lambda path: path.stat().st_mtime))
            check_ckpt_path(config["ckpt_path"])

    def before_validate(self) -> None:
        check_ckpt_path(self.config_init[self.subcommand].get("ckpt_path"))

    def before_test(self) -> None:
        check_ckpt_path(self.config_init[self.subcommand].get("ckpt_path"))


def check_ckpt_path(ckpt_path: str | None) -> None:
    """Before Lightning unpickles ``--ckpt_path`` (freely, running whatever code the file holds), read
    it as ``rotmem.load_model`` does: weights only, a rotmem layout, its stored SHA-256. A bad file
    ends in one line (``BadCheckpointError``); Lightning's own names (``last``, ``best``, ...) pass."""
    if ckpt_path is None or ckpt_path in LIGHTNING_CKPT_NAMES:
        return
    read_checkpoint(Path(ckpt_path))


def run_lightning_cli(argv: list[str]) -> RoMemCLI:
    """Run LightningCLI on ``argv`` (e.g. ``["fit", "--config", "path/to/synthetic.yaml"]``: paths;
    ``rotmem.cli`` turns packaged config names into paths first)."""
    # The arguments come from argv alone; sys.argv holds them too because Lightning's DDP launcher
    # starts the other ranks by re-running sys.argv (without them a rank starts with no subcommand).
    with mock.patch.object(sys, "argv", sys.argv[:1] + list(argv)):
        return RoMemCLI(
            Phase2Module,
            TemporalKGDataModule,
            args=argv,
            save_config_kwargs={"overwrite": True},
        )
