"""The extender app's ASGI front: ``POST /filter``, ``/prioritize``, ``/bind``, ``/preempt`` are
answered without FastAPI's middleware stack and routing, everything else by FastAPI.

Over real HTTP (uvicorn on 127.0.0.1, and raw sockets where the test needs control over the
request's framing): the verbs' replies, their headers and status codes are what the FastAPI
routes answer for the same request, the body limit holds for a declared and a streamed body,
other methods and paths get FastAPI's answers, the OpenAPI document still describes the verbs,
and every request is counted once.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI

from extender.api.extender import ExtenderApp, create_app
from extender.cache.cache import ClusterCache
from extender.servers import AppServer, BodyTooLarge, ClientGone, receive_body
from extender.state import ServiceState
from tests.extender.test_wire import _cluster, _sample, _sample_pod
from tests.extender.wire import JSON, RecordingWriter, binding, cache_of, state_of

pytestmark = pytest.mark.anyio

Obj = dict[str, Any]
VERBS = ["filter", "prioritize", "bind", "preempt"]
LIMIT = 20_000  # above every sample (the filter request is 4.6 KB)


@pytest.fixture
def cache() -> ClusterCache:
    pod = _sample_pod()
    pod.setdefault("status", {"phase": "Pending"})
    return cache_of([*_cluster(), pod])


@pytest.fixture
def state(cache: ClusterCache) -> ServiceState:
    return state_of(cache, writer=RecordingWriter(cache), max_body_bytes=LIMIT)


@asynccontextmanager
async def serving(state: ServiceState) -> AsyncIterator[tuple[ExtenderApp, AppServer, httpx.AsyncClient]]:
    app = create_app(state)
    async with AppServer(app) as srv, httpx.AsyncClient(base_url=srv.url) as client:
        yield app, srv, client


def below_the_front(app: ExtenderApp) -> httpx.AsyncClient:
    """The same app entered below its front: FastAPI's middleware stack, routing, the verb routes."""

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        await FastAPI.__call__(app, scope, receive, send)

    return httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://extender")


def request_of(verb: str) -> bytes:
    """A well-formed request of each verb for the sample pod."""
    pod = _sample_pod()
    if verb in ("filter", "prioritize"):
        return _sample("extender-filter-request.json")
    if verb == "bind":
        return binding(pod, "gpu-n01")
    return orjson.dumps({"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": {}})


async def raw_http(port: int, head: str, *pieces: bytes) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection, written as given (``Connection: close`` is added), the
    body ``pieces`` one after the other with a pause between them: (status, headers, body) of the
    answer, read to the end of the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1).encode())
        for piece in pieces:
            await writer.drain()
            await asyncio.sleep(0.005)
            writer.write(piece)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    top, _, reply = data.partition(b"\r\n\r\n")
    status_line, *lines = top.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    return int(status_line.split()[1]), headers, reply


def chunked(body: bytes, size: int) -> list[bytes]:
    """``body`` as HTTP/1.1 chunks of ``size`` bytes (no Content-Length: the server streams it),
    the last one with the terminating chunk (nothing is written after the server may answer)."""
    parts = [b"%x\r\n%b\r\n" % (len(p), p) for p in (body[i : i + size] for i in range(0, len(body), size))]
    parts[-1] += b"0\r\n\r\n"
    return parts


def counted(state: ServiceState, verb: str, code: str | None = None) -> float:
    registry = state.metrics.registry
    if code is None:
        return registry.get_sample_value("sky_extender_request_seconds_count", {"verb": verb}) or 0.0
    return registry.get_sample_value("sky_extender_requests_total", {"verb": verb, "code": code}) or 0.0


# --- the four verbs ------------------------------------------------------------------------------
async def test_the_four_verbs_are_answered_by_the_front_with_exact_headers(
    state: ServiceState, cache: ClusterCache
) -> None:
    async with serving(state) as (app, _, c):
        replies = {verb: await c.post(f"/{verb}", content=request_of(verb), headers=JSON) for verb in VERBS}
        # FastAPI builds its middleware stack on the first request that reaches it: none did
        before = app.middleware_stack  # read once: mypy would keep the narrowing to None below
        assert before is None
        assert (await c.get("/healthz")).json() == {"status": "ok"}
        assert app.middleware_stack is not None
    for r in replies.values():
        assert r.status_code == 200
        # the headers Starlette's Response writes, in its order, and nothing else
        assert r.headers.raw == [
            (b"content-length", str(len(r.content)).encode()),
            (b"content-type", b"application/json"),
        ]
    assert replies["filter"].json()["NodeNames"] == ["gpu-n01"]
    assert {h["Host"]: h["Score"] for h in replies["prioritize"].json()}["gpu-n01"] == 10
    assert replies["bind"].content == b'{"Error":""}'
    assert isinstance(state.writer, RecordingWriter)
    assert [b[3] for b in state.writer.bindings] == ["gpu-n01"]
    assert cache.assumed["6b0f3c2e-9d4a-4f3e-8a51-3c1d2e7f9a10"].node == "gpu-n01"
    assert replies["preempt"].content == b'{"NodeNameToMetaVictims":{}}'


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("kind", ["well-formed", "not JSON", "not an object", "too large"])
async def test_the_front_answers_byte_for_byte_what_the_fastapi_route_answers(
    state: ServiceState, verb: str, kind: str
) -> None:
    body = {
        "well-formed": request_of(verb),
        "not JSON": b"{not json",
        "not an object": b"[1, 2]",
        "too large": b" " * (LIMIT + 1),
    }[kind]
    async with serving(state) as (app, _, c), below_the_front(app) as below:
        front = await c.post(f"/{verb}", content=body, headers=JSON)
        route = await below.post(f"/{verb}", content=body, headers=JSON)  # a bind: the idempotent retry
    assert (front.status_code, front.headers.raw, front.content) == (
        route.status_code,
        route.headers.raw,
        route.content,
    )
    assert app.middleware_stack is not None  # the second one did go through FastAPI
    assert counted(state, verb) == 2  # once each way


