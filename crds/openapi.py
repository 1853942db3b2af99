"""OpenAPI v3 schema building blocks: one constructor per JSON type, each taking the field's description.

A CRD field is spelled through these (``string``, ``integer``, ``obj``, ``map_list`` …) so every field
has a description and every list says how server-side apply merges it (``x-kubernetes-list-type``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Schema = dict[str, Any]


def string(desc: str, **extra: Any) -> Schema:
    return {"description": desc, "type": "string", **extra}


def enum(desc: str, values: Sequence[str], **extra: Any) -> Schema:
    return {"description": desc, "type": "string", "enum": list(values), **extra}


def integer(desc: str, fmt: str = "int32", **extra: Any) -> Schema:
    return {"description": desc, "type": "integer", "format": fmt, **extra}


def boolean(desc: str, **extra: Any) -> Schema:
    return {"description": desc, "type": "boolean", **extra}


def timestamp(desc: str) -> Schema:
    return {"description": desc, "type": "string", "format": "date-time"}


def obj(desc: str, props: Mapping[str, Schema], required: Sequence[str] = (), **extra: Any) -> Schema:
    node: Schema = {"description": desc, "type": "object", "properties": dict(props)}
    if required:
        node["required"] = list(required)
    node.update(extra)
    return node


def array(desc: str, items: Schema, list_type: str = "atomic", **extra: Any) -> Schema:
    node: Schema = {"description": desc, "type": "array", "items": items, **extra}
    node["x-kubernetes-list-type"] = list_type
    return node


def map_list(desc: str, items: Schema, keys: Sequence[str], **extra: Any) -> Schema:
    """A list that is really a map keyed by ``keys`` (unique; merged per entry by server-side apply)."""
    node = array(desc, items, list_type="map", **extra)
    node["x-kubernetes-list-map-keys"] = list(keys)
    return node


def string_list(desc: str, list_type: str = "atomic", **extra: Any) -> Schema:
    return array(desc, {"type": "string"}, list_type=list_type, **extra)


def string_map(desc: str, **extra: Any) -> Schema:
    return {"description": desc, "type": "object", "additionalProperties": {"type": "string"}, **extra}
