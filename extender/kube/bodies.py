"""The request bodies the writer sends and the answers it synthesises: plain data, no I/O.

This module does NOT write to the Kubernetes API (only :mod:`extender.kube.writer` does): it
builds the Binding, Eviction, Event, Lease and DeleteOptions bodies, the ``Status`` answers the
writer returns when a write turns out to be already done, the objects an apply brings up to date
(and whether it has to), and the ``metav1`` time formats they carry.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from extender import wellknown

__all__ = [
    "COORDINATION",
    "Obj",
    "binding",
    "copy_json",
    "delete_if_unchanged",
    "event",
    "involved_object",
    "kube_time",
    "lease",
    "micro_time",
    "node_topology",
    "node_topology_update",
    "quota_update",
    "success",
]

Obj = dict[str, Any]

COORDINATION: Final = "coordination.k8s.io"
EVENT_MESSAGE_MAX: Final = 1024
"""Characters of an Event's message kept (the rest is cut)."""


def micro_time(dt: datetime | None = None) -> str:
    """``metav1.MicroTime``: RFC 3339 with microseconds and ``Z``."""
    return (dt or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def kube_time(dt: datetime) -> str:
    """``metav1.Time``: RFC 3339 to the second, with ``Z``."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data, as the API would give it back (tuples become lists)."""
    return orjson.loads(orjson.dumps(value))


def success(code: int, **fields: Any) -> Obj:
    """A ``Status`` of ``Success`` with ``code`` and ``fields`` (``details``, ``reason``,
    ``message``): the answer of a write found already done."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code, **fields}


def binding(namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str] | None) -> Obj:
    """The ``pods/binding`` body: ``metadata.uid`` is the precondition, ``annotations`` are stored
    with ``spec.nodeName`` atomically."""
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "annotations": dict(annotations or {})},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def delete_if_unchanged(uid: str, resource_version: str) -> Obj:
    """``DeleteOptions`` deleting only the object of this ``uid`` at this ``resourceVersion``."""
    return {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": uid, "resourceVersion": resource_version},
    }


def lease(namespace: str, name: str, spec: Mapping[str, Any]) -> Obj:
    """A new coordination/v1 Lease."""
    return {
        "apiVersion": f"{COORDINATION}/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": dict(spec),
    }


def involved_object(kind: str, name: str, namespace: str | None, current: Mapping[str, Any]) -> Obj:
    """The ``involvedObject`` of an Event about one of the project's objects (``current``: the
    object as last read, for its uid)."""
    return {
        "apiVersion": wellknown.API_VERSION,
        "kind": kind,
        "name": name,
        "namespace": namespace or "",
        "uid": (current.get("metadata") or {}).get("uid", ""),
    }


def event(
    *,
    namespace: str,
    name: str,
    ref: Obj,
    type_: str,
    reason: str,
    message: str,
    component: str,
    instance: str,
    first: str,
) -> Obj:
    """A new core/v1 Event (``count`` 1, first and last seen at ``first``)."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": ref,
        "reason": reason,
        "message": message[:EVENT_MESSAGE_MAX],
        "type": type_,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": instance,
        "firstTimestamp": first,
        "lastTimestamp": first,
        "count": 1,
    }


def quota_update(current: Obj, want: Mapping[str, Any], labels: Mapping[str, str]) -> Obj | None:
    """``current`` Quota with ``want``'s spec and ``labels`` (its other labels, annotations and
    status kept) — or None when it already has them."""
    meta = current.get("metadata") or {}
    have = meta.get("labels") or {}
    if current.get("spec") == want.get("spec") and all(have.get(k) == x for k, x in labels.items()):
        return None
    return {**current, "metadata": {**meta, "labels": {**have, **labels}}, "spec": want.get("spec")}


def node_topology(name: str, spec: Obj, labels: Mapping[str, str]) -> Obj:
    """A new NodeTopology of this spec and labels."""
    return {
        "apiVersion": wellknown.API_VERSION,
        "kind": wellknown.KIND_NODETOPOLOGY,
        "metadata": {"name": name, **({"labels": dict(labels)} if labels else {})},
        "spec": spec,
    }


def node_topology_update(current: Obj, spec: Obj, labels: Mapping[str, str], gone: set[str]) -> Obj | None:
    """``current`` NodeTopology with this spec, these labels set and the ``gone`` labels removed —
    or None when it already is so."""
    meta = current.get("metadata") or {}
    have_labels = meta.get("labels") or {}
    if (
        current.get("spec") == spec
        and all(have_labels.get(k) == v_ for k, v_ in labels.items())
        and not gone & set(have_labels)
    ):
        return None
    kept = {k: v_ for k, v_ in have_labels.items() if k not in gone}
    return {
        **current,
        "metadata": {**meta, "labels": {**kept, **labels}},
        "spec": spec,
    }
