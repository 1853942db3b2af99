"""The versioned object storage under the :class:`~extender.emulator.store.Store`: what etcd and the
watch cache are to kube-apiserver's registry.

One re-entrant lock guards everything, so the store can be used from any thread while the HTTP
server runs in its own event loop. Every write takes the next value of ONE global
``resourceVersion`` counter, as etcd's revision does. Stored objects are never mutated after
they are stored (a write stores a new dict), so lists, watch events and history share them
without copying.

Watch history is kept per resource (``history_size`` events each, like the apiserver's watch
cache): a watch may start from any ``resourceVersion`` not older than the oldest retained event
of its resource, else it gets ``410 Expired``. Reads serve an object of a multi-version CRD
through the version asked for (:func:`served_as`).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from extender.emulator import errors
from extender.emulator.pagination import Snapshots
from extender.emulator.registry import TypeRegistry
from extender.emulator.resources import BUILTIN_TYPES, ResourceType, from_crd
from extender.emulator.selection import Selection
from extender.emulator.tables import TableConverter
from extender.emulator.watch import Change, EventType, Watcher, WatchItem, parse_rv

__all__ = ["Storage", "obj_key", "served_as"]

Obj = dict[str, Any]


@dataclass(slots=True)
class _Kind:
    """Per resource key: objects, history and watchers."""

    objects: dict[str, Obj] = field(default_factory=dict)
    history: deque[Change] = field(default_factory=deque)
    horizon: int = 0
    """A watch may start from any RV >= horizon (events after it are all in ``history``)."""
    watchers: set[Watcher] = field(default_factory=set)


def obj_key(namespace: str | None, name: str) -> str:
    """The key of an object among its resource's objects."""
    return f"{namespace}/{name}" if namespace else name


def served_as(rt: ResourceType, obj: Obj) -> Obj:
    """Served through another version of a multi-version CRD: same object, its apiVersion."""
    if obj.get("apiVersion") != rt.api_version:
        obj = dict(obj)
        obj["apiVersion"] = rt.api_version
    return obj


