"""Structural ``openAPIV3Schema`` of a CRD version: pruning, defaulting and validation.

Order as in the apiserver: unknown fields are found (and pruned, or rejected with
``fieldValidation=Strict``), ``default`` values are applied, then the object is validated.
Validation uses ``jsonschema``'s Draft 4 validator (OpenAPI 3.0 keeps Draft 4's boolean
``exclusiveMinimum``) over a translation of the schema:

* ``nullable: true`` admits ``null``;
* ``x-kubernetes-int-or-string: true`` admits an integer or a string;
* ``x-kubernetes-preserve-unknown-fields: true`` keeps unknown fields below that node;
* ``x-kubernetes-embedded-resource`` keeps ``apiVersion``/``kind``/``metadata``;
* at the root, ``apiVersion``, ``kind`` and ``metadata`` are never pruned nor validated against
  the CRD schema (``metadata`` is validated as ObjectMeta instead).

Not supported: CEL rules (``x-kubernetes-validations``), ``x-kubernetes-list-type`` uniqueness,
``format`` checks.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from jsonschema import Draft4Validator
from jsonschema.exceptions import SchemaError, ValidationError

from extender.emulator.errors import Cause
from extender.emulator.meta import deep_copy

__all__ = ["CompiledSchema", "check_schema"]

_ROOT_META = ("apiVersion", "kind", "metadata")
_COPY_KEYS = (
    "type",
    "required",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "multipleOf",
    "minProperties",
    "maxProperties",
)


def _translate(node: Mapping[str, Any], *, root: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {k: deep_copy(node[k]) for k in _COPY_KEYS if k in node}
    props = node.get("properties")
    if isinstance(props, Mapping):
        out["properties"] = {
            k: _translate(v) for k, v in props.items() if isinstance(v, Mapping) and not (root and k in _ROOT_META)
        }
    if root and "required" in out:
        out["required"] = [r for r in out["required"] if r not in _ROOT_META]
        if not out["required"]:
            del out["required"]
    addl = node.get("additionalProperties")
    if isinstance(addl, Mapping):
        out["additionalProperties"] = _translate(addl)
    items = node.get("items")
    if isinstance(items, Mapping):
        out["items"] = _translate(items)
    for combinator in ("allOf", "anyOf", "oneOf"):
        subs = node.get(combinator)
        if isinstance(subs, Sequence):
            out[combinator] = [_translate(s) for s in subs if isinstance(s, Mapping)]
    if isinstance(node.get("not"), Mapping):
        out["not"] = _translate(node["not"])
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["type"] = ["integer", "string"]
    if node.get("nullable"):
        typ = out.get("type")
        if isinstance(typ, str):
            out["type"] = [typ, "null"]
        elif isinstance(typ, list) and "null" not in typ:
            out["type"] = [*typ, "null"]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    return out


def check_schema(schema: Mapping[str, Any]) -> list[str]:
    """Problems with a CRD's ``openAPIV3Schema`` (empty when it can be used).

    The answer depends on the schema's content only, so it is remembered by that content: every
    emulator of a process (each simulation, each test's cluster) registers the same CRDs, and the
    meta-schema check is most of what registering one costs."""
    try:
        content = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not plain JSON (keys that are not strings): checked as it is
        return _check_schema(schema)
    return list(_check_schema_json(content))


@functools.lru_cache(maxsize=256)
def _check_schema_json(content: bytes) -> tuple[str, ...]:
    return tuple(_check_schema(orjson.loads(content)))


def _check_schema(schema: Mapping[str, Any]) -> list[str]:
    try:
        Draft4Validator.check_schema(_translate(schema, root=True))
    except SchemaError as exc:
        return [exc.message]
    return []


def _value(v: Any) -> str:
    if isinstance(v, str):
        return orjson.dumps(v).decode()
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    return orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()


def _path(parts: Sequence[str | int]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += f".{p}" if out else str(p)
    return out


class CompiledSchema:
    """A CRD version's schema, compiled once and applied to every write."""

    __slots__ = ("_raw", "_validator")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._raw = schema
        self._validator = Draft4Validator(_translate(schema, root=True))

    # -- unknown fields -------------------------------------------------------------------
    def prune(self, obj: dict[str, Any]) -> list[str]:
        """Remove unknown fields (and nulls where not nullable) in place; return their paths."""
        unknown: list[str] = []
        _prune(obj, self._raw, [], unknown, root=True)
        return unknown

    # -- defaults -------------------------------------------------------------------------
    def apply_defaults(self, obj: dict[str, Any]) -> None:
        _default(obj, self._raw, root=True)

    # -- validation -----------------------------------------------------------------------
    def validate(self, obj: Mapping[str, Any]) -> list[Cause]:
        causes: list[Cause] = []
        for err in sorted(self._validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path]):
            causes.append(_cause(err))
        return causes


