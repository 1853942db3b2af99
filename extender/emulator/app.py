"""The HTTP face of the emulator: a plain ASGI application (no framework; served by uvicorn).

Routing follows the apiserver's URL layout::

    /api/v1[/namespaces/{ns}]/{plural}[/{name}[/{subresource}]]
    /apis/{group}/{version}[/namespaces/{ns}]/{plural}[/{name}[/{subresource}]]

plus discovery, ``/version``, ``/openapi/v3``, ``/healthz``/``/livez``/``/readyz`` and the legacy
``…/watch/…`` prefix. Every answer is JSON; every failure a ``Status``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import orjson
import yaml

from extender.emulator import admission, discovery, errors, patch, protobuf
from extender.emulator.errors import ApiError
from extender.emulator.faults import Faults, Journal, RequestRecord
from extender.emulator.resources import ResourceType
from extender.emulator.selection import Selection
from extender.emulator.storage import served_as
from extender.emulator.store import Store
from extender.emulator.tables import TableConverter, wants_table
from extender.emulator.watch import WatchItem

__all__ = ["EmulatorApp", "WatchDropped"]

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Obj = dict[str, Any]

_JSON = b"application/json"
_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})
_FALSE = frozenset({"0", "f", "F", "false", "FALSE", "False"})


class WatchDropped(Exception):
    """Raised inside a watch response to make the server cut the connection mid-stream."""


class _SilenceDroppedWatches(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, WatchDropped)


_silencer = _SilenceDroppedWatches()


def install_log_filter() -> None:
    """Keep uvicorn from logging a traceback for every deliberately dropped watch."""
    logger = logging.getLogger("uvicorn.error")
    if _silencer not in logger.filters:
        logger.addFilter(_silencer)


def _bool(params: dict[str, list[str]], key: str) -> bool | None:
    values = params.get(key)
    if not values:
        return None
    value = values[-1]
    if value in _TRUE:
        return True
    if value in _FALSE or value == "":
        return False
    raise errors.bad_request(f'{key}: invalid boolean "{value}"')


def _str(params: dict[str, list[str]], key: str) -> str | None:
    values = params.get(key)
    return values[-1] if values else None


def _int(params: dict[str, list[str]], key: str) -> int | None:
    value = _str(params, key)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f'{key}: invalid integer "{value}"') from None


def _dry_run(params: dict[str, list[str]], body: Obj | None = None) -> bool:
    values = list(params.get("dryRun") or [])
    if body is not None and isinstance(body.get("dryRun"), list):
        values += body["dryRun"]
    for v in values:
        if v != "All":
            raise errors.bad_request(f'dryRun: Unsupported value: "{v}": supported values: "All"')
    return bool(values)


@dataclass(slots=True)
class _Target:
    """A parsed resource URL."""

    rt: ResourceType | None
    group: str
    version: str
    plural: str
    namespace: str | None
    name: str | None
    subresource: str | None
    watch_path: bool


class EmulatorApp:
    """The ASGI application over a :class:`Store`, consulting :class:`Faults` and writing a :class:`Journal`."""

    def __init__(
        self,
        store: Store,
        faults: Faults,
        journal: Journal,
        *,
        bookmark_interval: float = 1.0,
        max_body: int = 3 * 1024 * 1024,
        server_address: Callable[[], str] = lambda: "127.0.0.1:0",
        services: admission.ServiceMap | None = None,
    ) -> None:
        self.store = store
        self.admission = admission.AdmissionChain(
            store.mutating_webhooks, store.namespace_labels, services or admission.ServiceMap()
        )
        self.faults = faults
        self.journal = journal
        self.bookmark_interval = bookmark_interval
        self.max_body = max_body
        self.server_address = server_address
        self._openapi: tuple[int, Obj, dict[str, bytes]] | None = None

    # ------------------------------------------------------------------------------------------
    # ASGI entry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        req = _Request(scope, receive, self.max_body)
        record = _RecordBuilder(req)
        started = False

        async def tracked(message: Message) -> None:
            # journal the request when its answer starts, so a client that has its answer also
            # finds the request in the journal
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                record.finish(self.journal, int(message["status"]))
            await send(message)

        try:
            await self._dispatch(req, tracked, record)
        except WatchDropped:
            raise
        except ApiError as exc:
            if started:
                raise
            await _send_status(tracked, exc)
        except Exception as exc:  # a bug: answer a Status, never a traceback
            log.exception("emulator: unhandled error serving %s %s", req.method, req.path)
            if started:
                raise
            await _send_status(tracked, errors.internal_error(f"{type(exc).__name__}: {exc}"))

    async def _dispatch(self, req: _Request, send: Send, record: _RecordBuilder) -> int:
        segments = [s for s in req.path.split("/") if s]
        if not segments:
            paths = ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v3", "/readyz", "/version"]
            return await _send_json(send, 200, {"paths": paths})
        head = segments[0]
        if head in ("healthz", "livez", "readyz") and len(segments) == 1:
            await _send_bytes(send, 200, b"ok", b"text/plain; charset=utf-8")
            return 200
        if head == "version" and len(segments) == 1:
            return await _send_json(send, 200, discovery.VERSION_INFO)
        if head == "openapi":
            return await self._openapi_request(req, send, segments[1:])
        types = self.store.types()
        if head == "api":
            if len(segments) == 1:
                return await _send_json(send, 200, discovery.api_versions(self.server_address()))
            if segments[1] != "v1":
                raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
            if len(segments) == 2:
                return await self._resource_list(send, "v1", types)
            target = self._target("", "v1", segments[2:])
        elif head == "apis":
            if len(segments) == 1:
                return await _send_json(send, 200, discovery.api_group_list(types))
            group = segments[1]
            versions = [rt.version for rt in types if rt.group == group]
            if not versions:
                raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
            if len(segments) == 2:
                return await _send_json(send, 200, discovery.api_group(group, sorted(set(versions))))
            version = segments[2]
            if len(segments) == 3:
                return await self._resource_list(send, f"{group}/{version}", types)
            target = self._target(group, version, segments[3:])
        else:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        record.target(target)
        return await self._resource_request(req, send, target, record)

    async def _resource_list(self, send: Send, group_version: str, types: list[ResourceType]) -> int:
        doc = discovery.api_resource_list(group_version, types)
        if doc is None:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        return await _send_json(send, 200, doc)

    async def _openapi_request(self, req: _Request, send: Send, rest: list[str]) -> int:
        if not rest or rest[0] != "v3":
            raise errors.ApiError(
                404, "NotFound", "the server could not find the requested resource (openapi/v2 is not served)"
            )
        gen = self.store.discovery_generation
        if self._openapi is None or self._openapi[0] != gen:
            index, docs = discovery.openapi_index(self.store.types())
            self._openapi = (gen, index, docs)
        _, index, docs = self._openapi
        if len(rest) == 1:
            return await _send_json(send, 200, index)
        doc = docs.get("/".join(rest[1:]))
        if doc is None:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        await _send_bytes(send, 200, doc, _JSON)
        return 200

    def _target(self, group: str, version: str, rest: list[str]) -> _Target:
        not_found = errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        watch_path = False
        if rest and rest[0] == "watch":
            watch_path = True
            rest = rest[1:]
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = self.store.find_resource(group, version, rest[2])
            if (candidate is not None and candidate.namespaced) or (not group and rest[2] == "bindings"):
                namespace = rest[1]
                rest = rest[2:]
            elif group:
                raise not_found
        if not rest or len(rest) > 3:
            raise not_found
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if plural == "bindings" and group == "" and namespace is not None:
            return _Target(None, group, version, plural, namespace, name, sub, watch_path)
        rt = self.store.find_resource(group, version, plural)
        if rt is None:
            raise not_found
        if rt.namespaced and namespace is None and name is not None:
            raise not_found  # namespaced objects are only addressed inside their namespace
        if sub is not None and sub not in rt.subresources:
            raise not_found
        return _Target(rt, group, version, plural, namespace, name, sub, watch_path)

    # ------------------------------------------------------------------------------------------
    # resource requests

    async def _resource_request(self, req: _Request, send: Send, t: _Target, record: _RecordBuilder) -> int:
        params = req.params
        if not _accepts_json(req.accept):
            raise errors.not_acceptable(req.accept)
        method = req.method
        watching = t.watch_path or (method == "GET" and bool(_bool(params, "watch")))
        verb = _verb(method, t, watching)
        record.verb = verb
        ns = t.namespace or ""
        firing = self.faults.check(
            verb, t.group, t.plural, t.subresource or "", ns, t.name or "", req.headers.get("user-agent", "")
        )
        if firing is not None:
            if firing.latency > 0:
                await self._delay(req, firing.latency)
            if firing.error is not None and not firing.after:
                raise firing.error
        if t.rt is None:  # POST namespaces/{ns}/bindings
            body = await req.json()
            meta = body.get("metadata") if isinstance(body, dict) else None
            name = meta.get("name") if isinstance(meta, dict) else None
            if not isinstance(name, str) or not name:
                raise errors.bad_request("a Binding needs metadata.name (the pod's name)")
            result = self.store.bind(ns, name, body, dry_run=_dry_run(params))
            return await self._answer(send, 201, result, firing)
        rt = t.rt
        if verb == "watch":
            return await self._watch(req, send, t, rt)
        if verb == "list":
            return await self._list(req, send, rt, t)
        if verb == "get":
            obj = self.store.get(rt, t.namespace, t.name or "")
            return await self._answer(send, 200, self._render_one(req, rt, obj), firing)
        warnings: list[str] = []
        field_validation = _str(params, "fieldValidation") or "Warn"
        if verb == "create":
            body = await req.json()
            if t.subresource == "binding":
                result = self.store.bind(ns, t.name or "", body, dry_run=_dry_run(params))
                return await self._answer(send, 201, result, firing)
            if t.subresource == "eviction":
                result = self.store.evict(ns, t.name or "", body, dry_run=_dry_run(params))
                return await self._answer(send, 201, result, firing)
            dry_run = _dry_run(params)
            if t.subresource is None:
                body = await self._admit(
                    rt,
                    t.namespace,
                    body,
                    params=params,
                    dry_run=dry_run,
                    field_validation=field_validation,
                    warnings=warnings,
                )
            obj = self.store.create(
                rt, t.namespace, body, dry_run=dry_run, field_validation=field_validation, warnings=warnings
            )
            return await self._answer(send, 201, obj, firing, warnings)
        if verb == "update":
            body = await req.json()
            obj = self.store.update(
                rt,
                t.namespace,
                t.name or "",
                body,
                subresource=t.subresource,
                dry_run=_dry_run(params),
                field_validation=field_validation,
                warnings=warnings,
            )
            return await self._answer(send, 200, obj, firing, warnings)
        if verb == "patch":
            content_type = req.content_type
            if content_type == patch.APPLY_PATCH:
                raw = await req.body()
                try:
                    applied = yaml.safe_load(raw) if raw.strip() else None
                except yaml.YAMLError as exc:
                    raise errors.bad_request(f"the apply patch is not valid YAML: {exc}") from None
                obj, created = self.store.server_side_apply(
                    rt,
                    t.namespace,
                    t.name or "",
                    applied,
                    subresource=t.subresource,
                    dry_run=_dry_run(params),
                    field_validation=_str(params, "fieldValidation") or "Strict",
                    warnings=warnings,
                )
                return await self._answer(send, 201 if created else 200, obj, firing, warnings)
            body = await req.json()
            obj = self.store.patch(
                rt,
                t.namespace,
                t.name or "",
                content_type,
                body,
                subresource=t.subresource,
                dry_run=_dry_run(params),
                field_validation=field_validation,
                warnings=warnings,
            )
            return await self._answer(send, 200, obj, firing, warnings)
        if verb == "delete":
            options = await req.json(optional=True) or {}
            if not isinstance(options, dict):
                raise errors.bad_request("the body of a delete must be a DeleteOptions object")
            obj, deleted = self.store.delete(
                rt,
                t.namespace,
                t.name or "",
                preconditions=options.get("preconditions"),
                dry_run=_dry_run(params, options),
            )
            if rt.key in ("pods", "namespaces") or rt.schema is not None or not deleted:
                return await self._answer(send, 200 if deleted else 202, obj, firing)
            details = {"name": obj["metadata"]["name"], "kind": rt.plural, "uid": obj["metadata"]["uid"]}
            if rt.group:
                details["group"] = rt.group
            return await self._answer(send, 200, errors.status_success(200, details), firing)
        if verb == "deletecollection":
            options = await req.json(optional=True) or {}
            selection = Selection.parse(rt, t.namespace, _str(params, "labelSelector"), _str(params, "fieldSelector"))
            gone = self.store.delete_collection(
                rt, selection, dry_run=_dry_run(params, options if isinstance(options, dict) else None)
            )
            body = {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(self.store.resource_version)},
                "items": gone,
            }
            return await self._answer(send, 200, body, firing)
        raise errors.method_not_allowed(method, req.path)

    async def _admit(
        self,
        rt: ResourceType,
        namespace: str | None,
        body: Any,
        *,
        params: dict[str, list[str]],
        dry_run: bool,
        field_validation: str,
        warnings: list[str],
    ) -> Any:
        """The body after the mutating admission chain (unchanged when no webhook is stored)."""
        if not self.store.mutating_webhooks():
            return body
        obj = self.store.admission_object(rt, namespace, body, field_validation=field_validation, warnings=warnings)
        options: dict[str, Any] = {k: v for k, v in (("fieldManager", _str(params, "fieldManager")),) if v}
        if dry_run:
            options["dryRun"] = ["All"]
        req = admission.Request(rt, obj["metadata"].get("namespace"), dry_run, admission.ADMIN_USER, options)
        result = await self.admission.admit_create(req, obj)
        warnings += result.warnings
        return result.obj

    @staticmethod
    async def _delay(req: _Request, seconds: float) -> None:
        """Injected latency; ends early if the client hangs up (the request is still served, as a
        real server may complete a write whose client timed out)."""
        await req.body()  # consume the body first: after it, receive() only reports a disconnect
        gone = asyncio.ensure_future(_wait_disconnect(req.receive))
        try:
            await asyncio.wait({gone}, timeout=seconds)
        finally:
            gone.cancel()

    async def _answer(self, send: Send, code: int, body: Obj, firing: Any, warnings: list[str] | None = None) -> int:
        if firing is not None and firing.error is not None and firing.after:
            raise firing.error  # the write happened; the client is told it failed
        headers = [(b"warning", f'299 - "{w}"'.encode()) for w in (warnings or [])]
        return await _send_json(send, code, body, headers)

    def _render_one(self, req: _Request, rt: ResourceType, obj: Obj) -> Obj:
        version = wants_table(req.accept)
        if version is None:
            return obj
        meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
        return self.store.table_converter(rt).table(
            [obj], version=version, list_meta=meta, include_object=_str(req.params, "includeObject") or "Metadata"
        )

    async def _list(self, req: _Request, send: Send, rt: ResourceType, t: _Target) -> int:
        params = req.params
        selection = Selection.parse(rt, t.namespace, _str(params, "labelSelector"), _str(params, "fieldSelector"))
        limit = _int(params, "limit") or 0
        if limit < 0:
            raise errors.bad_request("limit must be non-negative")
        items, rv, token, remaining = self.store.list_objects(
            rt, selection, limit=limit, continue_token=_str(params, "continue") or None
        )
        meta: Obj = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
            meta["remainingItemCount"] = remaining
        version = wants_table(req.accept)
        if version is not None:
            body = self.store.table_converter(rt).table(
                items, version=version, list_meta=meta, include_object=_str(params, "includeObject") or "Metadata"
            )
        else:
            body = {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta, "items": items}
        return await _send_json(send, 200, body)

    # ------------------------------------------------------------------------------------------
    # watch

    async def _watch(self, req: _Request, send: Send, t: _Target, rt: ResourceType) -> int:
        params = req.params
        field_selector = _str(params, "fieldSelector")
        if t.name:  # legacy single-object watch
            by_name = f"metadata.name={t.name}"
            field_selector = f"{field_selector},{by_name}" if field_selector else by_name
        selection = Selection.parse(rt, t.namespace, _str(params, "labelSelector"), field_selector)
        timeout = _int(params, "timeoutSeconds")
        bookmarks = bool(_bool(params, "allowWatchBookmarks"))
        initial = _bool(params, "sendInitialEvents")
        table_version = wants_table(req.accept)
        include_object = _str(params, "includeObject") or "Metadata"
        loop = asyncio.get_running_loop()
        try:
            watcher = self.store.watch(
                rt, selection, loop, resource_version=_str(params, "resourceVersion"), send_initial_events=initial
            )
        except ApiError as exc:
            if exc.code != 410:
                raise
            await _start_stream(send)
            line = orjson.dumps({"type": "ERROR", "object": exc.status}) + b"\n"
            await send({"type": "http.response.body", "body": line, "more_body": False})
            return 200
        await _start_stream(send)
        converter = self.store.table_converter(rt) if table_version else None
        fmt = _WatchFormat(rt, converter, table_version, include_object, bookmarks)
        deadline = loop.time() + timeout if timeout and timeout > 0 else None
        next_bookmark = loop.time() + self.bookmark_interval if bookmarks else None
        disconnect: asyncio.Future[Any] = asyncio.ensure_future(_wait_disconnect(req.receive))
        getter: asyncio.Future[Any] | None = None
        try:
            while True:
                now = loop.time()
                wake = min((x for x in (deadline, next_bookmark) if x is not None), default=None)
                if getter is None:
                    getter = asyncio.ensure_future(watcher.queue.get())
                waiting: set[asyncio.Future[Any]] = {getter, disconnect}
                done, _ = await asyncio.wait(
                    waiting,
                    timeout=None if wake is None else max(0.0, wake - now),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if disconnect in done:
                    return 200
                items: list[WatchItem] = []
                if getter in done:
                    items.append(getter.result())
                    getter = None
                    while not watcher.queue.empty():
                        items.append(watcher.queue.get_nowait())
                now = loop.time()
                if deadline is not None and now >= deadline:
                    if bookmarks:
                        self.store.bookmark(watcher)
                        await asyncio.sleep(0)  # let the bookmark (queued thread-safely) arrive
                        while not watcher.queue.empty():
                            items.append(watcher.queue.get_nowait())
                    await self._emit(send, items, fmt)
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    return 200
                if next_bookmark is not None and now >= next_bookmark:
                    self.store.bookmark(watcher)
                    next_bookmark = now + self.bookmark_interval
                if not await self._emit(send, items, fmt):
                    return 200
        finally:
            watcher.stop()
            disconnect.cancel()
            if getter is not None:
                getter.cancel()

    async def _emit(self, send: Send, items: list[WatchItem], fmt: _WatchFormat) -> bool:
        """Write events; False when the stream must end (END), raise on DROP."""
        rt, converter, table_version, include_object, bookmarks = (
            fmt.rt,
            fmt.converter,
            fmt.table_version,
            fmt.include_object,
            fmt.bookmarks,
        )
        chunks: list[bytes] = []
        keep_open = True
        now = time.time()
        for item in items:
            if item.type == "DROP":
                if chunks:
                    await send({"type": "http.response.body", "body": b"".join(chunks), "more_body": True})
                raise WatchDropped()
            if item.type == "END":
                keep_open = False
                break
            if item.type == "BOOKMARK":
                if not bookmarks:
                    continue
                meta: Obj = {"resourceVersion": str(item.rv)}
                if item.obj and item.obj.get("initialEventsEnd"):
                    meta["annotations"] = {"k8s.io/initial-events-end": "true"}
                obj: Obj = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}
                chunks.append(orjson.dumps({"type": "BOOKMARK", "object": obj}) + b"\n")
                continue
            assert item.obj is not None
            out = served_as(rt, item.obj)
            if converter is not None and table_version is not None:
                out = {
                    "kind": "Table",
                    "apiVersion": f"meta.k8s.io/{table_version}",
                    "metadata": {"resourceVersion": out["metadata"].get("resourceVersion", "")},
                    "columnDefinitions": converter.column_definitions(),
                    "rows": [converter.row(out, now, include_object)],
                }
            chunks.append(orjson.dumps({"type": item.type, "object": out}) + b"\n")
        if chunks:
            await send({"type": "http.response.body", "body": b"".join(chunks), "more_body": keep_open})
        elif not keep_open:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        return keep_open


@dataclass(frozen=True, slots=True)
class _WatchFormat:
    rt: ResourceType
    converter: TableConverter | None
    table_version: str | None
    include_object: str
    bookmarks: bool


def _accepts_json(accept: str) -> bool:
    for media in accept.split(","):
        base = media.split(";")[0].strip().lower()
        if base in ("", "*/*", "application/*", "application/json") or base.endswith("+json"):
            return True
    return False


def _verb(method: str, t: _Target, watching: bool) -> str:
    if t.rt is None:
        if method != "POST":
            raise errors.method_not_allowed(method, "bindings")
        return "create"
    if method == "GET":
        if watching:
            return "watch"
        return "get" if t.name else "list"
    if method == "POST":
        if t.name and t.subresource in ("binding", "eviction"):
            return "create"
        if t.name is None:
            return "create"
    if method == "PUT" and t.name and t.subresource in (None, "status"):
        return "update"
    if method == "PATCH" and t.name and t.subresource in (None, "status"):
        return "patch"
    if method == "DELETE" and t.subresource is None:
        return "delete" if t.name else "deletecollection"
    raise errors.method_not_allowed(method, t.plural + (f"/{t.subresource}" if t.subresource else ""))


class _Request:
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


class _RecordBuilder:
    __slots__ = ("req", "t", "verb")

    def __init__(self, req: _Request) -> None:
        self.req = req
        self.t: _Target | None = None
        self.verb = ""

    def target(self, t: _Target) -> None:
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


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _start_stream(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", _JSON), (b"cache-control", b"no-cache, private")],
        }
    )


async def _send_bytes(
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


async def _send_json(send: Send, code: int, body: Obj, extra: list[tuple[bytes, bytes]] | None = None) -> int:
    await _send_bytes(send, code, orjson.dumps(body), _JSON, extra)
    return code


async def _send_status(send: Send, exc: ApiError) -> None:
    extra = [(k.encode(), v.encode()) for k, v in exc.headers]
    await _send_bytes(send, exc.code, orjson.dumps(exc.status), _JSON, extra)
