"""The HTTP face of the emulator: a plain ASGI application (no framework; served by uvicorn).

Routing follows the apiserver's URL layout::

    /api/v1[/namespaces/{ns}]/{plural}[/{name}[/{subresource}]]
    /apis/{group}/{version}[/namespaces/{ns}]/{plural}[/{name}[/{subresource}]]

plus discovery, ``/version``, ``/openapi/v3``, ``/healthz``/``/livez``/``/readyz`` and the legacy
``…/watch/…`` prefix. Every answer is JSON; every failure a ``Status``. This module routes a
request to discovery, OpenAPI or a resource :class:`~extender.emulator.httpio.Target`, names its
verb and injects faults; the verbs are served by :mod:`extender.emulator.handlers` and
:mod:`extender.emulator.watchstream`, over the plumbing of :mod:`extender.emulator.httpio`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from extender.emulator import admission, discovery, errors, handlers
from extender.emulator.errors import ApiError
from extender.emulator.faults import Faults, Firing, Journal
from extender.emulator.httpio import (
    JSON_MEDIA,
    Message,
    Receive,
    RecordBuilder,
    Request,
    Scope,
    Send,
    Target,
    accepts_json,
    query_bool,
    request_timeout,
    send_bytes,
    send_json,
    send_status,
    wait_disconnect,
)
from extender.emulator.resources import ResourceType
from extender.emulator.store import Store
from extender.emulator.watchstream import WatchDropped, serve_watch

__all__ = ["EmulatorApp"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]


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
        req = Request(scope, receive, self.max_body)
        record = RecordBuilder(req)
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
            await send_status(tracked, exc)
        except Exception as exc:  # a bug: answer a Status, never a traceback
            log.exception("emulator: unhandled error serving %s %s", req.method, req.path)
            if started:
                raise
            await send_status(tracked, errors.internal_error(f"{type(exc).__name__}: {exc}"))

    async def _dispatch(self, req: Request, send: Send, record: RecordBuilder) -> int:
        segments = [s for s in req.path.split("/") if s]
        if not segments:
            paths = ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v3", "/readyz", "/version"]
            return await send_json(send, 200, {"paths": paths})
        head = segments[0]
        if head in ("healthz", "livez", "readyz") and len(segments) == 1:
            await send_bytes(send, 200, b"ok", b"text/plain; charset=utf-8")
            return 200
        if head == "version" and len(segments) == 1:
            return await send_json(send, 200, discovery.VERSION_INFO)
        if head == "openapi":
            return await self._openapi_request(req, send, segments[1:])
        types = self.store.types()
        if head == "api":
            if len(segments) == 1:
                return await send_json(send, 200, discovery.api_versions(self.server_address()))
            if segments[1] != "v1":
                raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
            if len(segments) == 2:
                return await self._resource_list(send, "v1", types)
            target = self._target("", "v1", segments[2:])
        elif head == "apis":
            if len(segments) == 1:
                return await send_json(send, 200, discovery.api_group_list(types))
            group = segments[1]
            versions = [rt.version for rt in types if rt.group == group]
            if not versions:
                raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
            if len(segments) == 2:
                return await send_json(send, 200, discovery.api_group(group, sorted(set(versions))))
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
        return await send_json(send, 200, doc)

    async def _openapi_request(self, req: Request, send: Send, rest: list[str]) -> int:
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
            return await send_json(send, 200, index)
        doc = docs.get("/".join(rest[1:]))
        if doc is None:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        await send_bytes(send, 200, doc, JSON_MEDIA)
        return 200

    def _target(self, group: str, version: str, rest: list[str]) -> Target:
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
            return Target(None, group, version, plural, namespace, name, sub, watch_path)
        rt = self.store.find_resource(group, version, plural)
        if rt is None:
            raise not_found
        if rt.namespaced and namespace is None and name is not None:
            raise not_found  # namespaced objects are only addressed inside their namespace
        if sub is not None and sub not in rt.subresources:
            raise not_found
        return Target(rt, group, version, plural, namespace, name, sub, watch_path)

    # ------------------------------------------------------------------------------------------
    # resource requests

    async def _resource_request(self, req: Request, send: Send, t: Target, record: RecordBuilder) -> int:
        """Name the verb, inject a matching fault, then hand the request to the verb's handler."""
        if not accepts_json(req.accept):
            raise errors.not_acceptable(req.accept)
        watching = t.watch_path or (req.method == "GET" and bool(query_bool(req.params, "watch")))
        verb = handlers.verb(req.method, t, watching)
        record.verb = verb
        firing = await self._inject_fault(req, t, verb, None if watching else request_timeout(req.params))
        call = handlers.Call(self.store, self.admission, req, send, t, firing)
        if t.rt is None:  # POST namespaces/{ns}/bindings
            return await handlers.handle_bindings(call)
        if verb == "watch":
            return await serve_watch(self.store, req, send, t, t.rt, bookmark_interval=self.bookmark_interval)
        handler = handlers.HANDLERS.get(verb)
        if handler is None:
            raise errors.method_not_allowed(req.method, req.path)
        return await handler(call, t.rt)

    async def _inject_fault(self, req: Request, t: Target, verb: str, deadline: float | None) -> Firing | None:
        """The fault firing for this request, after its latency; its error is raised now unless
        it is to fail the request after the work is done. A latency that reaches the request's
        own ``deadline`` (``?timeout=``) ends in 504 ``Timeout`` at the deadline, the work not
        done: kube-apiserver cancels a request's storage operation at its deadline."""
        firing = self.faults.check(
            verb,
            t.group,
            t.plural,
            t.subresource or "",
            t.namespace or "",
            t.name or "",
            req.headers.get("user-agent", ""),
        )
        if firing is not None:
            if deadline is not None and firing.latency >= deadline:
                await self._delay(req, deadline)
                raise errors.timeout()
            if firing.latency > 0:
                await self._delay(req, firing.latency)
            if firing.error is not None and not firing.after:
                raise firing.error
        return firing

    @staticmethod
    async def _delay(req: Request, seconds: float) -> None:
        """Injected latency; ends early if the client hangs up (the request is still served, as a
        real server may complete a write whose client timed out)."""
        await req.body()  # consume the body first: after it, receive() only reports a disconnect
        gone = asyncio.ensure_future(wait_disconnect(req.receive))
        try:
            await asyncio.wait({gone}, timeout=seconds)
        finally:
            gone.cancel()
