"""The HTTP plumbing under the emulator's handlers (plain ASGI, no framework).

The request side: :class:`Request` (method, path, query parameters, headers, and the body read
once under a size limit and decoded from JSON, YAML or protobuf), the ``query_*`` parameter
parsers (Go's ``strconv.ParseBool`` spellings for booleans, ``dryRun=All`` only), the parsed
resource URL :class:`Target`, and :class:`RecordBuilder`, which journals the request when its
answer starts. The response side: ``send_json`` / ``send_bytes`` / ``send_status`` (every failure
is a ``Status``) and the start of a chunked watch stream.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import orjson
import yaml

from extender.emulator import errors, patch, protobuf
from extender.emulator.errors import ApiError
from extender.emulator.faults import Journal, RequestRecord
from extender.emulator.resources import ResourceType

__all__ = [
    "JSON_MEDIA",
    "Message",
    "Receive",
    "RecordBuilder",
    "Request",
    "Scope",
    "Send",
    "Target",
    "accepts_json",
    "query_bool",
    "query_dry_run",
    "query_int",
    "query_str",
    "request_timeout",
    "send_bytes",
    "send_json",
    "send_status",
    "start_stream",
    "wait_disconnect",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Obj = dict[str, Any]

JSON_MEDIA = b"application/json"
_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})
_FALSE = frozenset({"0", "f", "F", "false", "FALSE", "False"})

# ----------------------------------------------------------------------------------------------
# query parameters


def query_bool(params: dict[str, list[str]], key: str) -> bool | None:
    values = params.get(key)
    if not values:
        return None
    value = values[-1]
    if value in _TRUE:
        return True
    if value in _FALSE or value == "":
        return False
    raise errors.bad_request(f'{key}: invalid boolean "{value}"')


def query_str(params: dict[str, list[str]], key: str) -> str | None:
    values = params.get(key)
    return values[-1] if values else None


def query_int(params: dict[str, list[str]], key: str) -> int | None:
    value = query_str(params, key)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f'{key}: invalid integer "{value}"') from None


def query_dry_run(params: dict[str, list[str]], body: Obj | None = None) -> bool:
    """``dryRun`` of the query (and of a DeleteOptions ``body``): only ``All`` is a value."""
    values = list(params.get("dryRun") or [])
    if body is not None and isinstance(body.get("dryRun"), list):
        values += body["dryRun"]
    for v in values:
        if v != "All":
            raise errors.bad_request(f'dryRun: Unsupported value: "{v}": supported values: "All"')
    return bool(values)


def accepts_json(accept: str) -> bool:
    for media in accept.split(","):
        base = media.split(";")[0].strip().lower()
        if base in ("", "*/*", "application/*", "application/json") or base.endswith("+json"):
            return True
    return False


# ----------------------------------------------------------------------------------------------
# the request


@dataclass(slots=True)
class Target:
    """A parsed resource URL (``rt`` is None for ``POST namespaces/{ns}/bindings``)."""

    rt: ResourceType | None
    group: str
    version: str
    plural: str
    namespace: str | None
    name: str | None
    subresource: str | None
    watch_path: bool


class Request:
    """One HTTP request; the body is read on first use and kept."""

    __slots__ = ("_body", "accept", "content_type", "headers", "limit", "method", "params", "path", "query", "receive")

    def __init__(self, scope: Scope, receive: Receive, limit: int) -> None:
        self.limit = limit
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        self.query: str = scope.get("query_string", b"").decode("latin-1")
        self.params = parse_qs(self.query, keep_blank_values=True)
        self.headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        self.accept = self.headers.get("accept", "application/json")
        self.content_type = self.headers.get("content-type", "application/json").split(";")[0].strip().lower()
        self.receive = receive
        self._body: bytes | None = None

    async def body(self) -> bytes:
        limit = self.limit
        if self._body is None:
            chunks: list[bytes] = []
            size = 0
            while True:
                message = await self.receive()
                if message["type"] == "http.disconnect":
                    break
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise errors.too_large(limit)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            self._body = b"".join(chunks)
        return self._body

    async def json(self, *, optional: bool = False) -> Any:
        raw = await self.body()
        if not raw.strip():
            if optional:
                return None
            raise errors.bad_request("the request body is empty; expected a JSON object")
        ct = self.content_type
        if ct in ("application/yaml", "application/x-yaml", "text/yaml"):
            try:
                return yaml.safe_load(raw)
            except yaml.YAMLError as exc:
                raise errors.bad_request(f"the request body is not valid YAML: {exc}") from None
        if ct == protobuf.MEDIA_TYPE and self.method in ("POST", "PUT"):  # never a patch
            return protobuf.decode(raw)
        if "json" not in ct and ct not in ("", "*/*", "text/plain"):
            raise errors.unsupported_media_type(ct, ["application/json", "application/yaml", *patch.PATCH_TYPES])
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise errors.bad_request(f"the request body is not valid JSON: {exc}") from None


class RecordBuilder:
    """The journal record of one request, completed as the request is routed."""

    __slots__ = ("req", "t", "verb")

    def __init__(self, req: Request) -> None:
        self.req = req
        self.t: Target | None = None
        self.verb = ""

    def target(self, t: Target) -> None:
        self.t = t

    def finish(self, journal: Journal, code: int) -> None:
        t = self.t
        req = self.req
        journal.append(
            RequestRecord(
                method=req.method,
                path=req.path,
                query=req.query,
                verb=self.verb,
                group=t.group if t else "",
                version=t.version if t else "",
                resource=t.plural if t else "",
                subresource=(t.subresource or "") if t else "",
                namespace=(t.namespace or "") if t else "",
                name=(t.name or "") if t else "",
                code=code,
                content_type=req.content_type if req.method in ("POST", "PUT", "PATCH") else "",
                user_agent=req.headers.get("user-agent", ""),
                time=time.time(),
            )
        )


async def wait_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


# ----------------------------------------------------------------------------------------------
# answers


async def start_stream(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", JSON_MEDIA), (b"cache-control", b"no-cache, private")],
        }
    )


async def send_bytes(
    send: Send, code: int, body: bytes, content_type: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-cache, private"),
    ]
    if extra:
        headers += extra
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, code: int, body: Obj, extra: list[tuple[bytes, bytes]] | None = None) -> int:
    await send_bytes(send, code, orjson.dumps(body), JSON_MEDIA, extra)
    return code


async def send_status(send: Send, exc: ApiError) -> None:
    extra = [(k.encode(), v.encode()) for k, v in exc.headers]
    await send_bytes(send, exc.code, orjson.dumps(exc.status), JSON_MEDIA, extra)


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def request_timeout(params: dict[str, list[str]]) -> float | None:
    """The request's own deadline in seconds, from ``?timeout=`` (a Go duration: ``1500ms``,
    ``5s``, ``1m30s``), as kube-apiserver reads it for every request but a watch; None when
    absent. 400, as kube-apiserver answers, when it is not a duration."""
    values = params.get("timeout")
    if not values or values[-1] == "":
        return None
    raw = values[-1]
    parts = _DURATION.findall(raw)
    if not parts or "".join(n + u for n, u in parts) != raw:
        raise errors.bad_request("invalid timeout specified in the request URL")
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
