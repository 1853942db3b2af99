"""The watch handler: a store watch served as a chunked stream of JSON watch events.

One line per event (``{"type": …, "object": …}``), objects rendered as Tables when the client
asks for them (``kubectl get -w``). ``allowWatchBookmarks`` adds a BOOKMARK every
``bookmark_interval`` seconds and one at the end of ``timeoutSeconds``; ``sendInitialEvents``
marks the end of the initial ADDED events with the ``k8s.io/initial-events-end`` bookmark. A
``resourceVersion`` older than the history answers 200 with a single ``ERROR`` event carrying the
``410 Expired`` Status, as the apiserver does. The stream ends when the client hangs up, the
timeout passes, or the store ends the watch; a watch the store aborts (fault injection) raises
:class:`WatchDropped` so that the server cuts the connection mid-stream.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

import orjson

from extender.emulator.errors import ApiError
from extender.emulator.httpio import (
    Request,
    Send,
    Target,
    query_bool,
    query_int,
    query_str,
    start_stream,
    wait_disconnect,
)
from extender.emulator.resources import ResourceType
from extender.emulator.selection import Selection
from extender.emulator.storage import served_as
from extender.emulator.store import Store
from extender.emulator.tables import TableConverter, wants_table
from extender.emulator.watch import Watcher, WatchItem

__all__ = ["WatchDropped", "install_log_filter", "serve_watch"]

Obj = dict[str, Any]


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


@dataclass(frozen=True, slots=True)
class _WatchFormat:
    rt: ResourceType
    converter: TableConverter | None
    table_version: str | None
    include_object: str
    bookmarks: bool


async def serve_watch(
    store: Store, req: Request, send: Send, t: Target, rt: ResourceType, *, bookmark_interval: float
) -> int:
    """Serve ``GET …?watch=1`` (or the legacy ``…/watch/…`` path) until the stream ends."""
    params = req.params
    field_selector = query_str(params, "fieldSelector")
    if t.name:  # legacy single-object watch
        by_name = f"metadata.name={t.name}"
        field_selector = f"{field_selector},{by_name}" if field_selector else by_name
    selection = Selection.parse(rt, t.namespace, query_str(params, "labelSelector"), field_selector)
    timeout = query_int(params, "timeoutSeconds")
    bookmarks = bool(query_bool(params, "allowWatchBookmarks"))
    initial = query_bool(params, "sendInitialEvents")
    table_version = wants_table(req.accept)
    include_object = query_str(params, "includeObject") or "Metadata"
    loop = asyncio.get_running_loop()
    try:
        watcher = store.watch(
            rt, selection, loop, resource_version=query_str(params, "resourceVersion"), send_initial_events=initial
        )
    except ApiError as exc:
        if exc.code != 410:
            raise
        await start_stream(send)
        line = orjson.dumps({"type": "ERROR", "object": exc.status}) + b"\n"
        await send({"type": "http.response.body", "body": line, "more_body": False})
        return 200
    await start_stream(send)
    converter = store.table_converter(rt) if table_version else None
    fmt = _WatchFormat(rt, converter, table_version, include_object, bookmarks)
    deadline = loop.time() + timeout if timeout and timeout > 0 else None
    return await _stream(store, watcher, req, send, fmt, deadline=deadline, bookmark_interval=bookmark_interval)


async def _stream(
    store: Store,
    watcher: Watcher,
    req: Request,
    send: Send,
    fmt: _WatchFormat,
    *,
    deadline: float | None,
    bookmark_interval: float,
) -> int:
    """Relay the watcher's queue to the client, with periodic bookmarks, until the stream ends."""
    loop = asyncio.get_running_loop()
    bookmarks = fmt.bookmarks
    next_bookmark = loop.time() + bookmark_interval if bookmarks else None
    disconnect: asyncio.Future[Any] = asyncio.ensure_future(wait_disconnect(req.receive))
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
                    store.bookmark(watcher)
                    await asyncio.sleep(0)  # let the bookmark (queued thread-safely) arrive
                    while not watcher.queue.empty():
                        items.append(watcher.queue.get_nowait())
                await _emit(send, items, fmt)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return 200
            if next_bookmark is not None and now >= next_bookmark:
                store.bookmark(watcher)
                next_bookmark = now + bookmark_interval
            if not await _emit(send, items, fmt):
                return 200
    finally:
        watcher.stop()
        disconnect.cancel()
        if getter is not None:
            getter.cancel()


async def _emit(send: Send, items: list[WatchItem], fmt: _WatchFormat) -> bool:
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