def _prune(value: Any, schema: Mapping[str, Any], path: list[str | int], unknown: list[str], *, root: bool) -> None:
    if isinstance(value, dict):
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        addl = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        embedded = bool(schema.get("x-kubernetes-embedded-resource"))
        for key in list(value):
            if (root or embedded) and key in _ROOT_META:
                continue
            child = props.get(key)
            if child is None and isinstance(addl, Mapping):
                child = addl
            if child is None:
                if not preserve and addl is not True:
                    unknown.append(_path([*path, key]))
                    del value[key]
                continue
            if value[key] is None and not child.get("nullable"):
                del value[key]
                continue
            _prune(value[key], child, [*path, key], unknown, root=False)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, element in enumerate(value):
                _prune(element, items, [*path, i], unknown, root=False)


def _default(value: Any, schema: Mapping[str, Any], *, root: bool) -> None:
    if isinstance(value, dict):
        props = schema.get("properties")
        if isinstance(props, Mapping):
            for key, child in props.items():
                if (root and key in _ROOT_META) or not isinstance(child, Mapping):
                    continue
                if key not in value and "default" in child:
                    value[key] = deep_copy(child["default"])
                if key in value:
                    _default(value[key], child, root=False)
        addl = schema.get("additionalProperties")
        if isinstance(addl, Mapping):
            for key, child_value in value.items():
                if not isinstance(props, Mapping) or key not in props:
                    _default(child_value, addl, root=False)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for element in value:
                _default(element, items, root=False)


def _cause(err: ValidationError) -> Cause:
    parts: list[str | int] = list(err.absolute_path)
    field = _path(parts)
    where = field or "<root>"
    v = err.instance
    kw = err.validator
    arg: Any = err.validator_value
    if kw == "required":
        missing = err.message.split("'")[1] if "'" in err.message else "?"
        return Cause(_path([*parts, missing]), "FieldValueRequired", "Required value")
    if kw == "type":
        types = arg if isinstance(arg, list) else [arg]
        want = ",".join(t for t in types if t != "null")
        return Cause(
            field,
            "FieldValueTypeInvalid",
            f"Invalid value: {_value(v)}: {where} in body must be of type {want}: {_value(v)}",
        )
    if kw == "enum":
        supported = ", ".join(_value(a) for a in arg)
        return Cause(field, "FieldValueNotSupported", f"Unsupported value: {_value(v)}: supported values: {supported}")
    messages = {
        "minimum": f"should be greater than or equal to {arg}",
        "maximum": f"should be less than or equal to {arg}",
        "exclusiveMinimum": "should be greater than the minimum",
        "exclusiveMaximum": "should be less than the maximum",
        "pattern": f"should match '{arg}'",
        "minLength": f"should be at least {arg} chars long",
        "maxLength": f"should be at most {arg} chars long",
        "minItems": f"should have at least {arg} items",
        "maxItems": f"should have at most {arg} items",
        "uniqueItems": "shouldn't contain duplicates",
        "multipleOf": f"should be a multiple of {arg}",
        "minProperties": f"should have at least {arg} properties",
        "maxProperties": f"should have at most {arg} properties",
    }
    text = messages.get(str(kw), err.message)
    return Cause(field, "FieldValueInvalid", f"Invalid value: {_value(v)}: {where} in body {text}")
