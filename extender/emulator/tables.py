"""``meta.k8s.io/v1`` ``Table`` output (what ``kubectl get`` asks for).

Custom resources get the CRD's ``additionalPrinterColumns`` (NAME first; NAME and AGE when the
CRD declares none), built-in kinds get the columns kubectl users know.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from extender.emulator.jsonpath import JSONPath
from extender.emulator.meta import human_duration, parse_time
from extender.emulator.resources import PrinterColumn, ResourceType

__all__ = ["TableConverter", "wants_table"]

Obj = dict[str, Any]
Cell = str | int | float | bool | None


def wants_table(accept: str) -> str | None:
    """The Table version (``v1``/``v1beta1``) if the client's first acceptable type is a Table."""
    for media in accept.split(","):
        params = [p.strip() for p in media.split(";")]
        base = params[0].lower()
        opts = dict(p.split("=", 1) for p in params[1:] if "=" in p)
        if base not in ("application/json", "*/*", "application/*"):
            continue
        if opts.get("as") == "Table" and opts.get("g") == "meta.k8s.io":
            if opts.get("v") in ("v1", "v1beta1"):
                return opts["v"]
            continue
        if "as" in opts:
            continue  # another conversion we do not offer (PartialObjectMetadata…): try the next type
        return None
    return None


def _age(obj: Mapping[str, Any], now: float) -> str:
    created = parse_time((obj.get("metadata") or {}).get("creationTimestamp") or "")
    if created is None:
        return "<unknown>"
    return human_duration(now - created.timestamp())


def _col(name: str, typ: str = "string", *, fmt: str = "", priority: int = 0, description: str = "") -> Obj:
    return {"name": name, "type": typ, "format": fmt, "description": description, "priority": priority}


_NAME = _col("Name", fmt="name", description="Name must be unique within a namespace.")
_AGE = _col(
    "Age", description="CreationTimestamp is a timestamp representing the server time when this object was created."
)


