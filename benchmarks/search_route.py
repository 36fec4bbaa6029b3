"""CPU per ``POST /v1/search`` request spent by the HTTP layer: ``rotmem serve``'s app with
``SearchShortcut`` (its default) against the same app without it (the FastAPI route and its
middleware), side by side.

The pool is a stub that answers at once with a fixed result, so the figure is the layer's own cost:
the app called in process, ``--concurrency`` requests in flight at a time on one event loop (uvloop
when installed, as uvicorn picks), CPU seconds of this process per request. Not in it: uvicorn's
HTTP parsing and the socket, which both paths share, and the search itself. Rounds alternate the
two apps; the medians over ``--rounds`` are kept.

    python -m benchmarks.search_route
"""

if not __package__:  # run as a file, which would put benchmarks/ on sys.path
    raise SystemExit("run it as: python -m benchmarks.search_route (from the checkout's root)")

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from benchmarks.runner import Benchmark, Row, interleaved
from rotmem.memory.records import Record
from rotmem.memory.temporal.records import TemporalRecord
from rotmem.server.app import BodyGuard, create_app
from rotmem.server.keys import KeyRing
from rotmem.server.pool import SearchResult

QUESTION = {"question": "Where did Alice live in May 2023?", "k": 15}


class StubPool:
    """A ``MemoryPool`` stand-in whose every search returns the same ``records`` at once."""

    def __init__(self, records: int):
        day = 19_000.0  # 2022-01-08
        found = [
            TemporalRecord(
                Record("Alice", "lives in", f"City {i}", f"s{i}", i, i % 2 == 1, id=i, sources=("turn",)),
                *(day + i, day + i, 0.5, 0.0, 0.5, None),
            )
            for i in range(records)
        ]
        self.result = SearchResult(found, "explicit", found)
        self.encoder = None

    def search(self, namespace: str, question: str, k: int, now: float | None) -> SearchResult:
        return self.result


def requester(app: Any, token: str) -> Callable[[], Any]:
    """One request to ``app`` (an ASGI callable), checked to be answered 200."""
    body = json.dumps(QUESTION).encode()
    headers = [
        (b"host", b"127.0.0.1"),
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/search",
        "raw_path": b"/v1/search",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }

    async def one() -> None:
        sent: list[dict] = []

        async def receive() -> dict:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict) -> None:
            sent.append(message)

        await app(dict(scope), receive, send)
        if sent[0]["status"] != 200:
            raise RuntimeError(f"the app answered {sent[0]['status']}: {sent[-1].get('body', b'')[:200]!r}")

    return one


def event_loop_runner() -> Callable[[Any], Any]:
    try:
        import uvloop
    except ImportError:
        return asyncio.run
    return uvloop.run


def cpu_per_request(one: Callable[[], Any], requests: int, concurrency: int, run: Callable) -> float:
    """Microseconds of this process's CPU per request, ``requests`` of them ``concurrency`` at a time."""

    async def main() -> None:
        async def worker() -> None:
            for _ in range(requests // concurrency):
                await one()

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    start = time.process_time()
    run(main())
    return (time.process_time() - start) / (requests // concurrency * concurrency) * 1e6


def measure(args: argparse.Namespace) -> Iterator[Row]:
    ring = KeyRing()
    token = ring.add("bench")
    with_shortcut = create_app(StubPool(args.records), ring)
    apps = {"shortcut": with_shortcut, "framework": BodyGuard(with_shortcut.app, with_shortcut.limit)}
    run = event_loop_runner()
    timers = {
        name: partial(cpu_per_request, requester(app, token), args.requests, args.concurrency, run)
        for name, app in apps.items()
    }
    times = interleaved(timers, args.rounds, warmup=1)
    framework = statistics.median(times["framework"])
    for name, values in times.items():
        yield {
            "path": name,
            "records": args.records,
            "concurrency": args.concurrency,
            "requests_per_round": args.requests,
            "rounds": args.rounds,
            "loop": run.__module__,
            "cpu_us_per_request": round(statistics.median(values), 1),
            "min_us": round(min(values), 1),
            "max_us": round(max(values), 1),
            "vs_framework": round(statistics.median(values) / framework, 3),
        }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=15, help="records in each answer (the load's k)")
    parser.add_argument("--requests", type=int, default=3200, help="requests per round and app")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight at a time")
    parser.add_argument("--rounds", type=int, default=9)


SPEC = Benchmark("search_route", __doc__, measure, add_arguments, csv_name="memory_service/search_route")

if __name__ == "__main__":
    SPEC.main()
    sys.exit(0)
