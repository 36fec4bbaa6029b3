"""The HTTP API of ``rotmem serve`` (FastAPI): a tenant's memory behind its API key.

Every ``/v1`` route needs ``Authorization: Bearer <key>``; the key names the namespace, so a key
reads, searches, counts and deletes its own namespace only (there is no namespace parameter).

- ``POST /v1/sessions``: add a session (facts and/or text, told on ``date``; without facts the
  configured extractor reads them from the text) -> its index, each fact's record id, and whether
  each fact's object was found in the text (``verified``; a fact is never dropped).
- ``POST /v1/search``: ``question``, ``k``, ``now`` -> the top-``k`` records **best first**
  (``BestMemory``: the hybrid retriever and the question's time constraint, no re-rank), the query
  mode, and the rendered evidence: the same records in TEM's presentation order (the current
  version first, or for a question about a past time the version valid then) with
  ``[historical]`` labels, for an LLM to read. The question is embedded inside the request.
- ``GET /v1/subjects/{subject}/history?relation=``: every version of a subject, in source order (a
  path route: a subject with ``/`` is sent as is or as ``%2F``).
- ``GET /v1/records/{id}``: one record.  ``GET /v1/stats``: the namespace's counts.
- ``DELETE /v1/namespace``: delete every record of the namespace (the right to be forgotten).
- ``GET /healthz`` (the process answers), ``GET /readyz`` (the encoder is loaded and the storage
  answers; 503 with the reason otherwise), ``GET /docs`` (OpenAPI), ``GET /metrics`` (no key: the
  encoder's batch sizes and device in Prometheus' text format, counts only, ``metrics_text``).

Bodies are JSON (``Content-Type: application/json``, else 415), validated strictly (a boolean or a
string is not a number or a day). Every refusal, the framework's own included, is JSON
``{"error": "<one line>"}`` with the messages the CLI prints: 400 bad input (a blank question, a body
not UTF-8 or nested too deeply), 401 no or unknown key, 404 no such record or route, 405 wrong
method, 409 a session id already stored, 413 a body over the limit (declared or chunked), 415 not
JSON, 422 a body that does not match the schema or is malformed JSON, 500 an internal error (no
detail leaves the server).

A well-formed search (a known key, a body the schema takes) is answered by ``SearchShortcut``
without FastAPI's layers, with the route's own function; every other request goes through FastAPI.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

from rotmem.extras import require

require("fastapi", "rotmem serve")
from fastapi import Depends, FastAPI, Request  # noqa: E402
from fastapi.exceptions import RequestValidationError  # noqa: E402
from fastapi.responses import JSONResponse, PlainTextResponse  # noqa: E402
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError  # noqa: E402
from starlette.exceptions import HTTPException  # noqa: E402

from rotmem.data import date_of  # noqa: E402
from rotmem.memory.records import DuplicateSessionError, ExtractedFact, Record, check_day  # noqa: E402
from rotmem.memory.render import render  # noqa: E402
from rotmem.memory.tem.store import fact_text  # noqa: E402
from rotmem.memory.temporal.records import render_timed  # noqa: E402
from rotmem.server.batching import metrics_text  # noqa: E402
from rotmem.server.keys import KeyRing  # noqa: E402
from rotmem.server.pool import MemoryPool  # noqa: E402

MAX_BODY_BYTES = 1 << 20  # 1 MiB per request by default
SEARCH_THREADS = 40  # searches waiting on the encoder or their batch at once (anyio's default too)
SERVER_LOG = logging.getLogger("uvicorn.error")  # where uvicorn writes a failed request's traceback
JSON_TYPE = "application/json"


def _day_value(value: Any) -> Any:
    """A day as JSON sends it: a ``"YYYY-MM-DD"`` string or a number of days; a boolean (which a
    lax schema would read as day 0 or 1, in 1970) or anything else is refused."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        got = json.dumps(value)
        raise ValueError(f"expected 'YYYY-MM-DD' or days since 1970-01-01, got {got[:40]}")
    return value


Day = Annotated[str | int | float, BeforeValidator(_day_value)]


class Strict(BaseModel):
    """Request bodies: no coercion (``true`` is not 1, ``"5"`` is not 5)."""

    model_config = ConfigDict(strict=True)


