"""What the memory benchmarks share on top of ``benchmarks.runner``: ``--name`` (an output stem beside
``--out``), random unit vectors, percentiles, the ICEWS05-15 facts as strings, and evidence token counts."""

import argparse
import os
from collections.abc import Callable, Sequence

import numpy as np

from benchmarks.runner import Benchmark, command_line


def parse(spec: Benchmark, argv: Sequence[str] | None = None, stem: Callable | None = None):
    """``spec``'s arguments, where ``--out`` may be a folder (not ``*.csv``) and ``--name`` the CSV's stem
    in it (``stem(args)`` when no name is given and it returns one, e.g. per split)."""
    args = spec.parser().parse_args(argv)
    name = getattr(args, "name", None) or (stem(args) if stem else None)
    if args.out.suffix != ".csv":
        args.out = args.out / f"{name or spec.default_out.stem}.csv"
    elif name:
        args.out = args.out.with_name(f"{name}.csv")
    return args


def main(spec: Benchmark, argv: Sequence[str] | None = None) -> int:
    """``spec.main`` with ``parse``'s ``--out`` and ``--name``."""
    spec.run(parse(spec, argv), command_line(spec.name, argv, spec.env))
    return 0


def add_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", help="output file stem, in --out's folder")


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def p(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of ``samples`` (NaN for none)."""
    return float(np.percentile(samples, q)) if len(samples) else float("nan")


def load_average() -> str:
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


def icews_facts(data_dir: str | None = None, low: int = -(10**9), high: int = 10**9) -> list:
    """ICEWS05-15's facts (train + valid + test) as ``(head, relation, tail, day)`` strings, by the
    file's order, those on days ``low..high``."""
    from rotmem.data import load_dataset

    kg = load_dataset("icews05-15", data_dir)
    E, R = kg.entities, kg.relations
    return [(E[h], R[r], E[t], d) for h, r, t, d in kg.all_facts.tolist() if low <= d <= high]


def token_counter(encoder) -> tuple[Callable[[str], int], str]:
    """``(count, description)``: MiniLM WordPiece tokens for the sentence encoder (no special tokens),
    else whitespace words."""
    from rotmem.memory import SentenceEncoder

    if isinstance(encoder, SentenceEncoder):
        tokenizer = encoder._encoder._load().tokenizer
        options = dict(add_special_tokens=False, truncation=False, verbose=False)
        return (lambda text: len(tokenizer(text, **options)["input_ids"])), "MiniLM WordPiece tokens"
    return (lambda text: len(text.split())), "whitespace words"


def encoder_of(name: str, dim: int = 256):
    """``minilm`` (the offline all-MiniLM-L6-v2) or ``hashing`` (``dim`` buckets)."""
    from rotmem.memory import HashingEncoder, SentenceEncoder

    return SentenceEncoder() if name == "minilm" else HashingEncoder(dim)
