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
    synth = data_sub.add_parser(
        "synthetic",
        help="generate a synthetic temporal KG of any size, streamed to disk as memory-mappable arrays",
    )
    synth.add_argument("--entities", type=int, required=True, help="number of entities, e.g. 1000000")
    synth.add_argument(
        "--facts", type=int, required=True, help="number of facts over all splits, e.g. 20000000"
    )
    synth.add_argument("--relations", type=int, default=20)
    synth.add_argument(
        "--seed", type=int, default=0, help="the same seed gives the same graph, byte for byte"
    )
    synth.add_argument("--first-date", default="2005-01-01")
    synth.add_argument("--last-date", default="2015-12-31")
    synth.add_argument("--out", required=True, help="folder to write (load it with --data / load_dataset)")
    synth.set_defaults(run=run_synthetic)


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


def run_synthetic(args: argparse.Namespace) -> int:
    import time

    from rotmem.data.large_synthetic import write_synthetic_graph

    start = time.perf_counter()
    try:
        out = write_synthetic_graph(
            args.out, args.entities, args.facts, args.relations, args.seed, args.first_date, args.last_date
        )
    except ValueError as exc:
        raise SystemExit(f"rotmem data synthetic: {exc}") from None
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"wrote {out} ({size / 2**20:,.0f} MiB) in {time.perf_counter() - start:.1f} s")
    return 0
