"""LightningCLI entry point for Phase 2 (``rotmem fit|validate|test --config FILE``).

The model is ``model.family``, a class and its own arguments (``lightning_modules.family_settings``);
a setting the parser refuses (an argument the family does not take, an unknown key) ends in one line.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

from jsonargparse import ArgumentError, add_instantiator
from pytorch_lightning.cli import LightningCLI

from lightning_modules import family_settings
from lightning_modules.kg_data import TemporalKGDataModule
from lightning_modules.phase2 import Phase2Module
from rotmem.errors import InputFileNotFoundError, UserInputError
from rotmem.models import TemporalKGE
from rotmem.models.checkpoint import read_checkpoint

LIGHTNING_CKPT_NAMES = ("last", "best", "hpc", "registry")

# a family's constructor refusing its arguments: one line naming model.family (jsonargparse builds
# it; the module-level add_instantiator is jsonargparse >= 4.49's, pyproject's train extra)
add_instantiator(family_settings.build_family, TemporalKGE)


class RoMemCLI(LightningCLI):
    """Links the dataset's sizes and reference day into the model family's arguments; refuses any
    parse error in one line."""

    def add_arguments_to_parser(self, parser) -> None:
        for name in family_settings.LINKED:
            parser.link_arguments(f"data.{name}", f"model.family.init_args.{name}", apply_on="instantiate")

    def parse_arguments(self, parser, args) -> None:
        """LightningCLI's; a parse error is a ``UserInputError`` (one line, exit code 2) rather than
        the usage and the message."""
        with raising(parser):
            super().parse_arguments(parser, args)

    def _parse_ckpt_path(self) -> None:
        """``--ckpt_path FILE``'s saved model settings over the config's, as LightningCLI's, read as
        ``rotmem.load_model`` reads a file (``check_ckpt_path``)."""
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if ckpt_path is None or ckpt_path in LIGHTNING_CKPT_NAMES or not Path(ckpt_path).is_file():
            return
        hparams = dict(read_checkpoint(Path(ckpt_path)).get("hyper_parameters", {}))
        hparams.pop("_instantiator", None)
        if not hparams:
            return
        for name in family_settings.LINKED:  # linked from the data module, not parsed
            hparams.get("family", {}).get("init_args", {}).pop(name, None)
        with raising(self.parser, f"{ckpt_path}: its saved model settings do not parse: "):
            self.config = self.parser.parse_object({subcommand: {"model": hparams}}, self.config)

    def before_instantiate_classes(self) -> None:
        """A training run whose gate file is missing stops here, before anything is written."""
        config = self.config.get(self.subcommand, self.config) if self.subcommand else self.config
        model = config.get("model", {})
        family = model.get("family") or {}
        if self.subcommand != "fit" or (family.get("init_args") or {}).get("speed") != "gate":
            return
        gate_path = model.get("gate_path")
        if not gate_path:
            raise UserInputError(
                "model.family.speed is 'gate' but model.gate_path is not set (a gate.pt file)"
            )
        path = Path(gate_path).expanduser()
        if not path.is_file():
            dataset = config.get("data", {}).get("dataset", "<dataset>")
            raise InputFileNotFoundError(
                f"gate file {path} not found (model.gate_path): make it with "
                f"`rotmem gate pretrain --data {dataset} --out {path.parent}`, or train without a gate "
                "(--model.family.speed constant)"
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


@contextmanager
def raising(parser, prefix: str = "") -> Iterator[None]:
    """While inside, ``parser`` (and its subcommands' parsers) raise a parse error as
    ``UserInputError`` (``prefix`` + the message as one line) instead of printing the usage and
    exiting."""
    subcommands = getattr(parser, "_subcommands_action", None)
    parsers = [parser, *(subcommands._name_parser_map.values() if subcommands else ())]
    for each in parsers:
        each.exit_on_error = False
    try:
        yield
    except ArgumentError as error:
        raise UserInputError(prefix + family_settings.parse_error_line(str(error))) from None
    finally:
        for each in parsers:
            each.exit_on_error = True


def check_ckpt_path(ckpt_path: str | None) -> None:
    """Before Lightning reads ``--ckpt_path`` (a traceback for a bad file, or code run when unpickled), read
    it as ``rotmem.load_model`` does: weights only, a rotmem layout, its stored SHA-256. A bad file
    ends in one line (``BadCheckpointError``); Lightning's own names (``last``, ``best``, ...) pass."""
    if ckpt_path is None or ckpt_path in LIGHTNING_CKPT_NAMES:
        return
    read_checkpoint(Path(ckpt_path))


def run_lightning_cli(argv: list[str]) -> RoMemCLI:
    """Run LightningCLI on ``argv`` (e.g. ``["fit", "--config", "path/to/synthetic.yaml"]``: paths;
    ``rotmem.cli`` turns packaged config names into paths first)."""
    for i, arg in enumerate(argv):  # LightningCLI reads --ckpt_path's hyper-parameters at once
        if arg == "--ckpt_path" and i + 1 < len(argv):
            check_ckpt_path(argv[i + 1])
        elif arg.startswith("--ckpt_path="):
            check_ckpt_path(arg.split("=", 1)[1])
    # The arguments come from argv alone; sys.argv holds them too because Lightning's DDP launcher
    # starts the other ranks by re-running sys.argv (without them a rank starts with no subcommand).
    with mock.patch.object(sys, "argv", sys.argv[:1] + list(argv)):
        return RoMemCLI(
            Phase2Module,
            TemporalKGDataModule,
            args=argv,
            save_config_kwargs={"overwrite": True},
        )
