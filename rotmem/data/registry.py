"""Where datasets come from: ``--data-dir``, ``$ROTMEM_DATA_DIR/<name>/``, ``~/.cache/rotmem/<name>/``.

``fetch`` fills the user cache from the public source and verifies SHA-256 checksums.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from pathlib import Path

from rotmem.data.arrays import is_array_dir, load_arrays, load_text_cached
from rotmem.data.synthetic import SYNTHETIC_NAME, synthetic_kg
from rotmem.data.temporal_kg import SPLITS, TemporalKG, check_split_files
from rotmem.errors import DownloadError, InputFileNotFoundError, UnknownNameError

# Public copies of the García-Durán et al. (2018) split, byte-identical to the files the
# project's tests use (see shared/data/icews05-15/SOURCE.md).
_DE_SIMPLE = "https://raw.githubusercontent.com/BorealisAI/de-simple/master/datasets/icews05-15"
KNOWN_DATASETS: dict[str, dict[str, tuple[str, str]]] = {
    "icews05-15": {
        "train": (
            f"{_DE_SIMPLE}/train.txt",
            "b736c7827497da10e0c51befdb0b5797f957d3bc264fa125543f729b22cd321d",
        ),
        "valid": (
            f"{_DE_SIMPLE}/valid.txt",
            "404516f2da966c563ab6d81f1355ec5c67a9aa77c111bf712429e65136162b23",
        ),
        "test": (
            f"{_DE_SIMPLE}/test.txt",
            "d034cd94ace08279639526cbe2ce34829562941ddd1301e6afa9e0ffa7a5b160",
        ),
    }
}


def cache_root() -> Path:
    """The user cache for rotmem (``$XDG_CACHE_HOME/rotmem`` or ``~/.cache/rotmem``)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rotmem"


def candidate_dirs(name: str, data_dir: str | Path | None = None) -> list[Path]:
    """The directories searched for dataset ``name``, in order."""
    dirs = []
    if data_dir is not None:
        data_dir = Path(data_dir)
        dirs += [data_dir / name, data_dir]
    if os.environ.get("ROTMEM_DATA_DIR"):
        dirs.append(Path(os.environ["ROTMEM_DATA_DIR"]) / name)
    dirs.append(cache_root() / name)
    return dirs


def is_dataset_dir(directory: Path) -> bool:
    """Whether ``directory`` holds a dataset: the three split files, or a preprocessed graph."""
    return all((directory / f"{s}.txt").is_file() for s in SPLITS) or is_array_dir(directory)


def find_dataset(name: str, data_dir: str | Path | None = None) -> Path | None:
    """The first candidate directory holding a dataset, or None."""
    for directory in candidate_dirs(name, data_dir):
        if is_dataset_dir(directory):
            return directory
    return None


def load_folder(directory: Path, name: str | None = None) -> TemporalKG:
    """A preprocessed graph (memory-mapped) or text files (parsed once, then cached as arrays)."""
    if is_array_dir(directory):
        return load_arrays(directory, name)
    check_split_files(directory)
    return load_text_cached(directory, name, cache_root())


def load_dataset(name_or_dir: str | Path, data_dir: str | Path | None = None) -> TemporalKG:
    """Load a temporal KG by name (``"icews05-15"``, ``"synthetic"``) or from a directory.

    A name is resolved through ``data_dir``, ``$ROTMEM_DATA_DIR/<name>/`` and the user cache. A
    directory holds ``train.txt``, ``valid.txt``, ``test.txt`` or a preprocessed graph
    (``rotmem.data.arrays``, e.g. from ``rotmem data synthetic``).
    """
    if str(name_or_dir) == SYNTHETIC_NAME:
        return synthetic_kg().kg
    path = Path(name_or_dir)
    if path.is_dir():
        return load_folder(path)
    found = find_dataset(str(name_or_dir), data_dir)
    if found is None:
        searched = ", ".join(str(d) for d in candidate_dirs(str(name_or_dir), data_dir))
        hint = (
            f"run `rotmem data fetch {name_or_dir}`"
            if str(name_or_dir) in KNOWN_DATASETS
            else "pass --data-dir or set ROTMEM_DATA_DIR to a folder that holds it"
        )
        raise InputFileNotFoundError(
            f"dataset {str(name_or_dir)!r} not found in {searched} (a dataset folder holds train.txt, "
            f"valid.txt and test.txt; or name 'synthetic'). To get it: {hint}."
        )
    return load_folder(found, name=str(name_or_dir))


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(name: str, dest: Path | None = None, timeout_s: float = 60.0) -> Path:
    """Download dataset ``name`` into ``dest`` (default: the user cache) and verify SHA-256.

    Files already present with the right checksum are kept. Raises ``DownloadError`` (a RuntimeError)
    with what to do when the download fails (e.g. offline) or a checksum does not match.
    """
    if name not in KNOWN_DATASETS:
        raise UnknownNameError(f"unknown dataset {name!r}; known: {sorted(KNOWN_DATASETS)}")
    dest = Path(dest) if dest is not None else cache_root() / name
    dest.mkdir(parents=True, exist_ok=True)
    for split, (url, expected) in KNOWN_DATASETS[name].items():
        target = dest / f"{split}.txt"
        if target.is_file() and sha256_of(target) == expected:
            continue
        partial = target.with_suffix(".txt.part")
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                partial.write_bytes(response.read())
        except (urllib.error.URLError, OSError) as exc:
            partial.unlink(missing_ok=True)
            raise DownloadError(
                f"could not download {url}: {exc}.\nIf this machine is offline, copy "
                f"train.txt, valid.txt and test.txt of {name} into {dest} (or any folder, then "
                "pass --data-dir / set ROTMEM_DATA_DIR); their SHA-256 values are checked."
            ) from exc
        actual = sha256_of(partial)
        if actual != expected:
            partial.unlink(missing_ok=True)
            raise DownloadError(f"{url}: SHA-256 {actual} does not match the expected {expected}; not saved")
        partial.replace(target)
    return dest


def verify(directory: Path, name: str) -> dict[str, bool]:
    """Check the split files in ``directory`` against the known SHA-256 values."""
    return {
        split: (directory / f"{split}.txt").is_file() and sha256_of(directory / f"{split}.txt") == expected
        for split, (_, expected) in KNOWN_DATASETS[name].items()
    }
