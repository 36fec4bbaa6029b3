"""Preprocessed temporal KGs: fact arrays memory-mapped from ``.npy`` files, vocabularies in text files.

A folder in this format holds ``train.npy``, ``valid.npy``, ``test.npy`` (int64 ``[M, 4]``:
``head, relation, tail, day``), ``entities.txt`` and ``relations.txt`` (one name per line, id order)
and, written last, ``rotmem-arrays.json`` (format, name, counts). Loading memory-maps the arrays
(the operating system reads pages when they are used), so a 20M-fact graph opens in the time it
takes to read its vocabulary, with no per-line Python.

Text datasets (``train.txt`` ...) of ``CACHE_MIN_BYTES`` or more are parsed once and kept in this
format in the user cache (``~/.cache/rotmem/arrays/<name>-<key>``, the key from the files' paths,
sizes and modification times), so the second load is a memory-map too.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch

from rotmem.data.temporal_kg import PARSER_VERSION, SPLITS, TemporalKG, load_directory

META = "rotmem-arrays.json"
FORMAT = "rotmem-arrays"
VERSION = 1
CACHE_MIN_BYTES = 1 << 20  # smaller text datasets parse in milliseconds: not worth a cache folder


def is_array_dir(directory: Path) -> bool:
    """Whether ``directory`` holds a complete preprocessed graph (its metadata is written last)."""
    return (Path(directory) / META).is_file()


class ArrayWriter:
    """Writes a graph in this format, split by split and chunk by chunk, holding no more than a chunk.

    ``sizes``: the number of facts of each split, known in advance (the ``.npy`` headers need it).
    Fill every split with ``write`` (in order), the vocabularies with ``write_names``, then ``close``.
    """

    def __init__(self, directory: Path, name: str, sizes: dict[str, int]):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / META).unlink(missing_ok=True)  # incomplete until close() writes it again
        self.name, self.sizes = name, dict(sizes)
        self.filled = dict.fromkeys(SPLITS, 0)
        self.arrays = {
            split: np.lib.format.open_memmap(
                self.directory / f"{split}.npy", mode="w+", dtype=np.int64, shape=(self.sizes[split], 4)
            )
            for split in SPLITS
        }
        self.counts: dict[str, int] = {}

    def write(self, split: str, rows: np.ndarray) -> None:
        """Append ``rows [m, 4]`` (int64 ``head, relation, tail, day``) to ``split``."""
        start = self.filled[split]
        if start + len(rows) > self.sizes[split]:
            raise ValueError(f"{split}: {start + len(rows)} facts written, {self.sizes[split]} announced")
        self.arrays[split][start : start + len(rows)] = rows
        self.filled[split] = start + len(rows)

    def write_names(self, kind: str, chunks: Iterable[Iterable[str]]) -> None:
        """``entities`` or ``relations``: names in id order, given in chunks (one line each)."""
        count = 0
        with open(self.directory / f"{kind}.txt", "w", encoding="utf-8") as handle:
            for chunk in chunks:
                names = list(chunk)
                if any("\n" in name for name in names):
                    raise ValueError(f"{kind}: a name holds a line break, which this format cannot store")
                handle.write("".join(name + "\n" for name in names))
                count += len(names)
        self.counts[kind] = count

    def close(self) -> None:
        """Flush the arrays and write the metadata that marks the folder complete."""
        missing = {s: (self.filled[s], self.sizes[s]) for s in SPLITS if self.filled[s] != self.sizes[s]}
        if missing:
            raise ValueError(f"splits not filled (written, announced): {missing}")
        if set(self.counts) != {"entities", "relations"}:
            raise ValueError("write_names('entities', ...) and write_names('relations', ...) first")
        for array in self.arrays.values():
            array.flush()
        self.arrays.clear()
        meta = {
            "format": FORMAT,
            "version": VERSION,
            "name": self.name,
            "num_entities": self.counts["entities"],
            "num_relations": self.counts["relations"],
            "facts": self.sizes,
        }
        (self.directory / META).write_text(json.dumps(meta, indent=2) + "\n")


def save_arrays(kg: TemporalKG, directory: Path) -> None:
    """Write ``kg`` in this format."""
    writer = ArrayWriter(directory, kg.name, {s: kg.split(s).shape[0] for s in SPLITS})
    for split in SPLITS:
        writer.write(split, kg.split(split).numpy())
    writer.write_names("entities", [kg.entities])
    writer.write_names("relations", [kg.relations])
    writer.close()


def load_arrays(directory: Path, name: str | None = None) -> TemporalKG:
    """Open a graph in this format: the fact arrays memory-mapped (copy on write), the names read."""
    directory = Path(directory)
    meta_path = directory / META
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise ValueError(
            f"{meta_path}: not a {FORMAT} v{VERSION} folder "
            f"(found {meta.get('format')} v{meta.get('version')})"
        )
    vocab = {}
    for kind in ("entities", "relations"):
        names = (directory / f"{kind}.txt").read_text(encoding="utf-8").split("\n")[:-1]
        if len(names) != meta[f"num_{kind}"]:
            raise ValueError(
                f"{directory / f'{kind}.txt'}: {len(names)} names, {meta_path} says {meta[f'num_{kind}']}"
            )
        vocab[kind] = names
    splits = {}
    for split in SPLITS:
        array = np.load(directory / f"{split}.npy", mmap_mode="c")
        if array.dtype != np.int64 or array.ndim != 2 or array.shape[1] != 4:
            raise ValueError(
                f"{directory / f'{split}.npy'}: expected int64 [M, 4], got {array.dtype} {array.shape}"
            )
        splits[split] = torch.from_numpy(array)
    return TemporalKG(
        name=name or meta["name"], entities=vocab["entities"], relations=vocab["relations"], **splits
    )


def _cache_key(directory: Path) -> str:
    """Changes when any split file is replaced, resized or touched, or the parser changes."""
    parts = [f"parser {PARSER_VERSION}"]
    for split in SPLITS:
        path = (directory / f"{split}.txt").resolve()
        stat = path.stat()
        parts.append(f"{path}|{stat.st_size}|{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def load_text_cached(directory: Path, name: str | None, cache_root: Path) -> TemporalKG:
    """A text dataset, from its array copy under ``cache_root / "arrays"`` when one exists; else parsed
    (errors name file and line) and, when large enough, copied there for the next load."""
    directory = Path(directory)
    name = name or directory.name
    size = sum((directory / f"{s}.txt").stat().st_size for s in SPLITS)
    if size < CACHE_MIN_BYTES:
        return load_directory(directory, name=name)
    cached = cache_root / "arrays" / f"{name.replace(os.sep, '_')}-{_cache_key(directory)}"
    if is_array_dir(cached):
        return load_arrays(cached, name=name)
    kg = load_directory(directory, name=name)
    try:  # written beside and renamed, so concurrent loaders (DDP ranks) never see half a copy
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(dir=cached.parent, prefix=".partial-"))
    except OSError:
        return kg  # a read-only cache only costs the next load a parse
    try:
        save_arrays(kg, partial)
        partial.rename(cached)
    except OSError:  # another process got there first, or the disk is full
        shutil.rmtree(partial, ignore_errors=True)
    return kg
