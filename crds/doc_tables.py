"""The tables docs/api.md shows for each kind, rendered from its CRD: every field (path, type, constraints,
description), depth first, and the printer columns ``kubectl get`` shows.
"""

from __future__ import annotations

from collections.abc import Iterator

from crds.kube_types import QUANTITY_PATTERN
from crds.openapi import Schema


def _type_of(node: Schema) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "quantity" if node.get("pattern") == QUANTITY_PATTERN else "integer or string"
    t = node.get("type", "")
    if t == "array":
        return "[]" + _type_of(node["items"])
    if t == "object" and "additionalProperties" in node:
        return "map[string]" + _type_of(node["additionalProperties"])
    if t == "integer":
        return f"integer ({node.get('format', 'int64')})"
    if t == "string" and node.get("format"):
        return f"string ({node['format']})"
    return str(t)


def _constraints(node: Schema, required: bool) -> str:
    parts: list[str] = []
    if required:
        parts.append("**required**")
    if "enum" in node:
        parts.append("one of " + ", ".join(f"`{v}`" if v else '`""`' for v in node["enum"]))
    if "default" in node:
        default = node["default"]
        shown = "{}" if default == {} else (str(default).lower() if isinstance(default, bool) else default)
        parts.append(f"default `{shown}`")
    if "minimum" in node and "maximum" in node:
        parts.append(f"{node['minimum']}..{node['maximum']}")
    elif "minimum" in node:
        parts.append(f"≥ {node['minimum']}")
    if node.get("minProperties"):
        parts.append(f"at least {node['minProperties']} entry")
    if node.get("minItems"):
        parts.append(f"at least {node['minItems']} item")
    if node.get("minLength"):
        parts.append("non-empty")
    list_type = node.get("x-kubernetes-list-type")
    if list_type == "set":
        parts.append("unique items")
    elif list_type == "map":
        keys = ", ".join(node.get("x-kubernetes-list-map-keys", []))
        parts.append(f"unique by {keys}")
    return "; ".join(parts)


def field_rows(node: Schema, prefix: str, required: bool = False) -> Iterator[tuple[str, str, str, str]]:
    """(path, type, constraints, description) for ``node`` and every field below it, depth first."""
    yield prefix, _type_of(node), _constraints(node, required), node.get("description", "")
    inner = node
    suffix = ""
    while inner.get("type") == "array":
        inner = inner["items"]
        suffix += "[]"
    if inner.get("type") != "object" or "properties" not in inner:
        return
    req = set(inner.get("required", []))
    for name, child in inner["properties"].items():
        yield from field_rows(child, f"{prefix}{suffix}.{name}", name in req)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def field_table(doc: Schema) -> str:
    schema = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    lines = ["| Field | Type | Constraints | Description |", "|---|---|---|---|"]
    req = set(schema.get("required", []))
    for top in ("spec", "status"):
        for path, type_, cons, desc in field_rows(schema["properties"][top], top, top in req):
            lines.append(f"| `{path}` | {_cell(type_)} | {_cell(cons)} | {_cell(desc)} |")
    return "\n".join(lines)


def columns_table(doc: Schema) -> str:
    lines = ["| Column | JSONPath | Shown |", "|---|---|---|"]
    for col in doc["spec"]["versions"][0]["additionalPrinterColumns"]:
        shown = "`-o wide` only" if col.get("priority", 0) else "always"
        lines.append(f"| {col['name']} | `{col['jsonPath']}` | {shown} |")
    return "\n".join(lines)
