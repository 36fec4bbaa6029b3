"""The training configs shipped with rotmem (``rotmem/configs/*.yaml``), found by name or by path.

``rotmem fit --config synthetic`` and ``--config icews05-15-chronor-dim128.yaml`` name a packaged
config; ``--config path/to/file.yaml`` is any file. ``resolve`` does the lookup, through
``importlib.resources``, so it works the same from a checkout and from an installed wheel.

Overlays: a config whose first key is ``base: NAME`` (a packaged config, or a file relative to
this one) holds only what differs from NAME. ``resolve`` merges it onto its base (mappings key by
key, anything else replaced, e.g. a list of callbacks) into one file of the overlay's name, so
LightningCLI, the accuracy race and ``rotmem demo`` all read one complete config. Old names stay
valid through ``ALIASES``.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.resources
import shutil
import tempfile
from pathlib import Path
from typing import Any

from rotmem.errors import InputFileNotFoundError, UserInputError

BASE_KEY = "base"
# an old name -> the packaged config it now is
ALIASES = {"icews05-15-cpu": "icews05-15-chronor-dim128"}

_EXTRACTED = contextlib.ExitStack()  # packaged files extracted to disk (only for zipped installs)
atexit.register(_EXTRACTED.close)
_MERGED: list[Path] = []  # the folder merged overlays are written to, made on first use


def names() -> list[str]:
    """The packaged configs, without ``.yaml``, sorted (aliases not included)."""
    files = importlib.resources.files(__name__).iterdir()
    return sorted(f.name.removesuffix(".yaml") for f in files if f.name.endswith(".yaml"))


def resolve(config: str | Path) -> Path:
    """A complete config file's path: ``config`` itself when that file exists, else the packaged
    config of that name (``"synthetic"`` or ``"synthetic.yaml"``, or an alias of ``ALIASES``); an
    overlay (``base: NAME``) comes back merged onto its base (``merged``). Neither a file nor a
    packaged name: ``InputFileNotFoundError``."""
    path = find(config)
    return merged(path) if has_base(path) else path


def find(config: str | Path) -> Path:
    """``config``'s file, as given or packaged, without merging (``resolve``)."""
    path = Path(config).expanduser()
    if path.is_file():
        return path
    filename = path.name if path.name.endswith(".yaml") else f"{path.name}.yaml"
    # a bare name, or a path into a configs/ folder that is not there (the checkout's old configs/)
    bare = str(config) in (filename, filename.removesuffix(".yaml")) or path.parent.name == "configs"
    stem = filename.removesuffix(".yaml")
    packaged = importlib.resources.files(__name__) / f"{ALIASES.get(stem, stem)}.yaml"
    if bare and packaged.is_file():
        return _EXTRACTED.enter_context(importlib.resources.as_file(packaged))
    raise InputFileNotFoundError(
        f"config {str(config)!r}: no such file, and not a packaged config (one of: {', '.join(names())})"
    )


def has_base(path: Path) -> bool:
    """Whether the file is an overlay: a line ``base: ...`` at the top level."""
    return any(line.startswith(f"{BASE_KEY}:") for line in path.read_text(encoding="utf-8").splitlines())


def load(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The config at ``path`` as a mapping, with its ``base`` chain merged in (``merge``)."""
    import yaml

    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise UserInputError(f"{path}: not valid YAML ({' '.join(str(error).split())})") from None
    if not isinstance(values, dict):
        raise UserInputError(f"{path}: a config is a mapping of settings, got {type(values).__name__}")
    base = values.pop(BASE_KEY, None)
    if base is None:
        return values
    relative = path.parent / str(base)
    base_path = find(relative if relative.is_file() else base)
    if base_path.resolve() in seen:
        raise UserInputError(f"{path}: its base chain comes back to {base_path}")
    return merge(load(base_path, (*seen, path.resolve())), values)


def merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """``overlay`` on ``base``: mappings merged key by key, any other value replaced."""
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def merged(path: Path) -> Path:
    """The overlay at ``path`` merged onto its base, written as ``<folder>/<its name>`` (a folder of
    this process, removed when it exits) with a comment naming the files it came from."""
    import yaml

    if not _MERGED:
        folder = Path(tempfile.mkdtemp(prefix="rotmem-configs-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _MERGED.append(folder)
    out = _MERGED[0] / path.name
    text = yaml.safe_dump(load(path), sort_keys=False, default_flow_style=None)
    out.write_text(f"# {path} merged onto its base\n{text}", encoding="utf-8")
    return out