def _pod_cells(pod: Mapping[str, Any], now: float) -> list[Cell]:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    total = len(spec.get("containers") or [])
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    reason = status.get("reason") or status.get("phase") or "Pending"
    for c in statuses:
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            reason = waiting["reason"]
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    return [
        pod["metadata"]["name"],
        f"{ready}/{total}",
        reason,
        str(restarts),
        _age(pod, now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
    ]


def _node_cells(node: Mapping[str, Any], now: float) -> list[Cell]:
    status = node.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    text = "Unknown" if ready is None else ("Ready" if ready.get("status") == "True" else "NotReady")
    if (node.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and "/" in k)
    info = status.get("nodeInfo") or {}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    return [
        node["metadata"]["name"],
        text,
        ",".join(r for r in roles if r) or "<none>",
        _age(node, now),
        info.get("kubeletVersion") or "",
        addresses.get("InternalIP") or "<none>",
    ]


def _event_cells(ev: Mapping[str, Any], now: float) -> list[Cell]:
    last = ev.get("lastTimestamp") or ev.get("eventTime") or (ev.get("metadata") or {}).get("creationTimestamp")
    parsed = parse_time(last or "")
    involved = ev.get("involvedObject") or {}
    return [
        human_duration(now - parsed.timestamp()) if parsed else "<unknown>",
        ev.get("type") or "",
        ev.get("reason") or "",
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        ev.get("message") or "",
    ]


_BUILTIN: dict[str, tuple[list[Obj], Callable[[Mapping[str, Any], float], list[Cell]]]] = {
    "pods": (
        [
            _NAME,
            _col("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
            _col("Status", description="The aggregate status of the containers in this pod."),
            _col(
                "Restarts", "string", description="The number of times the containers in this pod have been restarted."
            ),
            _AGE,
            _col("IP", priority=1, description="IP address allocated to the pod."),
            _col("Node", description="Name of the node where the pod is running."),
            _col("Nominated Node", priority=1, description="Name of the node where the pod is nominated."),
        ],
        _pod_cells,
    ),
    "nodes": (
        [
            _NAME,
            _col("Status", description="The status of the node"),
            _col("Roles", description="The roles of the node"),
            _AGE,
            _col("Version", description="Kubelet Version reported by the node."),
            _col("Internal-IP", priority=1, description="List of internal IPs in the node."),
        ],
        _node_cells,
    ),
    "namespaces": (
        [_NAME, _col("Status", description="The status of the namespace"), _AGE],
        lambda o, now: [o["metadata"]["name"], (o.get("status") or {}).get("phase", "Active"), _age(o, now)],
    ),
    "configmaps": (
        [_NAME, _col("Data", "integer", description="Number of data entries."), _AGE],
        lambda o, now: [
            o["metadata"]["name"],
            len(o.get("data") or {}) + len(o.get("binaryData") or {}),
            _age(o, now),
        ],
    ),
    "secrets": (
        [_NAME, _col("Type"), _col("Data", "integer"), _AGE],
        lambda o, now: [o["metadata"]["name"], o.get("type", "Opaque"), len(o.get("data") or {}), _age(o, now)],
    ),
    "events": (
        [_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message")],
        _event_cells,
    ),
    "leases": (
        [_NAME, _col("Holder", description="The holder of the lease."), _AGE],
        lambda o, now: [o["metadata"]["name"], (o.get("spec") or {}).get("holderIdentity") or "", _age(o, now)],
    ),
    "customresourcedefinitions": (
        [_NAME, _col("Created At", "date")],
        lambda o, now: [o["metadata"]["name"], o["metadata"].get("creationTimestamp")],
    ),
}


def _cell(column: PrinterColumn, path: JSONPath, obj: Mapping[str, Any], now: float) -> Cell:
    found = path.find(obj)
    if not found:
        return None
    value = found[0]
    if column.type == "date":
        parsed = parse_time(value) if isinstance(value, str) else None
        return human_duration(now - parsed.timestamp()) if parsed else (value if isinstance(value, str) else None)
    if column.type == "integer":
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return None
    if column.type == "number":
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if column.type == "boolean":
        return value if isinstance(value, bool) else None
    texts = [
        v if isinstance(v, str) else orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()
        for v in (found if len(found) > 1 else [value])
    ]
    return ",".join(texts)


class TableConverter:
    """Builds Tables for one resource type (column paths parsed once)."""

    def __init__(self, rt: ResourceType) -> None:
        self.rt = rt
        self._custom: list[tuple[PrinterColumn, JSONPath]] | None = None
        if rt.printer_columns is not None:
            cols = rt.printer_columns or (
                PrinterColumn("Age", "date", ".metadata.creationTimestamp", _AGE["description"]),
            )
            self._custom = [(c, JSONPath.parse(c.json_path)) for c in cols]

    def column_definitions(self) -> list[Obj]:
        if self._custom is not None:
            return [_NAME] + [
                _col(c.name, c.type, fmt=c.format, priority=c.priority, description=c.description)
                for c, _ in self._custom
            ]
        builtin = _BUILTIN.get(self.rt.plural)
        if builtin is not None:
            return builtin[0]
        return [_NAME, _AGE]

    def cells(self, obj: Mapping[str, Any], now: float) -> list[Cell]:
        try:
            return self._cells(obj, now)
        except (AttributeError, TypeError, ValueError, KeyError):  # a malformed object: show what we can
            width = len(self.column_definitions())
            return [(obj.get("metadata") or {}).get("name")] + [None] * (width - 1)

    def _cells(self, obj: Mapping[str, Any], now: float) -> list[Cell]:
        if self._custom is not None:
            return [obj["metadata"]["name"]] + [_cell(c, p, obj, now) for c, p in self._custom]
        builtin = _BUILTIN.get(self.rt.plural)
        if builtin is not None:
            return builtin[1](obj, now)
        return [obj["metadata"]["name"], _age(obj, now)]

    def row(self, obj: Mapping[str, Any], now: float, include_object: str) -> Obj:
        row: Obj = {"cells": self.cells(obj, now)}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata") or {},
            }
        return row

    def table(
        self,
        objs: Iterable[Mapping[str, Any]],
        *,
        version: str = "v1",
        list_meta: Mapping[str, Any] | None = None,
        include_object: str = "Metadata",
        headers: bool = True,
    ) -> Obj:
        now = time.time()
        return {
            "kind": "Table",
            "apiVersion": f"meta.k8s.io/{version}",
            "metadata": dict(list_meta or {}),
            "columnDefinitions": self.column_definitions() if headers else [],
            "rows": [self.row(o, now, include_object) for o in objs],
        }
