"""The memory-service benchmark's bound is the encoder timed on the texts the load sends: the facts
its clients add must be drawn as the curve draws them, whatever the session ids (ids once went into
the fact's object, doubling its tokens against the curve's)."""

from __future__ import annotations

import asyncio
import random
import time

from benchmarks.memory_service import PERSONAS, RELATIONS, client_loop, new_fact
from rotmem.memory.tem.store import fact_text


class RecordingClient:
    """Stands in for the keep-alive HTTP client: records each body and acknowledges it."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []

    async def post(self, path: str, body: dict) -> int:
        self.bodies.append(body)
        await asyncio.sleep(0)
        return 200


def test_the_load_adds_facts_drawn_as_the_encoder_curve_draws_them():
    client, out = RecordingClient(), {"search": [], "add": [], "errors": 0, "acknowledged": []}
    long_prefix = "postgres-r1765051234567890123-n16-1.0-c15-"
    stop_at = time.perf_counter() + 0.2
    asyncio.run(client_loop(client, stop_at, random.Random(3), [0], out, long_prefix, adds=1.0))
    sent = [fact_text(*body["facts"][0].values()) for body in client.bodies]
    # the longest text the curve can draw: the longest persona, relation and object
    longest = fact_text(f"persona{PERSONAS - 1}", max(RELATIONS, key=len), f"new{10**9 - 1}")
    assert len(sent) > 10
    assert all(body["session_id"].startswith(long_prefix) for body in client.bodies)
    assert not any("r1765" in text for text in sent)  # the session id is not in what is encoded
    assert max(map(len, sent)) <= len(longest)
    assert set(client.bodies[0]["facts"][0]) == set(new_fact(random.Random(0)))
