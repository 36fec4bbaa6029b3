"""``rotmem mcp``: the memory as an MCP server over stdio (the ``mcp`` SDK), for one namespace.

Tools:

- ``add_memory(session_id, date, facts=[], text=None)``: append one session told on ``date``
  (``YYYY-MM-DD``); ``facts`` are ``{subject, relation, object, t_happen?}`` objects; without facts
  and with a ``text`` the configured extractor reads them. Returns what was stored and dropped.
- ``search_memory(question, k=15, now=None)``: the rendered evidence of the top-``k`` records
  (``BestMemory`` through the pool, as ``POST /v1/search``: the hybrid retriever and the question's
  time constraint), one line each, dated, in TEM's presentation order, superseded versions
  labelled ``[historical]``.

A bad argument comes back as a tool error carrying the same one-line message as the CLI.
"""

from __future__ import annotations

from typing import Any

from rotmem.extras import require

require("mcp", "rotmem mcp")
from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

from rotmem.memory.records import (  # noqa: E402
    ExtractedFact,
    check_day,
    check_question,  # noqa: E402
)
from rotmem.memory.temporal.records import render_timed  # noqa: E402
from rotmem.server.pool import MemoryPool  # noqa: E402


def build_server(pool: MemoryPool, namespace: str = "default") -> MCPServer:
    """An MCP server with the two memory tools over ``pool``'s ``namespace`` (module docs)."""
    server = MCPServer(
        "rotmem-memory",
        instructions=(
            "A long-term memory of versioned facts. Store what the user tells with add_memory; answer with "
            "search_memory. Lines marked [historical] were true once and are no longer current."
        ),
    )

    @server.tool()
    def add_memory(
        session_id: str, date: str, facts: list[dict[str, Any]] | None = None, text: str | None = None
    ) -> str:
        """Store one conversation session told on `date` (YYYY-MM-DD): facts as {subject, relation,
        object, t_happen?} objects, and/or the session text (facts whose object is not in the text are
        stored, marked unverified). Returns what was stored."""
        try:
            return _add(session_id, date, facts, text)
        except ValueError as error:
            raise ToolError(" ".join(str(error).split())) from None

    @server.tool()
    def search_memory(question: str, k: int = 15, now: str | None = None) -> str:
        """The memory's evidence for `question`: one dated line per fact, the current version of a fact
        before its older ones (for a question about the past: the version valid then first);
        lines marked [historical] are out of date. `now`: the day the question is asked (YYYY-MM-DD)."""
        try:
            return _search(question, k, now)
        except ValueError as error:
            raise ToolError(" ".join(str(error).split())) from None

    def _add(session_id: str, date: str, facts: list[dict[str, Any]] | None, text: str | None) -> str:
        items = None if facts is None and text else facts or []
        if items is not None:
            bad = [
                f for f in items if not isinstance(f, dict) or not {"subject", "relation", "object"} <= set(f)
            ]
            if bad:
                raise ValueError(
                    f"session {session_id!r}: a fact is {{subject, relation, object}}, got {bad[0]!r}"
                )
            items = [
                ExtractedFact(
                    f["subject"], f["relation"], f["object"], f.get("t_happen"), tuple(f.get("sources", ()))
                )
                for f in items
            ]
        with pool.use(namespace, create=True) as memory:
            result = memory.add_session(session_id, items, date=date, text=text)
            ids = [i for i, ok in zip(result.fact_ids, result.verified, strict=True) if not ok]
            unverified = memory.store.records_by_id(ids) if text and ids else {}
        stored = f"stored {len(result.record_ids)} fact(s)"
        lines = [f"session {result.session_id!r} (index {result.session_index}): {stored}"]
        lines += [
            f"unverified {r.subject}|{r.relation}|{r.object}: object not found in the session text"
            for r in unverified.values()
        ]
        return "\n".join(lines)

    def _search(question: str, k: int, now: str | None) -> str:
        check_question(question)
        day = None if now is None else check_day(now, "search_memory", "now")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 100:
            raise ValueError(f"k must be an integer in 1..100, got {k!r}")
        found = pool.search(namespace, question, k, day)
        return render_timed(found.presented) if found.records else "(no memories stored)"

    return server
