"""Errors that mean the user's input is wrong, not the code: the ``rotmem`` command prints their
message as one line on stderr and exits with ``exit_code``, without a traceback (``rotmem.cli.main``).

Each also derives from the built-in exception Python code would expect (``FileNotFoundError``,
``KeyError``, ``ValueError``, ``ImportError``), so ``except KeyError`` in callers keeps working.
Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

EXIT_BAD_INPUT = 2  # as argparse for a bad command line
EXIT_ENVIRONMENT = 1  # a missing optional dependency, a failed download


class UserInputError(Exception):
    """Bad input: a file, a name, a date or a config. The message names it and says what to do."""

    exit_code = EXIT_BAD_INPUT

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class InputFileNotFoundError(UserInputError, FileNotFoundError):
    """A dataset, checkpoint, gate or config file that is not there."""


class BadCheckpointError(UserInputError, ValueError):
    """A file that is not a readable rotmem checkpoint (corrupt, foreign, or unsafe to unpickle)."""


class BadSettingError(UserInputError, ValueError):
    """A setting out of its range (a width of 0, a negative learning rate, a batch of 0, an unknown
    device); the message names the setting and its value."""


class UnknownNameError(UserInputError, KeyError):
    """An entity, relation or dataset name that is not known."""


class BadDateError(UserInputError, ValueError):
    """A date that is not ``YYYY-MM-DD``."""


class DownloadError(UserInputError, RuntimeError):
    """A dataset download that failed or did not match its checksum."""

    exit_code = EXIT_ENVIRONMENT


class MissingExtraError(UserInputError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it."""

    exit_code = EXIT_ENVIRONMENT


def describe(error: BaseException) -> str:
    """``"TypeName: first line of the message"``, for wrapping a library's error in one line."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
