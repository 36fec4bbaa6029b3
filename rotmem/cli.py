"""The ``rotmem`` console script: one subcommand per module in ``rotmem.commands``.

``rotmem fit|validate|test --config CONFIG`` hand over to LightningCLI (Phase-2 training); CONFIG is
a YAML file or the name of a packaged config (``rotmem.configs``: ``synthetic``,
``icews05-15-chronor-dim128``, ...).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from rotmem.errors import UserInputError

# Each module has ``register(subparsers)``, which adds its parser with ``set_defaults(run=...)``.
COMMAND_MODULES = ["evaluate", "query", "data", "demo", "gate", "memory", "serve", "mcp", "env"]
LIGHTNING_SUBCOMMANDS = ("fit", "validate", "test")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rotmem", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("fit", help="train RoMem (Phase 2) with LightningCLI: rotmem fit --config NAME|FILE")
    for name in COMMAND_MODULES:
        importlib.import_module(f"rotmem.commands.{name}").register(sub)
    return parser


def resolve_configs(argv: list[str]) -> list[str]:
    """``argv`` with each ``--config NAME`` made a path: a file as given, else a packaged config."""
    from rotmem import configs

    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--config" and i + 1 < len(out):
            out[i + 1] = str(configs.resolve(out[i + 1]))
        elif arg.startswith("--config="):
            out[i] = "--config=" + str(configs.resolve(arg.split("=", 1)[1]))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run one command; bad input (``rotmem.errors.UserInputError``: a missing or malformed file, an
    unknown name, a bad date, a missing optional dependency) ends with its message as one line on
    stderr and a non-zero exit code, without a traceback. Any other exception is a bug and keeps it."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return run(argv)
    except UserInputError as error:
        print(f"rotmem: error: {' '.join(str(error).split())}", file=sys.stderr)
        return error.exit_code


def run(argv: list[str]) -> int:
    if argv and argv[0] in LIGHTNING_SUBCOMMANDS:
        from rotmem.extras import require_training

        require_training(f"rotmem {argv[0]}")
        from lightning_modules.cli import run_lightning_cli

        run_lightning_cli(resolve_configs(argv))
        return 0
    args = build_parser().parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
