"""``rotmem mcp`` spawned over stdio and driven by the MCP SDK's own client: add memories, search
them, get the evidence with ``[historical]`` labels; a bad argument is a tool error with one line."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason='the MCP tests need the mcp SDK: pip install "rotmem[server]"')

from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.slow


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "text", None) is not None)


async def session(store: Path) -> list:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rotmem.cli", "mcp", "--store", str(store), "--namespace", "ann", "--encoder", "hashing"],
        env={"PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
        cwd=str(REPO),
    )
    async with Client(server, read_timeout_seconds=120) as client:
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        first = await client.call_tool(
            "add_memory",
            {
                "session_id": "s1",
                "date": "2020-01-05",
                "facts": [{"subject": "Ann", "relation": "lives in", "object": "Oslo"}],
            },
        )
        second = await client.call_tool(
            "add_memory",
            {
                "session_id": "s2",
                "date": "2021-03-01",
                "text": "Ann: I moved to Lima last month.",
                "facts": [
                    {"subject": "Ann", "relation": "moved to", "object": "Lima"},
                    {"subject": "Ann", "relation": "likes", "object": "tea"},
                ],
            },
        )
        found = await client.call_tool("search_memory", {"question": "Where does Ann live?", "k": 5})
        bad = await client.call_tool(
            "add_memory",
            {
                "session_id": "s3",
                "date": "2024-01-01",
                "facts": [{"subject": "Ann", "relation": "moved to", "object": "Rome", "t_happen": 20240101}],
            },
        )
        return [tools, first, second, found, bad]


def test_the_sdk_client_adds_and_searches_over_stdio(tmp_path):
    tools, first, second, found, bad = asyncio.run(session(tmp_path))
    assert tools == ["add_memory", "search_memory"]
    assert text_of(first) == "session 's1' (index 0): stored 1 fact(s)"
    assert text_of(second).splitlines() == [
        "session 's2' (index 1): stored 2 fact(s)",
        "unverified Ann|likes|tea: object not found in the session text",
    ]
    assert text_of(found).splitlines() == [
        "2021-02-14: Ann moved to Lima",  # "last month": the middle of February; the current version first
        "2020-01-05: Ann lives in Oslo [historical]",
        "2021-03-01: Ann likes tea",  # stored unverified, never dropped
    ]
    assert bad.is_error and "fact 0: t_happen 20240101 is outside the calendar" in text_of(bad)
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db") == ["ann.db"]


async def alice(store: Path) -> list[str]:
    """Paris (2023-05-08), then Berlin (2023-09-01), asked about the past and the present."""
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rotmem.cli", "mcp", "--store", str(store), "--namespace", "al", "--encoder", "hashing"],
        env={"PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
        cwd=str(REPO),
    )
    async with Client(server, read_timeout_seconds=120) as client:
        empty = await client.call_tool("search_memory", {"question": "where does Alice live"})
        for session_id, date, city in (("s1", "2023-05-08", "Paris"), ("s2", "2023-09-01", "Berlin")):
            facts = [{"subject": "Alice", "relation": "lives in", "object": city}]
            await client.call_tool("add_memory", {"session_id": session_id, "date": date, "facts": facts})
        past = await client.call_tool("search_memory", {"question": "where did Alice live in May 2023"})
        now = await client.call_tool("search_memory", {"question": "where does Alice live"})
        return [text_of(empty), text_of(past), text_of(now)]


def test_search_memory_answers_through_the_service_search(tmp_path):
    empty, past, now = asyncio.run(alice(tmp_path))
    assert empty == "(no memories stored)"
    assert past.splitlines() == [
        "2023-05-08: Alice lives in Paris [historical]",  # the version valid in May 2023 first
        "2023-09-01: Alice lives in Berlin",
    ]
    assert now.splitlines() == [
        "2023-09-01: Alice lives in Berlin",
        "2023-05-08: Alice lives in Paris [historical]",
    ]