def error_reply(verb: str, message: str) -> Any:
    """The verb's own reply type carrying ``message`` (prioritize: an empty list)."""
    if verb == "prioritize":
        return []
    if verb == "filter":
        return {"Nodes": None, "NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": message}
    if verb == "preempt":
        return {"NodeNameToMetaVictims": None, "Error": message}
    return {"Error": message}


@pytest.mark.parametrize("verb", VERBS)
async def test_malformed_json_is_200_with_the_verbs_own_error_reply(state: ServiceState, verb: str) -> None:
    async with serving(state) as (_, _, c):
        r = await c.post(f"/{verb}", content=b'{"Pod": ', headers=JSON)
    assert r.status_code == 200
    body = r.json()
    error = "" if verb == "prioritize" else body["Error"]
    assert verb == "prioritize" or error.startswith("malformed request body: not JSON (")
    assert body == error_reply(verb, error)
    assert r.content == orjson.dumps(error_reply(verb, error))  # the key order of the Go structs too


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("framing", ["declared", "streamed"])
async def test_an_oversized_body_is_refused_with_413(state: ServiceState, verb: str, framing: str) -> None:
    """Declared: only the headers go out, the 413 comes from the Content-Length without waiting
    for the body. Streamed (chunked, no Content-Length): refused while it streams in."""
    if framing == "declared":
        head, pieces = f"POST /{verb} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n", []
        message = f"request body of 1000000000 bytes exceeds the limit of {LIMIT} bytes"
    else:
        head = f"POST /{verb} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        pieces = chunked(b" " * (LIMIT + 1), 5000)
        message = f"request body exceeds the limit of {LIMIT} bytes"
    async with serving(state) as (_, srv, _c):
        status, headers, reply = await raw_http(srv.port, head, *pieces)
    assert status == 413
    assert headers["content-type"] == "application/json"
    assert int(headers["content-length"]) == len(reply)
    assert orjson.loads(reply) == error_reply(verb, message)
    assert (counted(state, verb), counted(state, verb, "413")) == (1, 1)


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_the_limit_is_inclusive_and_a_body_in_pieces_is_read_whole(cache: ClusterCache, framing: str) -> None:
    """A body of exactly ``max_body_bytes`` passes, sent in pieces (every ``http.request`` message
    until ``more_body`` is false); one byte more does not."""
    body = _sample("extender-filter-request.json")
    if framing == "chunked":
        head, pieces = "POST /filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", chunked(body, 1000)
    else:
        head = f"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
        pieces = [body[i : i + 1000] for i in range(0, len(body), 1000)]
    for limit, expected in ((len(body), 200), (len(body) - 1, 413)):
        state = state_of(cache, max_body_bytes=limit)
        async with serving(state) as (_, srv, c):
            # a refused Content-Length is answered before the body: send it in one go, as the
            # server closes the connection after its 413
            status, _, reply = await raw_http(srv.port, head, *(pieces if expected == 200 else [b"".join(pieces)]))
            assert status == expected, limit
            if expected == 200:
                whole = await c.post("/filter", content=body, headers=JSON)  # in one piece
                assert reply == whole.content
                assert orjson.loads(reply)["NodeNames"] == ["gpu-n01"]


