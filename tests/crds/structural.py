"""The structural-schema rules kube-apiserver enforces when a CRD is created ("Specifying a
structural schema" in the Kubernetes CRD documentation) and the rules of the x-kubernetes-*
extensions: every field typed, defaults valid and pruned-stable, list types well-formed, no
type-defining keys inside allOf/anyOf/oneOf/not, metadata restricted to name and generateName.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .schema import INT_OR_STRING, Schema, prune, validate

__all__ = ["structural_errors"]

_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
_SCALAR_TYPES = frozenset({"string", "integer", "number", "boolean"})


def _is_int_or_string_pattern(node: Mapping[str, Any]) -> bool:
    if node.get("anyOf") == INT_OR_STRING:
        return True
    all_of = node.get("allOf")
    if not all_of:
        return False
    return isinstance(all_of[0], Mapping) and all_of[0] == {"anyOf": INT_OR_STRING}


def structural_errors(node: Mapping[str, Any], path: str = "") -> list[str]:
    """Violations of the structural-schema rules and of the x-kubernetes-* extension rules.

    See "Specifying a structural schema" in the Kubernetes CRD documentation. ``path`` is the
    location shown in messages (``.spec.properties.foo`` style, like the apiserver).
    """
    errors: list[str] = []
    _check_node(node, path or "openAPIV3Schema", errors, root=True)
    metadata = node.get("properties", {}).get("metadata")
    if metadata is not None:
        allowed = {"type", "description"}
        if set(metadata) - allowed - {"properties"} or set(metadata.get("properties", {})) - {
            "name",
            "generateName",
        }:
            errors.append(
                f"{path or 'openAPIV3Schema'}.properties.metadata: only name and generateName may be restricted"
            )
    return errors


def _check_node(node: Mapping[str, Any], where: str, errors: list[str], *, root: bool = False) -> None:
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    type_ = node.get("type")
    if not type_ and not int_or_string and not preserve:
        errors.append(f"{where}.type: Required value: must not be empty for specified object fields")
    if int_or_string:
        if type_:
            errors.append(f"{where}.type: Forbidden: must be empty with x-kubernetes-int-or-string")
        if ("anyOf" in node or "allOf" in node) and not _is_int_or_string_pattern(node):
            errors.append(
                f"{where}: int-or-string must use anyOf: [{{type: integer}}, {{type: string}}] (or allOf with it first)"
            )
    if root and type_ != "object":
        errors.append(f"{where}.type: Invalid value: {type_!r}: must be object at the root")
    if "properties" in node and "additionalProperties" in node and node["additionalProperties"] is not True:
        errors.append(
            f"{where}.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        )
    if node.get("additionalProperties") is False:
        errors.append(f"{where}.additionalProperties: false is pointless: unknown fields are pruned or rejected anyway")
    if node.get("uniqueItems"):
        errors.append(f"{where}.uniqueItems: Forbidden: use x-kubernetes-list-type set or map instead")
    if node.get("x-kubernetes-preserve-unknown-fields") is False:
        errors.append(f"{where}.x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined")
    if root and node.get("nullable"):
        errors.append(f"{where}.nullable: Forbidden: nullable cannot be true at the root")
    list_type = node.get("x-kubernetes-list-type")
    if list_type is not None:
        _check_list_type(node, list_type, where, errors)
    elif "x-kubernetes-list-map-keys" in node:
        errors.append(f"{where}: x-kubernetes-list-map-keys needs x-kubernetes-list-type: map")
    map_type = node.get("x-kubernetes-map-type")
    if map_type is not None:
        if type_ != "object":
            errors.append(f"{where}.x-kubernetes-map-type: only for type object")
        if map_type not in ("granular", "atomic"):
            errors.append(f"{where}.x-kubernetes-map-type: Unsupported value: {map_type!r}")
    for value in node.get("enum", []):
        if isinstance(type_, str) and not _matches_type(value, type_):
            errors.append(f"{where}.enum: Invalid value: {value!r}: must be of type {type_}")
    if "default" in node:
        problems = validate(node["default"], _without_default(node), strict=True)
        if problems:
            errors.append(f"{where}.default: Invalid value: {problems[0]}")
        elif prune(node["default"], node, _root=False) != node["default"]:
            errors.append(f"{where}.default: Invalid value: must not have fields the schema prunes")
    for name, child in node.get("properties", {}).items():
        _check_node(child, f"{where}.properties[{name}]", errors)
    if isinstance(node.get("additionalProperties"), Mapping):
        _check_node(node["additionalProperties"], f"{where}.additionalProperties", errors)
    if "items" in node:
        if type_ != "array":
            errors.append(f"{where}.items: only for type array")
        _check_node(node["items"], f"{where}.items", errors)
    elif type_ == "array":
        errors.append(f"{where}.items: Required value: must be specified for type array")
    for junctor in _JUNCTORS:
        if junctor not in node:
            continue
        children = [node[junctor]] if junctor == "not" else node[junctor]
        for i, child in enumerate(children):
            skip_types = (junctor == "anyOf" and int_or_string and _is_int_or_string_pattern(node)) or (
                junctor == "allOf" and int_or_string and i == 0 and child == {"anyOf": INT_OR_STRING}
            )
            if not skip_types:
                _check_junctor(child, node, f"{where}.{junctor}" + ("" if junctor == "not" else f"[{i}]"), errors)


def _without_default(node: Mapping[str, Any]) -> Schema:
    return {k: v for k, v in node.items() if k != "default"}


def _matches_type(value: Any, type_: str) -> bool:
    checks = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "object": lambda v: isinstance(v, Mapping),
        "array": lambda v: isinstance(v, list),
    }
    return checks.get(type_, lambda v: True)(value)


def _check_list_type(node: Mapping[str, Any], list_type: str, where: str, errors: list[str]) -> None:
    if node.get("type") != "array":
        errors.append(f"{where}.x-kubernetes-list-type: only for type array")
        return
    items = node.get("items", {})
    if items.get("nullable") and list_type in ("set", "map"):
        errors.append(
            f"{where}.items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is {list_type}"
        )
    if list_type == "set":
        if items.get("type") == "object" and items.get("x-kubernetes-map-type") != "atomic":
            errors.append(f"{where}.items.x-kubernetes-map-type: must be atomic as item of a list with list-type set")
        if items.get("type") == "array" and items.get("x-kubernetes-list-type", "atomic") != "atomic":
            errors.append(f"{where}.items.x-kubernetes-list-type: must be atomic as item of a list with list-type set")
    elif list_type == "map":
        keys = node.get("x-kubernetes-list-map-keys") or []
        if not keys:
            errors.append(f"{where}.x-kubernetes-list-map-keys: Required value for list-type map")
        if items.get("type") != "object":
            errors.append(f"{where}.items.type: map lists need object items")
        required = set(items.get("required", []))
        for key in keys:
            prop = items.get("properties", {}).get(key)
            if prop is None:
                errors.append(f"{where}.x-kubernetes-list-map-keys: {key!r} is not a property of the items")
            elif key not in required and "default" not in prop:
                errors.append(f"{where}.x-kubernetes-list-map-keys: {key!r} must be required or have a default")
            elif prop.get("type") not in _SCALAR_TYPES:
                errors.append(f"{where}.x-kubernetes-list-map-keys: {key!r} must be a scalar")
    elif list_type != "atomic":
        errors.append(f"{where}.x-kubernetes-list-type: Unsupported value: {list_type!r}")


_FORBIDDEN_IN_JUNCTORS = ("description", "type", "default", "additionalProperties", "nullable")


def _check_junctor(child: Mapping[str, Any], owner: Mapping[str, Any], where: str, errors: list[str]) -> None:
    """Inside allOf/anyOf/oneOf/not: value validations only, on fields the owner also specifies."""
    for key in _FORBIDDEN_IN_JUNCTORS:
        if key in child:
            junctor = where.rsplit(".", 1)[-1].split("[", maxsplit=1)[0]
            errors.append(f"{where}.{key}: Forbidden: must not be used inside {junctor}")
    for name, sub in child.get("properties", {}).items():
        owner_prop = owner.get("properties", {}).get(name)
        if owner_prop is None:
            errors.append(f"{where}.properties[{name}]: Required value: must be specified outside the junctor too")
        else:
            _check_junctor(sub, owner_prop, f"{where}.properties[{name}]", errors)
    if "items" in child:
        if "items" not in owner:
            errors.append(f"{where}.items: Required value: must be specified outside the junctor too")
        else:
            _check_junctor(child["items"], owner["items"], f"{where}.items", errors)
    for junctor in _JUNCTORS:
        if junctor in child:
            nested = [child[junctor]] if junctor == "not" else child[junctor]
            for i, sub in enumerate(nested):
                _check_junctor(sub, owner, f"{where}.{junctor}" + ("" if junctor == "not" else f"[{i}]"), errors)
