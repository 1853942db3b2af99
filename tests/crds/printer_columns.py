"""``additionalPrinterColumns`` evaluated the way kube-apiserver builds a Table for ``kubectl get``:
column paths (with client-go jsonpath filter steps), the schema node a column reads, and the cells
of one object.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .schema import storage_version

__all__ = ["ColumnFilter", "column_path", "column_schema", "printer_cells"]

_OBJECT_META_FIELDS = frozenset(
    {
        "name", "generateName", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
        "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
        "finalizers", "managedFields", "selfLink",
    }
)  # fmt: skip


@dataclass(frozen=True)
class ColumnFilter:
    """A ``[?(@.key==value)]`` step of a printer column path: the list elements whose ``key`` is
    ``value`` (client-go jsonpath filters, as in ``.status.conditions[?(@.type=="Ready")]``)."""

    key: str
    value: str | int


_FILTER = re.compile(r"""\[\?\(@\.(?P<key>[A-Za-z0-9_]+)\s*==\s*(?P<value>"[^"]*"|'[^']*'|-?\d+)\)\]""")


def column_path(json_path: str) -> list[str | ColumnFilter]:
    """Split a printer column path (``.spec.request.nvidia\\.com/gpu``, or with filter steps
    ``.spec.tiers[?(@.level==1)].name``) into its keys and filters."""
    if not json_path.startswith("."):
        raise ValueError(f"{json_path!r}: a printer column path starts with '.'")
    keys: list[str | ColumnFilter] = []
    current = ""
    i = 1
    while i < len(json_path):
        ch = json_path[i]
        if ch == "\\" and i + 1 < len(json_path):
            current += json_path[i + 1]
            i += 2
            continue
        if ch == "[" and current and (m := _FILTER.match(json_path, i)):
            raw = m["value"]
            keys += [current, ColumnFilter(m["key"], raw[1:-1] if raw[0] in "'\"" else int(raw))]
            current = ""
            i = m.end()
            if i < len(json_path) and json_path[i] != ".":
                raise ValueError(f"{json_path!r}: a filter must be followed by '.' or end the path")
            i += 1
            continue
        if ch in "[]*{}()?@$ ":
            raise ValueError(
                f"{json_path!r}: only simple paths and [?(@.key==value)] filters are allowed, found {ch!r}"
            )
        if ch == ".":
            if not current:
                raise ValueError(f"{json_path!r}: empty path segment")
            keys.append(current)
            current = ""
        else:
            current += ch
        i += 1
    if current:
        keys.append(current)
    elif not keys or not isinstance(keys[-1], ColumnFilter):
        raise ValueError(f"{json_path!r}: empty path segment")
    return keys


def column_schema(schema: Mapping[str, Any], json_path: str) -> Mapping[str, Any]:
    """The schema node a printer column's JSONPath reaches; KeyError naming the first unknown key.

    ``metadata`` is not spelled out in CRD schemas; the ObjectMeta fields are accepted there
    (``creationTimestamp`` as a date-time string). A filter step needs a list whose items have
    the filtered key.
    """
    keys = column_path(json_path)
    if keys[0] == "metadata":
        if len(keys) < 2 or keys[1] not in _OBJECT_META_FIELDS:
            raise KeyError(f"{json_path}: {keys[1:2]} is not an ObjectMeta field")
        if keys[1] in ("creationTimestamp", "deletionTimestamp"):
            return {"type": "string", "format": "date-time"}
        if keys[1] in ("labels", "annotations"):
            return {"type": "string"} if len(keys) == 3 else {"type": "object"}
        return {"type": "integer" if keys[1] == "generation" else "string"}
    node: Mapping[str, Any] = schema
    for key in keys:
        if isinstance(key, ColumnFilter):
            items = node.get("items") if node.get("type") == "array" else None
            if not isinstance(items, Mapping) or key.key not in items.get("properties", {}):
                raise KeyError(f"{json_path}: filter on {key.key!r} needs a list of objects with that field")
            node = items
            continue
        props = node.get("properties", {})
        extra = node.get("additionalProperties")
        if key in props:
            node = props[key]
        elif isinstance(extra, Mapping):
            node = extra
        else:
            raise KeyError(f"{json_path}: no field {key!r} in the schema")
    return node


def printer_cells(obj: Mapping[str, Any], crd: Mapping[str, Any], *, wide: bool = False) -> dict[str, Any]:
    """Column name → cell value, as the apiserver's Table conversion fills it (None when absent)."""
    cells: dict[str, Any] = {}
    for col in storage_version(crd).get("additionalPrinterColumns", []):
        if col.get("priority", 0) and not wide:
            continue
        value: Any = obj
        for key in column_path(col["jsonPath"]):
            if isinstance(key, ColumnFilter):  # the first match, as the apiserver's Table takes results[0][0]
                found = (
                    [v for v in value if isinstance(v, Mapping) and v.get(key.key) == key.value]
                    if isinstance(value, list)
                    else []
                )
                value = found[0] if found else None
            else:
                value = value.get(key) if isinstance(value, Mapping) else None
        if value is not None and col["type"] == "string" and not isinstance(value, str):
            value = str(value)
        cells[col["name"]] = value
    return cells
