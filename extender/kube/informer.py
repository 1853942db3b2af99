"""A generic list+watch informer over raw JSON, for any resource.

Lifecycle, as client-go's reflector: list (in pages) → watch from the list's resourceVersion with
bookmarks → when the server ends the stream (its ``timeoutSeconds``), watch again from the last
resourceVersion seen. On ``410 Gone``, a broken connection or any other error: back off, then
relist. A relist is a *replace*: it is diffed against the local store, so the handler sees
exactly the changes it missed — ``on_delete`` for objects that vanished meanwhile, ``on_add`` for
new ones, ``on_update`` only for objects whose resourceVersion changed — and never the same
change twice.

Objects are the raw JSON dicts the API returned (no generated models). The handler's methods may
be plain functions or coroutines; an exception in a handler is logged and does not stop the
informer.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import orjson

from extender.aio import cancel_and_wait
from extender.kube import client as kube_client
from extender.kube.errors import ApiFailure, KubeError

__all__ = ["Backoff", "Handler", "Informer", "InformerStats", "Resource", "object_key"]

log = logging.getLogger(__name__)

_EVENTS_PER_TURN = 8
"""Watch events applied before the informer lets the event loop run other work."""

Obj = dict[str, Any]


class Handler(Protocol):
    """What an informer delivers to (methods may also be ``async def``)."""

    def on_add(self, obj: Obj) -> Any: ...

    def on_update(self, old: Obj, new: Obj) -> Any: ...

    def on_delete(self, obj: Obj) -> Any: ...


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource to inform on: ``Resource("", "v1", "pods")``, ``Resource(GROUP, VERSION, QUOTAS)``."""

    group: str
    version: str
    plural: str

    def path(self, namespace: str | None = None) -> str:
        return kube_client.resource_path(self.group, self.version, self.plural, namespace=namespace)

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}/{self.version}" if self.group else f"{self.plural}/{self.version}"