class FactIn(Strict):
    subject: str = Field(min_length=1, max_length=1000)
    relation: str = Field(min_length=1, max_length=1000)
    object: str = Field(min_length=1, max_length=1000)
    t_happen: Day | None = Field(None, description="when it became true: YYYY-MM-DD or days since 1970-01-01")
    sources: list[str] = Field(default_factory=list, max_length=100)


class SessionIn(Strict):
    session_id: str = Field(min_length=1, max_length=200)
    date: Day = Field(description="the day the session was told: YYYY-MM-DD or days since 1970-01-01")
    facts: list[FactIn] | None = Field(
        default_factory=list, max_length=1000, description="null: the server's extractor reads the text"
    )
    text: str | None = Field(None, max_length=200_000)
    session_index: int | None = None
    summaries: list[str] = Field(default_factory=list, max_length=100)
    turns: list[str] | None = Field(None, max_length=5000, description="default: the lines of text")


class SearchIn(Strict):
    question: str = Field(max_length=2000, description="a blank question is refused (400)")
    k: int = Field(15, ge=1, le=100)
    now: Day | None = Field(None, description="the day the question is asked (default: the latest session)")


class ServiceError(Exception):
    """An error with an HTTP status and a one-line message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def refusal(error: Exception) -> JSONResponse:
    """The ``{"error": ...}`` response to what a route raised: a ``ServiceError`` with its status, a
    stored session id again 409, other bad input (``ValueError``) 400; anything else is the server's
    fault, whose detail stays in its log: 500."""
    if isinstance(error, ServiceError):
        return JSONResponse({"error": one_line(error)}, status_code=error.status)
    if isinstance(error, DuplicateSessionError):
        return JSONResponse({"error": one_line(error)}, status_code=409)
    if isinstance(error, ValueError):
        return JSONResponse({"error": one_line(error)}, status_code=400)
    return JSONResponse({"error": "internal server error"}, status_code=500)


def namespace_of(keys: KeyRing, authorization: str) -> str:
    """The namespace of the key in an ``Authorization: Bearer <key>`` header (401 otherwise)."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ServiceError(401, "missing API key: send 'Authorization: Bearer <key>'")
    found = keys.namespace_of(token.strip())
    if found is None:
        raise ServiceError(401, "unknown API key")
    return found


def search_json(pool: MemoryPool, namespace: str, body: SearchIn) -> dict[str, Any]:
    """``POST /v1/search``'s answer to ``body`` in ``namespace`` (module docs)."""
    now = None if body.now is None else check_day(body.now, "search", "now")
    found = pool.search(namespace, body.question, body.k, now)
    records = [{**record_json(r.record, r.t_happen, r.t_obs), "score": r.score} for r in found.records]
    return {"records": records, "evidence": render_timed(found.presented), "mode": found.mode}


class SearchShortcut:
    """``POST /v1/search`` without the framework's layers when the request is well formed: a known
    key and a body the schema takes (``SearchIn.model_validate_json``). The answer is the route's
    (``search_json`` in the thread pool, errors by ``refusal``), for about a third of the server's
    CPU per request outside the search itself (docs/memory.md, "Under load"). Any other request,
    a malformed one included, goes on to the framework, which refuses it as every route does."""

    PATH = "/v1/search"

    def __init__(self, pool: MemoryPool, keys: KeyRing):
        self.pool, self.keys = pool, keys
        self.threads = ThreadPoolExecutor(SEARCH_THREADS, thread_name_prefix="search")

    async def __call__(self, scope: dict, headers: dict[bytes, bytes], body: bytes, send: Any) -> bool:
        """Answer the request and return True, or return False having sent nothing."""
        if scope["method"] != "POST" or scope["path"] != self.PATH:
            return False
        try:
            namespace = namespace_of(self.keys, headers.get(b"authorization", b"").decode("latin-1"))
            request = SearchIn.model_validate_json(body)
        except (ServiceError, ValidationError):
            return False
        try:
            answer = await asyncio.get_running_loop().run_in_executor(
                self.threads, search_json, self.pool, namespace, request
            )
            response = JSONResponse(answer)
        except Exception as error:  # noqa: BLE001 - each kind is answered as the routes' are
            if refusal(error).status_code == 500:
                SERVER_LOG.exception("POST %s failed", self.PATH)
            response = refusal(error)
        await response(scope, None, send)
        return True