async def test_receive_body_reads_until_more_body_is_false() -> None:
    messages: list[Obj] = [
        {"type": "http.request", "body": b'{"a":', "more_body": True},
        {"type": "http.request", "body": b"", "more_body": True},
        {"type": "http.request", "body": b"1}", "more_body": False},
        {"type": "http.disconnect"},  # never read: the body ended before
    ]

    async def receive() -> Obj:
        return messages.pop(0)

    assert await receive_body({"headers": []}, receive, 7) == b'{"a":1}'
    assert messages == [{"type": "http.disconnect"}]
    messages[:] = [{"type": "http.request", "body": b"12345", "more_body": True}, {"type": "http.disconnect"}]
    with pytest.raises(ClientGone):
        await receive_body({"headers": [(b"content-length", b"10")]}, receive, 10)
    messages[:] = [{"type": "http.request", "body": b"12345", "more_body": True}] * 3
    with pytest.raises(BodyTooLarge, match="request body exceeds the limit of 10 bytes"):
        await receive_body({"headers": []}, receive, 10)
    with pytest.raises(BodyTooLarge, match="request body of 11 bytes exceeds the limit of 10 bytes"):
        await receive_body({"headers": [(b"content-type", b"x"), (b"content-length", b"11")]}, receive, 10)


# --- everything else is FastAPI's ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/filter", 405),
        ("HEAD", "/prioritize", 405),
        ("PUT", "/bind", 405),
        ("DELETE", "/preempt", 405),
        ("POST", "/filter/", 307),  # FastAPI's redirect to the path without the slash
        ("POST", "/Filter", 404),
        ("POST", "/filters", 404),
        ("GET", "/healthz", 200),
        ("GET", "/docs", 200),
    ],
)
async def test_other_methods_and_paths_get_fastapis_answer(
    state: ServiceState, method: str, path: str, status: int
) -> None:
    async with serving(state) as (app, _, c), below_the_front(app) as below:
        front = await c.request(method, path, content=b"{}")
        route = await below.request(method, path, content=b"{}")
    assert front.status_code == status
    assert (front.headers.get("allow"), front.content) == (route.headers.get("allow"), route.content)
    if status == 405:
        assert front.headers["allow"] == "POST"
        assert front.content == (b"" if method == "HEAD" else b'{"detail":"Method Not Allowed"}')
    for verb in VERBS:
        assert counted(state, verb) == 0


async def test_the_openapi_document_still_describes_the_four_verbs(state: ServiceState) -> None:
    async with serving(state) as (app, _, c):
        r = await c.get("/openapi.json")
        docs = await c.get("/docs")
    assert r.status_code == 200 and docs.status_code == 200
    doc = r.json()
    assert doc == json.loads(json.dumps(app.openapi()))
    for verb in VERBS:
        assert list(doc["paths"][f"/{verb}"]) == ["post"], verb
    assert doc["paths"]["/filter"]["post"]["summary"] == "Filter candidate nodes (ExtenderArgs → ExtenderFilterResult)"
    assert doc["paths"]["/filter"]["post"]["operationId"] == "filter__filter_post"
    assert "/healthz" in doc["paths"]


# --- metrics, bugs, disconnects -------------------------------------------------------------------
async def test_every_request_is_counted_once(state: ServiceState) -> None:
    async with serving(state) as (_, _srv, c):
        for verb in VERBS:
            for body in (request_of(verb), b"{oops", b"x" * (LIMIT + 1)):
                await c.post(f"/{verb}", content=body, headers=JSON)
        await c.get("/filter")  # 405: FastAPI's, not a verb's
    for verb in VERBS:
        assert counted(state, verb) == 3, verb
        assert (counted(state, verb, "200"), counted(state, verb, "413")) == (2, 1), verb
    total = state.metrics.registry.get_sample_value("sky_extender_request_seconds_sum", {"verb": "filter"})
    assert total is not None and total > 0


async def test_a_bug_in_a_verb_is_a_200_with_the_error_never_a_500(
    state: ServiceState, caplog: pytest.LogCaptureFixture
) -> None:
    async def boom(body: bytes) -> bytes:
        raise RuntimeError("boom")

    async with serving(state) as (app, _, c):
        app.verbs.handlers["filter"] = boom
        r = await c.post("/filter", content=request_of("filter"), headers=JSON)
        after = await c.post("/bind", content=request_of("bind"), headers=JSON)
    assert r.status_code == 200
    assert r.json() == error_reply("filter", "internal error in filter: RuntimeError: boom")
    assert [rec.exc_info is not None for rec in caplog.records if rec.getMessage() == "filter failed"] == [True]
    assert after.content == b'{"Error":""}'  # the server carries on
    assert counted(state, "filter", "200") == 1


async def test_a_client_gone_before_its_body_arrived_gets_no_answer_and_no_count(
    state: ServiceState, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="extender.api.extender")
    async with serving(state) as (_, srv, c):
        _, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        writer.write(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + b'{"Pod": {')
        await writer.drain()
        await asyncio.sleep(0.05)  # the server is waiting for the rest
        writer.close()
        await until(lambda: any("went away" in rec.message for rec in caplog.records))
        r = await c.post("/filter", content=request_of("filter"), headers=JSON)  # the server carries on
    assert r.json()["NodeNames"] == ["gpu-n01"]
    assert not [rec for rec in caplog.records if rec.levelno >= logging.WARNING]
    assert counted(state, "filter") == 1  # the second request only


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():  # noqa: ASYNC110 (a log record to wait for: no event to await)
            await asyncio.sleep(0.01)