class Storage:
    """Objects of every served resource, the global resourceVersion counter and watch fan-out."""

    def __init__(self, *, history_size: int) -> None:
        if history_size < 1:
            raise ValueError("history_size must be at least 1")
        self.history_size = history_size
        self._lock = threading.RLock()
        self._rv = 0
        self._registry = TypeRegistry(BUILTIN_TYPES)
        self._kinds: dict[str, _Kind] = {}
        for rt in BUILTIN_TYPES:
            self._kinds.setdefault(rt.key, _Kind())
        self._snapshots = Snapshots()
        # called with (resource type, event type, stored object) after every write, under the
        # lock: what sees the stored state at every instant (the tests' invariant monitors)
        self.commit_hooks: list[Callable[[ResourceType, EventType, Obj], None]] = []

    # ------------------------------------------------------------------------------------------
    # resource types

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    @property
    def discovery_generation(self) -> int:
        """Bumped whenever the set of served resources changes (CRD created, updated, deleted)."""
        return self._registry.generation

    def types(self) -> list[ResourceType]:
        with self._lock:
            return self._registry.types()

    def resource(self, group: str, version: str, plural: str) -> ResourceType:
        with self._lock:
            rt = self._registry.find(group, version, plural)
        if rt is None:
            raise errors.ApiError(
                404,
                "NotFound",
                f"the server could not find the requested resource ({group or 'core'}/{version} {plural})",
            )
        return rt

    def find_resource(self, group: str, version: str, plural: str) -> ResourceType | None:
        with self._lock:
            return self._registry.find(group, version, plural)

    def resolve(self, api_version: str, name: str) -> ResourceType:
        """A resource type by ``apiVersion`` and kind, plural, singular or short name."""
        with self._lock:
            return self._registry.resolve(api_version, name)

    def table_converter(self, rt: ResourceType) -> TableConverter:
        return self._registry.table_converter(rt)

    def _serve_crd(self, crd: Obj) -> None:
        for rt in self._registry.serve_crd(crd):
            self._kinds.setdefault(rt.key, _Kind())

    def _unserve_crd(self, crd: Obj) -> None:
        """Remove a deleted CRD's types: its objects are DELETED, its watches END."""
        for key in self._registry.unserve_crd(crd):
            kind = self._kinds.get(key)
            if kind is None:
                continue
            rt_any = next(iter(from_crd(crd)), None)
            if rt_any is not None:
                for obj in list(kind.objects.values()):
                    self._commit(rt_any, "DELETED", obj, None)
            for w in list(kind.watchers):
                w.push(WatchItem("END"))
            del self._kinds[key]
        self._registry.changed()

    # ------------------------------------------------------------------------------------------
    # commit and watch fan-out

    def _commit(self, rt: ResourceType, type_: EventType, obj: Obj, old: Obj | None) -> Obj:
        """Stamp the next resourceVersion on ``obj`` (a fresh dict), store it and notify watchers."""
        self._rv += 1
        rv = self._rv
        meta = dict(obj["metadata"])
        meta["resourceVersion"] = str(rv)
        stored = dict(obj)
        stored["metadata"] = meta
        kind = self._kind(rt)
        key = obj_key(meta.get("namespace"), meta["name"])
        if type_ == "DELETED":
            kind.objects.pop(key, None)
        else:
            kind.objects[key] = stored
        change = Change(type_, rv, stored, old)
        kind.history.append(change)
        while len(kind.history) > self.history_size:
            kind.horizon = kind.history.popleft().rv
        for w in list(kind.watchers):
            w.offer(change)
        for hook in self.commit_hooks:
            hook(rt, type_, stored)
        return stored

    def objects(self, rt: ResourceType) -> list[Obj]:
        """The stored objects of ``rt`` as they are now (stored dicts: never mutate them)."""
        with self._lock:
            return list(self._kind(rt).objects.values())

    def watch(
        self,
        rt: ResourceType,
        selection: Selection,
        loop: asyncio.AbstractEventLoop,
        *,
        resource_version: str | None,
        send_initial_events: bool | None = None,
    ) -> Watcher:
        """Open a watch. Raises ``410 Expired`` when ``resource_version`` is older than the history."""
        w = Watcher(self, rt, selection, loop)
        with self._lock:
            kind = self._kind(rt)
            if not resource_version or resource_version == "0" or send_initial_events:
                for obj in self._matching(rt, selection):
                    w.push(WatchItem("ADDED", obj))
                if send_initial_events:
                    w.push(WatchItem("BOOKMARK", rv=self._rv, obj={"initialEventsEnd": True}))
            else:
                rv = parse_rv(resource_version)
                if rv < kind.horizon:
                    raise errors.expired(f"too old resource version: {rv} ({kind.horizon + 1})")
                for change in kind.history:
                    if change.rv > rv:
                        w.offer(change)
            kind.watchers.add(w)
        return w

    def unwatch(self, w: Watcher) -> None:
        with self._lock:
            w.closed = True
            kind = self._kinds.get(w.rt.key)
            if kind is not None:
                kind.watchers.discard(w)

    def bookmark(self, w: Watcher) -> None:
        """Queue a BOOKMARK at the current resourceVersion behind every event already queued."""
        with self._lock:
            w.push(WatchItem("BOOKMARK", rv=self._rv))

    def end_watches(self, key: str | None = None, *, abort: bool = False) -> int:
        """End (or, with ``abort``, break the connection of) open watches; returns how many."""
        n = 0
        with self._lock:
            for k, kind in self._kinds.items():
                if key is not None and k != key:
                    continue
                for w in list(kind.watchers):
                    w.push(WatchItem("DROP" if abort else "END"))
                    kind.watchers.discard(w)
                    n += 1
        return n

    def open_watches(self, key: str | None = None) -> int:
        with self._lock:
            return sum(len(k.watchers) for name, k in self._kinds.items() if key is None or name == key)

    # ------------------------------------------------------------------------------------------
    # reads

    def _kind(self, rt: ResourceType) -> _Kind:
        kind = self._kinds.get(rt.key)
        if kind is None:  # its CRD was deleted meanwhile
            raise errors.ApiError(404, "NotFound", f"the server could not find the requested resource ({rt.plural})")
        return kind

    def _matching(self, rt: ResourceType, selection: Selection) -> list[Obj]:
        objects = self._kind(rt).objects
        keys = sorted(objects)
        if selection.trivial:
            return [objects[k] for k in keys]
        if selection.namespace is not None:
            prefix = selection.namespace + "/"
            keys = [k for k in keys if k.startswith(prefix)]
            if selection.labels is None and not selection.fields:
                return [objects[k] for k in keys]
        return [o for o in (objects[k] for k in keys) if selection.matches(o, rt)]

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        """The stored object (shared: do not mutate it)."""
        with self._lock:
            obj = self._kind(rt).objects.get(obj_key(namespace if rt.namespaced else None, name))
        if obj is None:
            raise errors.not_found(rt.group, rt.plural, name)
        return served_as(rt, obj)

    def list_objects(
        self, rt: ResourceType, selection: Selection, *, limit: int = 0, continue_token: str | None = None
    ) -> tuple[list[Obj], int, str | None, int | None]:
        """``(items, list resourceVersion, continue token, remainingItemCount)``; a truncated list
        is paged through a snapshot (see :mod:`extender.emulator.pagination`)."""
        with self._lock:
            if continue_token:
                items, rv, offset, snap_id = self._snapshots.resume(continue_token)
            else:
                items, rv, offset, snap_id = self._matching(rt, selection), self._rv, 0, ""
            page, token, remaining = self._snapshots.page(items, rv, offset, snap_id, limit)
            return [served_as(rt, o) for o in page], rv, token, remaining