def validation_message(errors: Sequence[Mapping[str, Any]]) -> str:
    """The first schema error as ``body.field: message`` (one line)."""
    first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    where = ".".join(str(part) for part in first.get("loc", ()))
    message = str(first.get("msg", "invalid"))
    if first.get("type") == "json_invalid":  # loc is ("body", character position)
        at = first.get("loc", ("body", "?"))[-1]
        return f"body: malformed JSON at character {at} ({first.get('ctx', {}).get('error', 'decode error')})"
    return one_line(f"{where}: {message.removeprefix('Value error, ')}")


def http_message(error: HTTPException, request: Request) -> str:
    """A framework refusal in one line, saying why for a body it could not parse."""
    cause = error.__cause__
    if isinstance(cause, UnicodeDecodeError):
        return "the request body is not valid UTF-8"
    if isinstance(cause, RecursionError):
        return "the request body's JSON is nested too deeply"
    if error.status_code == 404:
        return one_line(f"no route {request.url.path!r}")
    if error.status_code == 405:
        return one_line(f"method {request.method} not allowed on {request.url.path!r}")
    return one_line(error.detail) if isinstance(error.detail, str) else f"HTTP {error.status_code}"


def record_json(record: Record, t_happen: float | None = None, t_obs: float | None = None) -> dict[str, Any]:
    return {
        "id": record.id,
        "subject": record.subject,
        "relation": record.relation,
        "object": record.object,
        "session_id": record.session_id,
        "session_index": record.session_index,
        "historical": record.historical,
        "relation_type": record.relation_type,
        "verified": record.verified,
        "sources": list(record.sources),
        "t_happen": None if t_happen is None else date_of(t_happen),
        "t_obs": None if t_obs is None else date_of(t_obs),
    }


class BodyGuard:
    """ASGI middleware that reads the whole request body before the app sees it: 413 for a body over
    ``limit`` bytes (declared by ``Content-Length`` or streamed in chunks), 415 for a non-empty body
    that is not ``application/json``; both in the ``{"error": ...}`` shape. Then ``shortcut``
    (``SearchShortcut``) may answer the request; else the app does."""

    def __init__(self, app: Any, limit: int, shortcut: SearchShortcut | None = None):
        self.app, self.limit, self.shortcut = app, int(limit), shortcut

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await refuse(send, 413, f"request body over {self.limit} bytes")
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                await refuse(send, 413, f"request body over {self.limit} bytes")
                return
            more = message.get("more_body", False)
        body = b"".join(chunks)
        content_type = headers.get(b"content-type", b"").decode("latin-1")
        if body and not is_json(content_type):
            got = f"content type {content_type!r}" if content_type else "no content type"
            await refuse(send, 415, f"the body must be JSON: send 'Content-Type: {JSON_TYPE}' (got {got})")
            return
        if self.shortcut is not None and await self.shortcut(scope, headers, body, send):
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def is_json(content_type: str) -> bool:
    """``application/json`` or ``application/<anything>+json``, any parameters."""
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == JSON_TYPE or (kind.startswith("application/") and kind.endswith("+json"))


async def refuse(send: Any, status: int, message: str) -> None:
    """Send ``{"error": message}`` with ``status`` (from middleware, before the app)."""
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", JSON_TYPE.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def texts_to_embed(body: SessionIn) -> list[str]:
    """The texts the store will embed for ``body`` (its facts, turns and summaries), so they can be
    embedded before the namespace lock is taken."""
    facts = [fact_text(f.subject, f.relation, f.object) for f in body.facts or ()]
    turns = body.turns
    if turns is None:  # as ``Session``: the non-empty lines of the text
        turns = [line.strip() for line in (body.text or "").splitlines() if line.strip()]
    return [*facts, *turns, *body.summaries]


