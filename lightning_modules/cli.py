"""LightningCLI entry point for Phase 2 (``rotmem fit|validate|test --config FILE``)."""

from __future__ import annotations

import sys
from unittest import mock

from pytorch_lightning.cli import LightningCLI

from lightning_modules.kg_data import TemporalKGDataModule
from lightning_modules.phase2 import Phase2Module


class RoMemCLI(LightningCLI):
    """Links the dataset's sizes and reference day into the model's arguments."""

    def add_arguments_to_parser(self, parser) -> None:
        for name in ("num_entities", "num_relations", "tau0", "num_days"):
            parser.link_arguments(f"data.{name}", f"model.{name}", apply_on="instantiate")


def run_lightning_cli(argv: list[str]) -> RoMemCLI:
    """Run LightningCLI on ``argv`` (e.g. ``["fit", "--config", "configs/synthetic.yaml"]``)."""
    # The arguments come from argv alone; sys.argv holds them too because Lightning's DDP launcher
    # starts the other ranks by re-running sys.argv (without them a rank starts with no subcommand).
    with mock.patch.object(sys, "argv", sys.argv[:1] + list(argv)):
        return RoMemCLI(
            Phase2Module,
            TemporalKGDataModule,
            args=argv,
            save_config_kwargs={"overwrite": True},
        )
