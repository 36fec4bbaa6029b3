"""``rotmem data``: fetch, verify and describe datasets."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="fetch, verify or describe a dataset")
    data_sub = p.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    fetch = data_sub.add_parser("fetch", help="download into the user cache and verify SHA-256")
    fetch.add_argument("name", help="dataset name, e.g. icews05-15")
    fetch.add_argument("--dest", default=None, help="target folder (default ~/.cache/rotmem/<name>)")
    fetch.set_defaults(run=run_fetch)
    info = data_sub.add_parser("info", help="where a dataset is found and its counts")
    info.add_argument("name", help="dataset name or directory (or 'synthetic')")
    info.add_argument("--data-dir", default=None)
    info.set_defaults(run=run_info)


def run_fetch(args: argparse.Namespace) -> int:
    from rotmem.data.registry import fetch

    path = fetch(args.name, args.dest)
    print(f"{args.name}: verified in {path}")
    return 0


def run_info(args: argparse.Namespace) -> int:
    from rotmem.data import date_of, find_dataset, load_dataset

    kg = load_dataset(args.name, args.data_dir)
    where = find_dataset(args.name, args.data_dir) if args.name != "synthetic" else "built in"
    days = kg.all_facts[:, 3]
    print(f"{kg.name} ({where})")
    print(f"  entities {kg.num_entities:,}  relations {kg.num_relations:,}  days {kg.num_days:,}")
    print(f"  facts train {len(kg.train):,} / valid {len(kg.valid):,} / test {len(kg.test):,}")
    print(f"  dates {date_of(int(days.min()))} .. {date_of(int(days.max()))}")
    return 0
