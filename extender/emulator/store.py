"""The object store: API semantics shared by the HTTP server and the Python API.

One re-entrant lock guards everything, so the store can be used from any thread while the HTTP
server runs in its own event loop. Every write takes the next value of ONE global
``resourceVersion`` counter, as etcd's revision does. Stored objects are never mutated after
they are stored (a write stores a new dict), so lists, watch events and history share them
without copying; the Python API hands out deep copies.

Watch history is kept per resource (``history_size`` events each, like the apiserver's watch
cache): a watch may start from any ``resourceVersion`` not older than the oldest retained event
of its resource, else it gets ``410 Expired``.
"""

from __future__ import annotations

import asyncio
import base64
import random
import threading
import uuid
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from extender.emulator import errors, kinds, patch, webhookconfig
from extender.emulator.errors import Cause
from extender.emulator.meta import (
    deep_copy,
    now_rfc3339,
    validate_dns_label,
    validate_dns_subdomain,
    validate_metadata_maps,
)
from extender.emulator.resources import BUILTIN_TYPES, ResourceType, from_crd
from extender.emulator.schema import CompiledSchema
from extender.emulator.selection import Selection
from extender.emulator.tables import TableConverter
from extender.emulator.webhookconfig import Webhook

__all__ = ["DEFAULT_NAMESPACES", "FIELD_VALIDATION", "Change", "Store", "WatchItem", "Watcher", "transition"]

Obj = dict[str, Any]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
FIELD_VALIDATION = ("Ignore", "Warn", "Strict")
_CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"
_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")
_NAME_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True, slots=True)
class Change:
    """One committed write, as kept in the watch history."""

    type: EventType
    rv: int
    obj: Obj
    old: Obj | None


@dataclass(frozen=True, slots=True)
class WatchItem:
    """What a watcher's queue carries: an event, a bookmark, or the end of the stream."""

    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "END", "DROP"]
    obj: Obj | None = None
    rv: int = 0


