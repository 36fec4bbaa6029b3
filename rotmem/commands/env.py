"""``rotmem env``: versions, the native build, the CPU instruction set and each op's backend."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("env", help="what this installation runs: versions, native build, backends")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rotmem.env import main

    return main()
