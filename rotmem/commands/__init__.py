"""Subcommands of the ``rotmem`` console script (see ``rotmem.cli``)."""
