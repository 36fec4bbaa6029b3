"""``rotmem serve``: the memory as an HTTP service (``rotmem.server.app``), one namespace per API key.

rotmem serve --keys keys.json --add-key alice        # prints a new key for namespace alice, once
rotmem serve --store ./memories --keys keys.json     # SQLite: one file per namespace in ./memories
rotmem serve --store postgresql://user@host/db --keys keys.json --port 8077
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rotmem.commands.memory import ENCODER_HELP

DEVICE_HELP = (
    "where the text encoder runs: auto (default: the GPU when CUDA has one, else the CPU), cpu, cuda"
)


def add_retriever_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--retriever",
        default="best",
        choices=("best", "temporal"),
        help="best (default): BestMemory, the hybrid retriever with the question's time constraint "
        "applied; temporal: TemporalMemory alone (dense, no time constraint; docs/memory.md)",
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="the memory as an HTTP service (FastAPI): add, search, history, stats")
    p.add_argument("--keys", required=True, help="the API key file (JSON of SHA-256 hashes -> namespaces)")
    p.add_argument("--add-key", metavar="NAMESPACE", help="add a key for NAMESPACE to --keys, print it, exit")
    p.add_argument("--store", help="a directory (SQLite, one file per namespace) or a postgresql:// DSN")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8077, help="port (default 8077; 0: any free port)")
    p.add_argument("--encoder", default="minilm", help=ENCODER_HELP)
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    add_retriever_argument(p)
    p.add_argument(
        "--extractor", default=None, metavar="MODULE:NAME", help="a FactExtractor for text-only sessions"
    )
    p.add_argument(
        "--max-body", type=int, default=1 << 20, help="largest request body in bytes (default 1 MiB)"
    )
    p.add_argument(
        "--synchronous",
        default="FULL",
        help="SQLite synchronous pragma (FULL: every acknowledged add is durable)",
    )
    p.add_argument(
        "--encoder-threads",
        type=int,
        default=None,
        help="torch threads for the text encoder (default: torch's; on a 2-core machine 1 leaves a core "
        "to the index search that runs beside it)",
    )
    p.add_argument(
        "--encoder-cpus",
        default=None,
        metavar="LIST",
        help="run the text encoder's worker on these CPUs only (Linux; like 1 or 2-3) and the server on "
        "the others: the encoder, the service's bound, then never waits for a core (docs/memory.md)",
    )
    p.add_argument(
        "--encoder-batch",
        type=int,
        default=None,
        help="the most texts in one call of the text encoder (default: 8 on the CPU, 64 on a GPU; a cap "
        "below the number of concurrent clients keeps the encoder busy: rotmem.server.batching)",
    )
    p.add_argument(
        "--encoder-in-process",
        action="store_true",
        help="run the text encoder in the server's process (default: a worker process of its own, where "
        "the request threads cannot hold up its GIL: rotmem.server.encoder_process)",
    )
    p.set_defaults(run=run_serve)


def build_pool(args: argparse.Namespace):
    """The ``MemoryPool`` of ``--store``, ``--encoder``, ``--device``, ``--encoder-batch``, ``--extractor``
    (shared with ``rotmem mcp``)."""
    from rotmem.commands.memory import _encoder
    from rotmem.memory.encoder import resolve_device
    from rotmem.memory.llm import load_plugin
    from rotmem.server.batching import ServiceEncoder
    from rotmem.server.pool import MemoryPool

    if not args.store:
        raise ValueError("--store is required: a directory (SQLite files) or a postgresql:// DSN")
    extractor = load_plugin(args.extractor, "--extractor") if args.extractor else None
    options = (
        {} if args.store.startswith(("postgresql://", "postgres://")) else {"synchronous": args.synchronous}
    )
    threads = getattr(args, "encoder_threads", None)
    if threads is not None and threads < 1:
        raise ValueError(f"--encoder-threads must be at least 1, got {threads}")
    max_batch = getattr(args, "encoder_batch", None)
    if max_batch is not None and max_batch < 1:
        raise ValueError(f"--encoder-batch must be at least 1, got {max_batch}")
    encoder_cpus = getattr(args, "encoder_cpus", None)
    in_process = getattr(args, "encoder_in_process", True)  # rotmem mcp: one client, no GIL to share
    if encoder_cpus is not None and in_process:
        raise ValueError("--encoder-cpus needs the encoder in its own process: drop --encoder-in-process")
    device = resolve_device(getattr(args, "device", "auto"))  # a bad value or no GPU: one line, exit 2
    if in_process:
        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        encoder = _encoder(args.encoder, device)
        encoder.encode(["warm up"])  # load the model before the first request (readiness)
    else:  # loads the model before the first request (readiness)
        from rotmem.server.cpus import parse_cpu_list, pin_process, split_cpus
        from rotmem.server.encoder_process import ProcessEncoder

        cpus = parse_cpu_list(encoder_cpus) if encoder_cpus is not None else None
        server_cpus = split_cpus(cpus) if cpus is not None else None
        encoder = ProcessEncoder(args.encoder, device, threads, cpus)
        if server_cpus is not None:
            pin_process(server_cpus)  # after the worker's start: it pins itself to ``cpus``
    encoder = ServiceEncoder(encoder, max_batch)
    return MemoryPool(args.store, encoder, extractor, getattr(args, "retriever", "best"), **options)


def run_serve(args: argparse.Namespace) -> int:
    from rotmem.extras import require

    try:
        from rotmem.server.keys import KeyRing

        if args.add_key:
            keys = KeyRing.load(args.keys) if Path(args.keys).exists() else KeyRing()
            token = keys.add(args.add_key)
            keys.save(args.keys)
            print(token)
            return 0
        uvicorn = require("uvicorn", "rotmem serve")
        from rotmem.server.app import create_app

        keys = KeyRing.load(args.keys)
        pool = build_pool(args)
    except ValueError as error:
        print(f"rotmem serve: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    app = create_app(pool, keys, max_body=args.max_body)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        pool.close()
    return 0