def create_app(pool: MemoryPool, keys: KeyRing, max_body: int = MAX_BODY_BYTES) -> Any:
    """The ASGI application serving ``pool`` to the holders of ``keys`` (module docs): ``BodyGuard``
    with ``SearchShortcut`` around the FastAPI app (its ``.app``)."""
    app = FastAPI(
        title="rotmem memory",
        description="TEM versioned facts with [historical] labels, RoMem time-aware retrieval, per tenant.",
    )

    @app.exception_handler(ServiceError)
    @app.exception_handler(DuplicateSessionError)
    @app.exception_handler(ValueError)
    async def route_error(_: Request, error: Exception) -> JSONResponse:
        return refusal(error)

    @app.exception_handler(RequestValidationError)
    async def bad_body(_: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": validation_message(error.errors())}, status_code=422)

    @app.exception_handler(HTTPException)
    async def framework_error(request: Request, error: HTTPException) -> JSONResponse:
        return JSONResponse(
            {"error": http_message(error, request)}, status_code=error.status_code, headers=error.headers
        )

    @app.exception_handler(Exception)
    async def internal_error(_: Request, error: Exception) -> JSONResponse:
        # the traceback goes to the server's log (uvicorn), never to the client
        return JSONResponse({"error": "internal server error"}, status_code=500)

    async def namespace(request: Request) -> str:
        # async: a few microseconds of hashing run on the event loop, where a plain function would
        # cost every request a round trip through the thread pool
        return namespace_of(keys, request.headers.get("authorization", ""))

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz() -> JSONResponse:
        reason = pool.ready()
        if reason is not None:
            return JSONResponse({"status": "not ready", "error": reason}, status_code=503)
        return JSONResponse({"status": "ready"})

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics() -> PlainTextResponse:
        return PlainTextResponse(metrics_text(pool.encoder), media_type="text/plain; version=0.0.4")

    @app.post("/v1/sessions", response_model=dict[str, Any])
    def add_session(body: SessionIn, ns: str = Depends(namespace)) -> JSONResponse:
        facts = (
            None
            if body.facts is None
            else [
                ExtractedFact(f.subject, f.relation, f.object, f.t_happen, tuple(f.sources))
                for f in body.facts
            ]
        )
        session = dict(
            session_id=body.session_id,
            facts=facts,
            date=body.date,
            text=body.text,
            session_index=body.session_index,
            turns=body.turns,
            summaries=body.summaries,
        )
        result = pool.add_session(ns, session, texts_to_embed(body))
        # the JSON FastAPI would make of the dict, without its validation and re-encoding pass
        return JSONResponse(
            {
                "session_id": result.session_id,
                "session_index": result.session_index,
                "fact_ids": result.fact_ids,
                "verified": result.verified,
                "passage_ids": result.passage_ids,
            }
        )

    @app.post("/v1/search")
    def search(body: SearchIn, ns: str = Depends(namespace)) -> JSONResponse:
        return JSONResponse(search_json(pool, ns, body))

    @app.get("/v1/subjects/{subject:path}/history")
    def history(subject: str, relation: str | None = None, ns: str = Depends(namespace)) -> dict[str, Any]:
        with pool.use(ns, create=False) as memory:
            if memory is None:
                return {"records": [], "evidence": ""}
            timed = memory.with_times(memory.store.records(subject, relation))
        return {
            "records": [record_json(r.record, r.t_happen, r.t_obs) for r in timed],
            "evidence": render([r.record for r in timed]),
        }

    @app.get("/v1/records/{record_id}")
    def one_record(record_id: int, ns: str = Depends(namespace)) -> dict[str, Any]:
        with pool.use(ns, create=False) as memory:
            record = None if memory is None or not 0 <= record_id < 2**63 else memory.store.record(record_id)
            if record is None:
                raise ServiceError(404, f"no record {record_id} in this namespace")
            [timed] = memory.with_times([record])
        return record_json(record, timed.t_happen, timed.t_obs)

    @app.get("/v1/stats")
    def stats(ns: str = Depends(namespace)) -> dict[str, Any]:
        with pool.use(ns, create=False) as memory:
            if memory is None:
                return {
                    "namespace": ns,
                    "sessions": 0,
                    "facts": 0,
                    "historical": 0,
                    "passages": 0,
                    "latest": None,
                }
            db = memory.store.db
            latest = memory.latest_observation()
            return {
                "namespace": ns,
                "sessions": db.count("sessions"),
                "facts": db.count("facts"),
                "historical": db.count("facts", "WHERE historical = 1"),
                "passages": db.count("passages"),
                "latest": None if latest is None else date_of(latest),
            }

    @app.delete("/v1/namespace")
    def delete_namespace(ns: str = Depends(namespace)) -> dict[str, Any]:
        return {"namespace": ns, "deleted": pool.delete(ns)}

    return BodyGuard(app, max_body, SearchShortcut(pool, keys))