class Watcher:
    """An open watch: events are pushed into an asyncio queue owned by ``loop``."""

    def __init__(self, store: Store, rt: ResourceType, selection: Selection, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self.rt = rt
        self.selection = selection
        self.loop = loop
        self.queue: asyncio.Queue[WatchItem] = asyncio.Queue()
        self.closed = False

    def push(self, item: WatchItem) -> None:
        """Enqueue from any thread (callers hold the store lock, which keeps the order)."""
        if self.closed:
            return
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # loop closed: the client is gone
            self.closed = True

    def offer(self, change: Change) -> None:
        item = transition(change, self.selection, self.rt)
        if item is not None:
            self.push(item)

    def stop(self) -> None:
        self.store.unwatch(self)


def transition(change: Change, selection: Selection, rt: ResourceType) -> WatchItem | None:
    """The event a watcher with ``selection`` sees for ``change`` (apiserver semantics:
    an object that stops matching is DELETED, one that starts matching is ADDED)."""
    if selection.trivial:
        return WatchItem(change.type, change.obj)
    now = selection.matches(change.obj, rt)
    if change.type != "MODIFIED" or change.old is None:
        return WatchItem(change.type, change.obj) if now else None
    before = selection.matches(change.old, rt)
    if now and before:
        return WatchItem("MODIFIED", change.obj)
    if now:
        return WatchItem("ADDED", change.obj)
    if before:
        return WatchItem("DELETED", change.obj)
    return None


@dataclass(slots=True)
class _Snapshot:
    items: list[Obj]
    rv: int


@dataclass(slots=True)
class _Kind:
    """Per resource key: objects, history and watchers."""

    objects: dict[str, Obj] = field(default_factory=dict)
    history: deque[Change] = field(default_factory=deque)
    horizon: int = 0
    """A watch may start from any RV >= horizon (events after it are all in ``history``)."""
    watchers: set[Watcher] = field(default_factory=set)


def _obj_key(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


class Store:
    """Objects of every served resource, the global resourceVersion counter and watch fan-out."""

    def __init__(self, *, history_size: int = 1000, rng: random.Random | None = None) -> None:
        if history_size < 1:
            raise ValueError("history_size must be at least 1")
        self.history_size = history_size
        self._lock = threading.RLock()
        self._rv = 0
        self._rng = rng or random.Random()
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._kinds: dict[str, _Kind] = {}
        self._schemas: dict[tuple[str, str], CompiledSchema] = {}
        self._tables: dict[tuple[str, str], TableConverter] = {}
        self._snapshots: OrderedDict[str, _Snapshot] = OrderedDict()
        self._webhooks: tuple[tuple[tuple[str, str], ...], list[Webhook]] | None = None
        self.discovery_generation = 0
        """Bumped whenever the set of served resources changes (CRD created, updated, deleted)."""
        for rt in BUILTIN_TYPES:
            self._add_type(rt)
        for ns in DEFAULT_NAMESPACES:
            self.create(self.resource("", "v1", "namespaces"), None, {"metadata": {"name": ns}})

    # ------------------------------------------------------------------------------------------
    # resource types

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    def _add_type(self, rt: ResourceType) -> None:
        self._types[(rt.group, rt.version, rt.plural)] = rt
        self._kinds.setdefault(rt.key, _Kind())
        if rt.schema is not None:
            self._schemas[(rt.key, rt.version)] = CompiledSchema(rt.schema)
        self._tables[(rt.key, rt.version)] = TableConverter(rt)

    def types(self) -> list[ResourceType]:
        with self._lock:
            return list(self._types.values())

    def resource(self, group: str, version: str, plural: str) -> ResourceType:
        with self._lock:
            rt = self._types.get((group, version, plural))
        if rt is None:
            raise errors.ApiError(
                404,
                "NotFound",
                f"the server could not find the requested resource ({group or 'core'}/{version} {plural})",
            )
        return rt

    def find_resource(self, group: str, version: str, plural: str) -> ResourceType | None:
        with self._lock:
            return self._types.get((group, version, plural))

    def resolve(self, api_version: str, name: str) -> ResourceType:
        """A resource type by ``apiVersion`` and kind, plural, singular or short name."""
        group, _, version = api_version.rpartition("/")
        lowered = name.lower()
        with self._lock:
            for rt in self._types.values():
                if (
                    rt.group == group
                    and rt.version == version
                    and (lowered in (rt.plural, rt.singular, rt.kind.lower()) or lowered in rt.short_names)
                ):
                    return rt
        raise errors.ApiError(404, "NotFound", f"no resource {name!r} in {api_version!r}")

    def table_converter(self, rt: ResourceType) -> TableConverter:
        return self._tables[(rt.key, rt.version)]

    def _register_crd(self, crd: Obj) -> None:
        name = crd["metadata"]["name"]
        for k, rt in list(self._types.items()):
            if rt.crd_name == name:
                del self._types[k]
        for rt in from_crd(crd):
            self._add_type(rt)
        self._discovery_changed()

    def _unregister_crd(self, crd: Obj) -> None:
        name = crd["metadata"]["name"]
        keys = {rt.key for rt in self._types.values() if rt.crd_name == name}
        for k, rt in list(self._types.items()):
            if rt.crd_name == name:
                del self._types[k]
        for key in keys:
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
        self._discovery_changed()

    def _discovery_changed(self) -> None:
        self.discovery_generation += 1

    def _check_crd_names(self, crd: Obj) -> list[Cause]:
        spec = crd.get("spec") or {}
        group = spec.get("group")
        names = spec.get("names") or {}
        key = f"{names.get('plural')}.{group}"
        for rt in self._types.values():
            if rt.key == key and rt.crd_name != crd["metadata"]["name"]:
                return [
                    Cause(
                        "spec.names.plural",
                        "FieldValueInvalid",
                        f'Invalid value: "{names.get("plural")}": already served',
                    )
                ]
            if rt.group == group and rt.kind == names.get("kind") and rt.crd_name != crd["metadata"]["name"]:
                return [Cause("spec.names.kind", "FieldValueInvalid", f'Invalid value: "{rt.kind}": already served')]
        return []

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
        key = _obj_key(meta.get("namespace"), meta["name"])
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
        return stored

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
                rv = _parse_rv(resource_version)
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
            obj = self._kind(rt).objects.get(_obj_key(namespace if rt.namespaced else None, name))
        if obj is None:
            raise errors.not_found(rt.group, rt.plural, name)
        return self._versioned(rt, obj)

    def list_objects(
        self, rt: ResourceType, selection: Selection, *, limit: int = 0, continue_token: str | None = None
    ) -> tuple[list[Obj], int, str | None, int | None]:
        """``(items, list resourceVersion, continue token, remainingItemCount)``.

        A truncated list keeps its result as a snapshot, so the next pages are consistent with the
        first one (as etcd serves them at the first page's revision).
        """
        with self._lock:
            if continue_token:
                snap_id, offset = self._decode_continue(continue_token)
                snap = self._snapshots.get(snap_id)
                if snap is None:
                    raise errors.expired(
                        "The provided continue parameter is too old to display a consistent list result. "
                        "You can start a new list without the continue parameter."
                    )
                self._snapshots.move_to_end(snap_id)
                items, rv = snap.items, snap.rv
            else:
                items, rv, offset, snap_id = self._matching(rt, selection), self._rv, 0, ""
            if limit <= 0 or offset + limit >= len(items):
                page = items[offset:]
                if snap_id:
                    self._snapshots.pop(snap_id, None)
                return [self._versioned(rt, o) for o in page], rv, None, None
            if not snap_id:
                snap_id = uuid.uuid4().hex
                self._snapshots[snap_id] = _Snapshot(items, rv)
                while len(self._snapshots) > 64:
                    self._snapshots.popitem(last=False)
            end = offset + limit
            token = base64.urlsafe_b64encode(orjson.dumps({"s": snap_id, "o": end, "rv": rv})).decode()
            return [self._versioned(rt, o) for o in items[offset:end]], rv, token, len(items) - end

    @staticmethod
    def _decode_continue(token: str) -> tuple[str, int]:
        try:
            data = orjson.loads(base64.urlsafe_b64decode(token.encode()))
            return str(data["s"]), int(data["o"])
        except (ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            raise errors.bad_request(f"invalid continue token {token!r}") from None

    @staticmethod
    def _versioned(rt: ResourceType, obj: Obj) -> Obj:
        """Served through another version of a multi-version CRD: same object, its apiVersion."""
        if obj.get("apiVersion") != rt.api_version:
            obj = dict(obj)
            obj["apiVersion"] = rt.api_version
        return obj

    # ------------------------------------------------------------------------------------------
    # body checks shared by writes

    def _check_body(self, rt: ResourceType, body: Any, namespace: str | None, *, name: str | None) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body of the request must be a JSON object describing a {rt.kind}")
        try:
            obj: Obj = deep_copy(body)
        except TypeError as exc:  # the Python API may be handed non-JSON values
            raise errors.bad_request(f"the object is not valid JSON: {exc}") from None
        kind = obj.setdefault("kind", rt.kind)
        api_version = obj.setdefault("apiVersion", rt.api_version)
        if kind != rt.kind:
            raise errors.bad_request(
                f"the kind of the object ({kind}) does not match the kind of the resource ({rt.kind})"
            )
        group = api_version.rpartition("/")[0] if isinstance(api_version, str) else None
        if group != rt.group:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rt.api_version})"
            )
        meta = obj.get("metadata")
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be a JSON object")
        rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        obj = {"apiVersion": rt.api_version, "kind": rt.kind, "metadata": meta, **rest}
        for key in ("name", "generateName", "namespace", "uid", "resourceVersion"):
            if key in meta and meta[key] is not None and not isinstance(meta[key], str):
                raise errors.bad_request(
                    f"json: cannot unmarshal {type(meta[key]).__name__} into Go struct field "
                    f"ObjectMeta.metadata.{key} of type string"
                )
        for key in ("finalizers", "ownerReferences"):
            if key in meta and not meta[key]:
                del meta[key]  # empty = absent (Go's omitempty): keeps no-op writes no-ops
        for key in ("labels", "annotations"):
            value = meta.get(key)
            if value is None or value == {}:
                meta.pop(key, None)
                continue
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise errors.bad_request(
                    f"json: cannot unmarshal into Go struct field ObjectMeta.metadata.{key} of type map[string]string"
                )
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and namespace and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            if not (body_ns or namespace):
                raise errors.bad_request("the namespace of the object is required")
            meta["namespace"] = namespace or body_ns
        else:
            meta.pop("namespace", None)
        if name is not None:
            body_name = meta.get("name")
            if body_name and body_name != name:
                raise errors.bad_request(
                    f"the name of the object ({body_name}) does not match the name on the URL ({name})"
                )
            meta["name"] = name
        meta.pop("managedFields", None)
        meta.pop("selfLink", None)
        return obj

    def _unknown_fields(self, rt: ResourceType, obj: Obj, validation: str) -> list[str]:
        """Prune unknown fields; ``Strict`` raises 400 instead. Returns warnings."""
        if validation not in FIELD_VALIDATION:
            raise errors.bad_request(f'fieldValidation must be one of "Ignore", "Warn", "Strict", got "{validation}"')
        unknown = [f"metadata.{k}" for k in obj["metadata"] if k not in _META_FIELDS]
        for k in unknown:
            obj["metadata"].pop(k.split(".", 1)[1], None)
        compiled = self._schemas.get((rt.key, rt.version))
        if compiled is not None:
            unknown += compiled.prune(obj)
        elif rt.top_level_fields is not None:
            extra = [k for k in obj if k not in rt.top_level_fields]
            for k in extra:
                del obj[k]
            unknown += extra
        if unknown and validation == "Strict":
            listed = ", ".join(f'unknown field "{u}"' for u in unknown)
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: strict decoding error: {listed}'
            )
        if validation == "Warn":
            return [f'unknown field "{u}"' for u in unknown]
        return []

    def _validate(self, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        meta = obj["metadata"]
        name = meta.get("name") or ""
        causes: list[Cause] = []
        if rt.key == "namespaces":
            causes += validate_dns_label(name, "metadata.name")
        elif rt.key != "events" or not name:
            causes += validate_dns_subdomain(name, "metadata.name")
        causes += validate_metadata_maps(meta)
        compiled = self._schemas.get((rt.key, rt.version))
        if compiled is not None:
            compiled.apply_defaults(obj)
            causes += compiled.validate(obj)
        causes += kinds.validate(rt, obj, old)
        if rt.key == _CRD_KEY and not causes:
            causes += self._check_crd_names(obj)
        if causes:
            raise errors.invalid(rt.group, rt.kind, name, causes)

    # ------------------------------------------------------------------------------------------
    # writes

    def create(
        self,
        rt: ResourceType,
        namespace: str | None,
        body: Any,
        *,
        dry_run: bool = False,
        field_validation: str = "Warn",
        with_status: bool = False,
        warnings: list[str] | None = None,
    ) -> Obj:
        """POST: 201 semantics. ``with_status`` keeps a given status (a Python-API convenience)."""
        obj = self._check_body(rt, body, namespace, name=None)
        meta = obj["metadata"]
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        found = self._unknown_fields(rt, obj, field_validation)
        if warnings is not None:
            warnings += found
        with self._lock:
            if not meta.get("name"):
                prefix = meta.get("generateName")
                if not prefix:
                    raise errors.invalid(
                        rt.group,
                        rt.kind,
                        "",
                        [
                            Cause(
                                "metadata.name",
                                "FieldValueRequired",
                                "Required value: name or generateName is required",
                            )
                        ],
                    )
                meta["name"] = self._generate_name(rt, meta.get("namespace"), prefix)
            for key in _SERVER_META:
                meta.pop(key, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            meta["generation"] = 1
            kinds.prepare_create(rt, obj, with_status=with_status)
            self._validate(rt, obj, None)
            ns = meta.get("namespace")
            if rt.namespaced and _obj_key(None, ns) not in self._kinds["namespaces"].objects:
                raise errors.not_found("", "namespaces", ns)
            if _obj_key(ns, meta["name"]) in self._kind(rt).objects:
                raise errors.already_exists(rt.group, rt.plural, meta["name"])
            if dry_run:
                return obj
            stored = self._commit(rt, "ADDED", obj, None)
            if rt.key == _CRD_KEY:
                self._register_crd(stored)
            return stored

    def admission_object(
        self,
        rt: ResourceType,
        namespace: str | None,
        body: Any,
        *,
        field_validation: str = "Warn",
        warnings: list[str] | None = None,
    ) -> Obj:
        """The object a CREATE would store, as admission sees it: decoded, pruned and defaulted,
        not yet named from ``generateName``, not validated (kube-apiserver's order: defaulting,
        mutating admission, then naming and validation in the registry). 404 for a namespace
        that does not exist (the NamespaceLifecycle plugin runs before the webhooks)."""
        obj = self._check_body(rt, body, namespace, name=None)
        found = self._unknown_fields(rt, obj, field_validation)
        if warnings is not None:
            warnings += found
        kinds.prepare_create(rt, obj, with_status=False)
        ns = obj["metadata"].get("namespace")
        if rt.namespaced and self.namespace_labels(ns) is None:
            raise errors.not_found("", "namespaces", ns)
        return obj

    def namespace_labels(self, namespace: str | None) -> dict[str, str] | None:
        """The labels of a namespace; None when it does not exist."""
        with self._lock:
            ns = self._kinds["namespaces"].objects.get(_obj_key(None, namespace or ""))
        return None if ns is None else dict((ns.get("metadata") or {}).get("labels") or {})

    def mutating_webhooks(self) -> list[Webhook]:
        """The webhooks of the stored MutatingWebhookConfigurations, in call order (parsed once
        per change of the configurations)."""
        with self._lock:
            objects = self._kinds[webhookconfig.KEY].objects
            stamp = tuple((k, o["metadata"]["resourceVersion"]) for k, o in sorted(objects.items()))
            if self._webhooks is None or self._webhooks[0] != stamp:
                self._webhooks = (stamp, webhookconfig.ordered_webhooks(list(objects.values())))
            return self._webhooks[1]

    def _generate_name(self, rt: ResourceType, namespace: str | None, prefix: str) -> str:
        objects = self._kind(rt).objects
        for _ in range(100):
            name = prefix[:58] + "".join(self._rng.choice(_NAME_SUFFIX) for _ in range(5))
            if _obj_key(namespace, name) not in objects:
                return name
        raise errors.ApiError(409, "AlreadyExists", f"could not generate a unique name from {prefix!r}")

    def update(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str = "Warn",
        warnings: list[str] | None = None,
    ) -> Obj:
        """PUT (of the object or of its ``status``): 409 on a stale ``metadata.resourceVersion``."""
        obj = self._check_body(rt, body, namespace, name=name)
        found = self._unknown_fields(rt, obj, field_validation)
        if warnings is not None:
            warnings += found
        with self._lock:
            old = self._current(rt, namespace, name)
            rv = obj["metadata"].get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.stale_conflict(rt.group, rt.plural, name)
            return self._write(rt, old, obj, subresource=subresource, dry_run=dry_run)

    def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str = "Warn",
        warnings: list[str] | None = None,
    ) -> Obj:
        """PATCH with a merge, JSON or strategic-merge patch; a ``metadata.resourceVersion``
        the patch leaves in the object must be the current one (409 otherwise)."""
        if patch_type == patch.STRATEGIC_MERGE_PATCH and rt.schema is not None:
            raise errors.unsupported_media_type(patch_type, [patch.JSON_PATCH, patch.MERGE_PATCH])
        if patch_type not in patch.PATCH_TYPES:
            raise errors.unsupported_media_type(patch_type, list(patch.PATCH_TYPES))
        try:
            body = deep_copy(body)
        except TypeError as exc:  # the Python API may be handed non-JSON values
            raise errors.bad_request(f"the patch is not valid JSON: {exc}") from None
        with self._lock:
            old = self._current(rt, namespace, name)
            try:
                if patch_type == patch.MERGE_PATCH:
                    if not isinstance(body, dict):
                        raise patch.PatchError(400, "merge patch: the body must be a JSON object")
                    patched = patch.apply_merge_patch(old, body)
                elif patch_type == patch.JSON_PATCH:
                    patched = patch.apply_json_patch(old, body)
                else:
                    patched = patch.apply_strategic_merge_patch(old, body)
            except patch.PatchError as exc:
                raise exc.to_api_error() from None
            if not isinstance(patched, dict):
                raise errors.bad_request("the patched object is not a JSON object")
            obj = self._check_body(rt, patched, namespace, name=name)
            rv = obj["metadata"].get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.stale_conflict(rt.group, rt.plural, name)
            found = self._unknown_fields(rt, obj, field_validation)
            if warnings is not None:
                warnings += found
            return self._write(rt, old, obj, subresource=subresource, dry_run=dry_run)

    def server_side_apply(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str = "Strict",
        warnings: list[str] | None = None,
    ) -> tuple[Obj, bool]:
        """``application/apply-patch+yaml``, approximated: create the object if it is missing,
        else merge the applied configuration into it (a strategic merge for built-in kinds, a
        merge patch for custom resources). There is no field ownership: fields are never removed
        by omission and conflicts between managers are never reported. Returns (object, created)."""
        if not isinstance(body, dict):
            raise errors.bad_request("the apply patch must be an object (YAML or JSON)")
        with self._lock:
            exists = _obj_key(namespace if rt.namespaced else None, name) in self._kind(rt).objects
            if not exists and subresource is None:
                meta = body.get("metadata")
                body = {**body, "metadata": {**(meta if isinstance(meta, dict) else {}), "name": name}}
                created = self.create(
                    rt, namespace, body, dry_run=dry_run, field_validation=field_validation, warnings=warnings
                )
                return created, True
            kind = patch.STRATEGIC_MERGE_PATCH if rt.schema is None else patch.MERGE_PATCH
            applied = {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}
            obj = self.patch(
                rt,
                namespace,
                name,
                kind,
                applied,
                subresource=subresource,
                dry_run=dry_run,
                field_validation=field_validation,
                warnings=warnings,
            )
            return obj, False

    def _current(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self._kind(rt).objects.get(_obj_key(namespace if rt.namespaced else None, name))
        if obj is None:
            raise errors.not_found(rt.group, rt.plural, name)
        return obj

    def _write(self, rt: ResourceType, old: Obj, obj: Obj, *, subresource: str | None, dry_run: bool) -> Obj:
        """Common tail of update and patch (lock held): keep what the write may not change,
        validate, bump generation, skip no-ops, finish a pending deletion."""
        if subresource not in (None, "status") or (subresource == "status" and not rt.has_status):
            raise errors.ApiError(
                404, "NotFound", f"the server could not find the requested resource ({rt.plural}/{subresource})"
            )
        name = old["metadata"]["name"]
        old_meta = old["metadata"]
        meta = obj["metadata"]
        if meta.get("uid") and meta["uid"] != old_meta["uid"]:
            raise errors.conflict(
                rt.group,
                rt.plural,
                name,
                f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: {old_meta['uid']}",
            )
        for key in _SERVER_META:
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        kinds.prepare_update(rt, obj, old, subresource=subresource)
        meta = obj["metadata"]
        self._validate(rt, obj, old if subresource is None else None)
        if kinds.spec_part(obj) != kinds.spec_part(old):
            meta["generation"] = int(old_meta.get("generation") or 1) + 1
        if obj == old:
            return old  # a no-op write: no new resourceVersion, no event (as the apiserver)
        if dry_run:
            return obj
        if old_meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._commit(rt, "DELETED", obj, old)
        stored = self._commit(rt, "MODIFIED", obj, old)
        if rt.key == _CRD_KEY:
            self._register_crd(stored)
        return stored

    def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        *,
        preconditions: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> tuple[Obj, bool]:
        """DELETE: ``(object, deleted)``; ``deleted`` is False while finalizers hold it."""
        if rt.key == "namespaces" and name in _IMMORTAL_NAMESPACES:
            raise errors.forbidden(f'namespaces "{name}" is forbidden: this namespace may not be deleted')
        with self._lock:
            old = self._current(rt, namespace, name)
            self._check_preconditions(rt, old, preconditions)
            meta = old["metadata"]
            if meta.get("finalizers"):
                if meta.get("deletionTimestamp") or dry_run:
                    return old, False
                new = dict(old)
                new["metadata"] = {**meta, "deletionTimestamp": now_rfc3339(), "deletionGracePeriodSeconds": 0}
                return self._commit(rt, "MODIFIED", new, old), False
            if dry_run:
                return old, True
            if rt.key == "namespaces":
                self._delete_namespace_contents(name)
            gone = self._commit(rt, "DELETED", old, None)
            if rt.key == _CRD_KEY:
                self._unregister_crd(gone)
            return gone, True

    def _check_preconditions(self, rt: ResourceType, obj: Obj, preconditions: Mapping[str, Any] | None) -> None:
        if not preconditions:
            return
        if not isinstance(preconditions, Mapping):
            raise errors.bad_request("preconditions must be a JSON object with uid and/or resourceVersion")
        meta = obj["metadata"]
        name = meta["name"]
        uid = preconditions.get("uid")
        if uid and uid != meta["uid"]:
            raise errors.conflict(
                rt.group,
                rt.plural,
                name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta['uid']}",
            )
        rv = preconditions.get("resourceVersion")
        if rv and rv != meta["resourceVersion"]:
            raise errors.conflict(
                rt.group,
                rt.plural,
                name,
                f"Precondition failed: ResourceVersion in precondition: {rv}, "
                f"ResourceVersion in object meta: {meta['resourceVersion']}",
            )

    def _delete_namespace_contents(self, namespace: str) -> None:
        prefix = namespace + "/"
        seen: set[str] = set()
        for rt in list(self._types.values()):
            if not rt.namespaced or rt.key in seen:
                continue
            seen.add(rt.key)
            kind = self._kind(rt)
            for key in [k for k in kind.objects if k.startswith(prefix)]:
                self._commit(rt, "DELETED", kind.objects[key], None)

    def delete_collection(self, rt: ResourceType, selection: Selection, *, dry_run: bool = False) -> list[Obj]:
        with self._lock:
            out = []
            for obj in self._matching(rt, selection):
                meta = obj["metadata"]
                gone, _ = self.delete(rt, meta.get("namespace"), meta["name"], dry_run=dry_run)
                out.append(gone)
            return out

    # ------------------------------------------------------------------------------------------
    # pods/binding and pods/eviction

    def bind(self, namespace: str, name: str, binding: Any, *, dry_run: bool = False) -> Obj:
        """``POST pods/{name}/binding``: set ``spec.nodeName`` and merge the Binding's annotations."""
        pods = self.resource("", "v1", "pods")
        if not isinstance(binding, dict):
            raise errors.bad_request("the body of the request must be a JSON object describing a Binding")
        if binding.get("kind", "Binding") != "Binding":
            raise errors.bad_request(f"the kind of the object ({binding.get('kind')}) does not match Binding")
        meta = binding.get("metadata") or {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be a JSON object")
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        annotations = meta.get("annotations") or {}
        if not isinstance(annotations, dict) or not all(isinstance(v, str) for v in annotations.values()):
            raise errors.bad_request(
                "json: cannot unmarshal into Go struct field ObjectMeta.metadata.annotations of type map[string]string"
            )
        target = binding.get("target") or {}
        node = target.get("name") if isinstance(target, dict) else None
        if not isinstance(node, str) or not node:
            raise errors.invalid("", "Binding", name, [Cause("target.name", "FieldValueRequired", "Required value")])
        if target.get("kind") not in (None, "", "Node"):
            raise errors.invalid(
                "",
                "Binding",
                name,
                [Cause("target.kind", "FieldValueNotSupported", 'Unsupported value: must be "Node"')],
            )
        with self._lock:
            pod = self._current(pods, namespace, name)
            pmeta = pod["metadata"]
            uid = meta.get("uid")
            if uid and uid != pmeta["uid"]:
                raise errors.conflict(
                    "",
                    "pods/binding",
                    name,
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: {pmeta['uid']}",
                )
            if pmeta.get("deletionTimestamp"):
                raise errors.conflict(
                    "", "pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host"
                )
            bound = (pod.get("spec") or {}).get("nodeName")
            if bound:
                raise errors.conflict("", "pods/binding", name, f'pod {name} is already assigned to node "{bound}"')
            new: Obj = deep_copy(pod)
            if annotations:
                new["metadata"].setdefault("annotations", {}).update(annotations)
                causes = validate_metadata_maps(new["metadata"])
                if causes:
                    raise errors.invalid("", "Binding", name, causes)
            new.setdefault("spec", {})["nodeName"] = node
            status = new.setdefault("status", {})
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conditions.append(
                {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()}
            )
            status["conditions"] = conditions
            new["metadata"]["generation"] = int(pmeta.get("generation") or 1) + 1
            if not dry_run:
                self._commit(pods, "MODIFIED", new, pod)
        return errors.status_success(201)

    def evict(self, namespace: str, name: str, eviction: Any, *, dry_run: bool = False) -> Obj:
        """``POST pods/{name}/eviction`` (no PodDisruptionBudgets: the pod is deleted)."""
        pods = self.resource("", "v1", "pods")
        if not isinstance(eviction, dict):
            raise errors.bad_request("the body of the request must be a JSON object describing an Eviction")
        if eviction.get("kind", "Eviction") != "Eviction":
            raise errors.bad_request(f"the kind of the object ({eviction.get('kind')}) does not match Eviction")
        meta = eviction.get("metadata") or {}
        if isinstance(meta, dict) and meta.get("name") and meta["name"] != name:
            raise errors.bad_request(f"name in URL does not match name in Eviction object ({meta['name']} != {name})")
        options = eviction.get("deleteOptions") or {}
        self.delete(pods, namespace, name, preconditions=options.get("preconditions"), dry_run=dry_run)
        return errors.status_success(201)


def _parse_rv(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise errors.bad_request(f'resourceVersion: Invalid value: "{text}": must be an integer') from None
    if value < 0:
        raise errors.bad_request(f'resourceVersion: Invalid value: "{text}": must be non-negative')
    return value