def object_key(obj: Obj) -> str:
    """``namespace/name`` (``name`` for cluster-scoped objects), the store's key."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


@dataclass(slots=True)
class InformerStats:
    lists: int = 0
    watches: int = 0
    expired: int = 0
    """Watches answered 410 Gone (resourceVersion too old) — each followed by a relist."""
    errors: int = 0
    events: int = 0


@dataclass(slots=True)
class Backoff:
    """Jittered exponential back-off (``initial`` doubling up to ``maximum``; full jitter 50–100 %)."""

    initial: float = 0.5
    maximum: float = 30.0
    rng: random.Random = field(default_factory=random.Random)
    _next: float = 0.0

    def reset(self) -> None:
        self._next = 0.0

    def next_delay(self) -> float:
        self._next = self.initial if self._next == 0.0 else min(self.maximum, self._next * 2)
        return self._next * (0.5 + 0.5 * self.rng.random())


class _Expired(Exception):
    pass


class Informer:
    """List+watch one resource into :attr:`store`, telling :attr:`handler` about every change.

    ``namespace`` None watches all namespaces (or a cluster-scoped resource).
    ``watch_timeout``: the ``timeoutSeconds`` asked of the server per watch (randomised
    between 1x and 2x, as client-go does, so many informers do not reconnect in step).
    """

    def __init__(
        self,
        api: Any,
        resource: Resource,
        handler: Handler,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
        request_timeout: float = 60.0,
        backoff: Backoff | None = None,
        name: str | None = None,
    ) -> None:
        self.api = api
        self.resource = resource
        self.handler = handler
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.request_timeout = request_timeout
        self.backoff = backoff or Backoff()
        self.name = name or str(resource)
        self.store: dict[str, Obj] = {}
        self.synced = asyncio.Event()
        """Set after the first complete list has been delivered."""
        self.resource_version: str | None = None
        self.stats = InformerStats()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    # ------------------------------------------------------------------------------------------
    # public API

    def start(self) -> asyncio.Task[None]:
        """Run in a task of the current loop (see :meth:`stop`)."""
        if self._task is None or self._task.done():
            self._stopping = False
            self._task = asyncio.create_task(self.run(), name=f"informer {self.name}")
        return self._task

    async def stop(self) -> None:
        """Stop the task started by :meth:`start` and wait for it."""
        self._stopping = True
        await cancel_and_wait(self._task)

    def get(self, name: str, namespace: str | None = None) -> Obj | None:
        return self.store.get(f"{namespace}/{name}" if namespace else name)

    def items(self) -> list[Obj]:
        return list(self.store.values())

    async def run(self) -> None:
        """List and watch until cancelled."""
        while not self._stopping:
            try:
                await self._list_and_replace()
                self.synced.set()
                self.backoff.reset()
                while not self._stopping:
                    await self._watch_once()  # returns when the server ends the stream: watch again
            except asyncio.CancelledError:
                raise
            except _Expired:
                self.stats.expired += 1
                log.info("informer %s: resourceVersion %s expired, relisting", self.name, self.resource_version)
                continue  # relist at once, as client-go does
            except (KubeError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
                self.stats.errors += 1
                delay = self.backoff.next_delay()
                log.warning("informer %s: %s; relisting in %.2fs", self.name, exc, delay)
                await asyncio.sleep(delay)

    # ------------------------------------------------------------------------------------------
    # list

    def _query(self) -> list[tuple[str, str]]:
        query: list[tuple[str, str]] = []
        if self.label_selector:
            query.append(("labelSelector", self.label_selector))
        if self.field_selector:
            query.append(("fieldSelector", self.field_selector))
        return query

    async def _list_and_replace(self) -> None:
        items: dict[str, Obj] = {}
        token: str | None = None
        list_rv = ""
        path = self.resource.path(self.namespace)
        while True:
            query = [*self._query(), ("limit", str(self.page_size))]
            if token:
                query.append(("continue", token))
            resp = await kube_client.request(self.api, "GET", path, query=query, request_timeout=self.request_timeout)
            if resp.status == 410 and token:
                # the continue token expired between pages: start over (a consistent list or none)
                items, token, list_rv = {}, None, ""
                continue
            resp.raise_for_status(f"list {self.resource}")
            body = resp.json()
            if not isinstance(body, dict):
                raise ValueError(f"list {self.resource}: the answer is not a JSON object")
            for obj in body.get("items") or ():
                items[object_key(obj)] = obj
            meta = body.get("metadata") or {}
            list_rv = str(meta.get("resourceVersion") or list_rv)
            token = meta.get("continue") or None
            if not token:
                break
        self.stats.lists += 1
        await self._replace(items)
        self.resource_version = list_rv

    async def _replace(self, items: dict[str, Obj]) -> None:
        """Make the store equal to ``items``, telling the handler only what changed."""
        for key in [k for k in self.store if k not in items]:
            await self._deliver(self.handler.on_delete, self.store.pop(key))
        for key, obj in items.items():
            old = self.store.get(key)
            self.store[key] = obj
            if old is None:
                await self._deliver(self.handler.on_add, obj)
            elif _rv(old) != _rv(obj):
                await self._deliver(self.handler.on_update, old, obj)

    # ------------------------------------------------------------------------------------------
    # watch

    async def _watch_once(self) -> None:
        timeout = int(self.watch_timeout * (1 + random.random()))
        query = [
            *self._query(),
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout)),
        ]
        if self.resource_version:
            query.append(("resourceVersion", self.resource_version))
        self.stats.watches += 1
        # the server closes the stream after `timeout`; reading a little longer than that is fine
        read_timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.request_timeout, sock_read=timeout + 30)
        resp = await self.api.call_api(
            self.resource.path(self.namespace),
            "GET",
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=read_timeout,
        )
        try:
            if resp.status != 200:
                body = await resp.read()
                status = orjson.loads(body) if body else None
                if resp.status == 410:
                    raise _Expired()
                raise ApiFailure.from_response(resp.status, status, f"watch {self.resource}")
            delivered = 0
            while True:
                line = await resp.content.readline()
                if not line:
                    return  # the server ended the watch (timeoutSeconds): watch again
                if line.strip():
                    await self._on_event(orjson.loads(line))
                    delivered += 1
                    if delivered % _EVENTS_PER_TURN == 0:
                        # readline does not yield while the stream has buffered lines: a burst
                        # of events (the binder's thousands of writes) would be one long turn
                        await asyncio.sleep(0)
        finally:
            resp.release()

    async def _on_event(self, event: Obj) -> None:
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise ValueError(f"watch {self.resource}: malformed event {event!r:.200}")
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _Expired()
            raise ApiFailure.from_response(int(obj.get("code") or 500), obj, f"watch {self.resource}")
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        self.stats.events += 1
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        key = object_key(obj)
        old = self.store.get(key)
        if kind in ("ADDED", "MODIFIED"):
            self.store[key] = obj
            if old is None:
                await self._deliver(self.handler.on_add, obj)
            elif _rv(old) != _rv(obj):
                await self._deliver(self.handler.on_update, old, obj)
        elif kind == "DELETED":
            if old is not None:
                del self.store[key]
                await self._deliver(self.handler.on_delete, obj)
        else:
            raise ValueError(f"watch {self.resource}: unknown event type {kind!r}")
        if rv:
            self.resource_version = rv

    async def _deliver(self, fn: Callable[..., Any], *args: Obj) -> None:
        try:
            result = fn(*args)
            if inspect.isawaitable(result):
                await _awaitable(result)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("informer %s: handler %s failed", self.name, getattr(fn, "__name__", fn))


async def _awaitable(result: Awaitable[Any]) -> None:
    await result


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
