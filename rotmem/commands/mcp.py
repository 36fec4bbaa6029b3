"""``rotmem mcp``: the memory as an MCP server on stdin/stdout (``rotmem.server.mcp_server``).

rotmem mcp --store ./memories --namespace alice      # SQLite file ./memories/alice.db
rotmem mcp --store postgresql://user@host/db --namespace alice
"""

from __future__ import annotations

import argparse
import sys

from rotmem.commands.memory import ENCODER_HELP
from rotmem.commands.serve import DEVICE_HELP, add_retriever_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp", help="the memory as an MCP server over stdio: add_memory, search_memory")
    p.add_argument(
        "--store", required=True, help="a directory (SQLite, one file per namespace) or a postgresql:// DSN"
    )
    p.add_argument("--namespace", default="default", help="the namespace to serve (default: default)")
    p.add_argument("--encoder", default="minilm", help=ENCODER_HELP)
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    add_retriever_argument(p)
    p.add_argument(
        "--extractor", default=None, metavar="MODULE:NAME", help="a FactExtractor for text-only sessions"
    )
    p.add_argument("--synchronous", default="FULL", help="SQLite synchronous pragma (default FULL)")
    p.set_defaults(run=run_mcp)


def run_mcp(args: argparse.Namespace) -> int:
    try:
        from rotmem.commands.serve import build_pool
        from rotmem.memory.storage.database import check_namespace
        from rotmem.server.mcp_server import build_server

        namespace = check_namespace(args.namespace)
        pool = build_pool(args)
    except ValueError as error:
        print(f"rotmem mcp: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    try:
        build_server(pool, namespace).run("stdio")
    finally:
        pool.close()
    return 0
