"""The training configs shipped with rotmem (``rotmem/configs/*.yaml``), found by name or by path.

``rotmem fit --config synthetic`` and ``--config icews05-15-cpu.yaml`` name a packaged config;
``--config path/to/file.yaml`` is any file. ``resolve`` does the lookup, through
``importlib.resources``, so it works the same from a checkout and from an installed wheel.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.resources
from pathlib import Path

from rotmem.errors import InputFileNotFoundError

_EXTRACTED = contextlib.ExitStack()  # packaged files extracted to disk (only for zipped installs)
atexit.register(_EXTRACTED.close)


def names() -> list[str]:
    """The packaged configs, without ``.yaml``, sorted."""
    files = importlib.resources.files(__name__).iterdir()
    return sorted(f.name.removesuffix(".yaml") for f in files if f.name.endswith(".yaml"))


def resolve(config: str | Path) -> Path:
    """A config file's path: ``config`` itself when that file exists, else the packaged config of that
    name (``"synthetic"`` or ``"synthetic.yaml"``). Neither: ``InputFileNotFoundError``."""
    path = Path(config).expanduser()
    if path.is_file():
        return path
    name = path.name if path.name.endswith(".yaml") else f"{path.name}.yaml"
    packaged = importlib.resources.files(__name__) / name
    # a bare name, or a path into a configs/ folder that is not there (the checkout's old configs/)
    bare = str(config) in (name, name.removesuffix(".yaml")) or path.parent.name == "configs"
    if bare and packaged.is_file():
        return _EXTRACTED.enter_context(importlib.resources.as_file(packaged))
    raise InputFileNotFoundError(
        f"config {str(config)!r}: no such file, and not a packaged config (one of: {', '.join(names())})"
    )
