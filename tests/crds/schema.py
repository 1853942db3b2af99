"""Validate custom resources against their CRD's ``openAPIV3Schema`` the way kube-apiserver does.

Kubernetes CRD schemas are OpenAPI v3.0 schema objects plus ``x-kubernetes-*`` extensions; this
module turns one into a JSON Schema (draft 2020-12) that ``jsonschema`` can run, and adds what the
apiserver does beyond plain JSON Schema:

* ``x-kubernetes-int-or-string`` — integer or string (the ``anyOf`` is added when missing);
* ``nullable: true`` — ``null`` becomes an accepted value;
* ``x-kubernetes-preserve-unknown-fields`` — unknown fields are kept, never rejected;
* everywhere else a schema that lists ``properties`` gets ``additionalProperties: false``: with
  ``fieldValidation=Strict`` (kubectl's default) the apiserver rejects unknown fields; with
  ``strict=False`` they are accepted here and :func:`prune` drops them, as the apiserver does;
* ``x-kubernetes-list-type: set|map`` — duplicate items / duplicate map keys are rejected;
* ``exclusiveMinimum`` / ``exclusiveMaximum`` are OpenAPI 3.0 booleans, rewritten to numbers;
* ``pattern`` uses Go RE2 semantics for ``$`` (end of text, not "before a final newline");
* ``format: date-time`` is checked (RFC 3339), as the apiserver's format registry does.

Errors come back as :class:`FieldError` with the apiserver's field notation:
``spec.tolerations[0].operator``, map keys in brackets (``spec.request[nvidia.com/gpu]``).

Also here: :func:`prune` and :func:`apply_defaults` (what the apiserver does to a stored object).
Beside it, :mod:`tests.crds.structural` checks the "structural schema" rules the apiserver enforces
on a CRD and :mod:`tests.crds.printer_columns` evaluates ``additionalPrinterColumns`` the way the
apiserver builds a Table. Nothing Kubernetes-specific is imported; ``jsonschema`` and PyYAML only.
"""

from __future__ import annotations

import ast
import copy
import datetime as dt
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError

__all__ = [
    "INT_OR_STRING",
    "FieldError",
    "apply_defaults",
    "field_path",
    "go_pattern",
    "load_crds",
    "openapi_schema",
    "prune",
    "storage_version",
    "to_json_schema",
    "validate",
    "validator",
]

Schema = dict[str, Any]

INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
"""The ``anyOf`` of ``x-kubernetes-int-or-string``."""


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def load_crds(directory: Path) -> dict[str, Schema]:
    """Every CustomResourceDefinition in ``directory/*.yaml``, by kind."""
    out: dict[str, Schema] = {}
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML has it: ten times faster
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.load_all(path.read_text(encoding="utf-8"), Loader=loader):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                out[doc["spec"]["names"]["kind"]] = doc
    return out


def storage_version(crd: Mapping[str, Any]) -> Mapping[str, Any]:
    versions: list[Mapping[str, Any]] = [v for v in crd["spec"]["versions"] if v.get("storage")]
    (version,) = versions
    return version


def openapi_schema(crd: Mapping[str, Any], version: str | None = None) -> Schema:
    """The ``openAPIV3Schema`` of ``version`` (default: the storage version)."""
    if version is None:
        found: Schema = storage_version(crd)["schema"]["openAPIV3Schema"]
        return found
    (v,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    named: Schema = v["schema"]["openAPIV3Schema"]
    return named


# --------------------------------------------------------------------------------------------
# OpenAPI v3 (Kubernetes subset) -> JSON Schema 2020-12
# --------------------------------------------------------------------------------------------


def to_json_schema(node: Mapping[str, Any], *, strict: bool = True, _junctor: bool = False) -> Schema:
    """Convert one OpenAPI v3 schema node (recursively) to JSON Schema; see the module docstring.

    Inside ``allOf``/``anyOf``/``oneOf``/``not`` a schema only adds value validations to fields the
    enclosing node declares (a structural-schema rule), so no ``additionalProperties: false`` is
    added there: a partial property list in a junctor does not close the object.
    """
    out: Schema = {}
    for key, value in node.items():
        if key in ("properties", "patternProperties", "definitions"):
            out[key] = {name: to_json_schema(child, strict=strict, _junctor=_junctor) for name, child in value.items()}
        elif key == "items" or (key == "additionalProperties" and isinstance(value, Mapping)):
            out[key] = to_json_schema(value, strict=strict, _junctor=_junctor)
        elif key == "not":
            out[key] = to_json_schema(value, strict=strict, _junctor=True)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [to_json_schema(child, strict=strict, _junctor=True) for child in value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            continue  # handled with minimum / maximum below
        else:
            out[key] = copy.deepcopy(value)
    for bound, flag in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if node.get(flag) is True and bound in node:
            out[flag] = out.pop(bound)
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in node and "allOf" not in node:
        out["anyOf"] = copy.deepcopy(INT_OR_STRING)
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        if "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    if strict and not _junctor and "properties" in node and "additionalProperties" not in node and not preserve:
        out["additionalProperties"] = False
    return out


def go_pattern(pattern: str) -> str:
    """Rewrite a Go RE2 pattern for Python ``re``: an unescaped ``$`` outside a class means ``\\Z``."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "]":  # "[]...]": a leading ] is literal
                out.append("[]")
                i += 2
                continue
        elif ch == "$":
            ch = r"\Z"
        out.append(ch)
        i += 1
    return "".join(out)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Schema) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not re.search(go_pattern(pattern), instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _list_type(validator: Any, list_type: str, instance: Any, schema: Schema) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "array"):
        return
    if list_type == "set":
        seen: list[Any] = []
        for i, item in enumerate(instance):
            if item in seen:
                yield ValidationError(f"Duplicate value: {item!r}", path=[i])
            seen.append(item)
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys", [])
        item_props = schema.get("items", {}).get("properties", {})
        seen_keys: list[tuple[Any, ...]] = []
        for i, item in enumerate(instance):
            if not isinstance(item, Mapping):
                continue
            key = tuple(item.get(k, item_props.get(k, {}).get("default")) for k in keys)
            if key in seen_keys:
                shown = ", ".join(f"{k}={v!r}" for k, v in zip(keys, key, strict=True))
                yield ValidationError(f"Duplicate value: {{{shown}}}", path=[i])
            seen_keys.append(key)


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z")

FORMATS = FormatChecker(formats=())


def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not _RFC3339.match(value):
        return False
    text = value.upper().replace(" ", "T").replace("Z", "+00:00")
    head, _, rest = text.partition(".")
    if rest:  # Python accepts at most 6 fractional digits
        digits = re.match(r"\d+", rest)
        assert digits is not None
        text = head + "." + digits.group()[:6].ljust(6, "0") + rest[digits.end() :]
    dt.datetime.fromisoformat(text)
    return True


FORMATS.checks("date-time", raises=ValueError)(_is_date_time)  # not as a decorator: jsonschema is untyped


_Validator = jsonschema.validators.extend(
    Draft202012Validator, {"pattern": _pattern, "x-kubernetes-list-type": _list_type}
)


def validator(node: Mapping[str, Any], *, strict: bool = True) -> Any:
    """A ``jsonschema`` validator for one OpenAPI node (e.g. a CRD's openAPIV3Schema)."""
    return _Validator(to_json_schema(node, strict=strict), format_checker=FORMATS)


# --------------------------------------------------------------------------------------------
# Errors in apiserver notation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldError:
    field: str  # e.g. "spec.tolerations[0].operator"
    message: str
    keyword: str  # the JSON Schema keyword that failed

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def field_path(schema: Mapping[str, Any], path: Any) -> str:
    """``spec.request[nvidia.com/gpu]``-style notation for a data path, guided by the schema."""
    out = ""
    node: Mapping[str, Any] = schema
    for token in path:
        if isinstance(token, int):
            out += f"[{token}]"
            node = node.get("items", {})
            continue
        props = node.get("properties", {})
        extra = node.get("additionalProperties")
        if token in props:
            out += f".{token}" if out else token
            node = props[token]
        elif isinstance(extra, Mapping):
            out += f"[{token}]"
            node = extra
        else:
            out += f".{token}" if out else token
            node = {}
    return out or "<root>"


def _field_errors(schema: Mapping[str, Any], error: ValidationError) -> Iterator[FieldError]:
    where = field_path(schema, error.absolute_path)
    prefix = "" if where == "<root>" else where + "."
    if error.validator == "required":
        missing = ast.literal_eval(error.message.removesuffix(" is a required property"))
        yield FieldError(prefix + str(missing), "Required value", "required")
    elif error.validator == "additionalProperties" and error.validator_value is False:
        known = set(error.schema.get("properties", {}))
        for name in error.instance:
            if name not in known:
                yield FieldError(prefix + name, "field not declared in schema", "additionalProperties")
    elif error.validator in ("anyOf", "oneOf") and error.context:
        # the deepest sub-error is usually the actionable one ("value: 'x' is too long")
        best = max(error.context, key=lambda e: len(e.absolute_path))
        inner = field_path(schema, best.absolute_path)
        yield FieldError(
            where, f"must satisfy one of the allowed forms; closest: {inner}: {best.message}", str(error.validator)
        )
    else:
        yield FieldError(where, error.message, str(error.validator))


def validate(obj: Any, crd_or_schema: Mapping[str, Any], *, strict: bool = True) -> list[FieldError]:
    """Every error the apiserver would report for ``obj`` (empty list: valid).

    ``crd_or_schema`` is a CustomResourceDefinition (its storage version's schema is used) or an
    OpenAPI schema node. ``strict`` models ``fieldValidation=Strict``: unknown fields are errors.
    """
    schema = openapi_schema(crd_or_schema) if crd_or_schema.get("kind") == "CustomResourceDefinition" else crd_or_schema
    v = validator(schema, strict=strict)
    errors = [fe for e in v.iter_errors(obj) for fe in _field_errors(v.schema, e)]
    return sorted(set(errors), key=lambda e: (e.field, e.keyword, e.message))


# --------------------------------------------------------------------------------------------
# Pruning and defaulting (what the apiserver does to a stored object)
# --------------------------------------------------------------------------------------------


def prune(obj: Any, node: Mapping[str, Any], *, _root: bool = True) -> Any:
    """A copy of ``obj`` without the fields ``node`` does not declare (apiserver pruning)."""
    if isinstance(obj, list):
        items = node.get("items", {})
        return [prune(x, items, _root=False) for x in obj]
    if not isinstance(obj, Mapping):
        return copy.deepcopy(obj)
    props = node.get("properties", {})
    extra = node.get("additionalProperties")
    keep_all = node.get("x-kubernetes-preserve-unknown-fields") is True
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if _root and key in ("apiVersion", "kind", "metadata"):
            out[key] = copy.deepcopy(value)
        elif key in props:
            out[key] = prune(value, props[key], _root=False)
        elif isinstance(extra, Mapping):
            out[key] = prune(value, extra, _root=False)
        elif extra is True or keep_all:
            out[key] = copy.deepcopy(value)
    return out


def apply_defaults(obj: Any, node: Mapping[str, Any]) -> Any:
    """A copy of ``obj`` with the schema's ``default`` values filled in, top-down.

    Like the apiserver's structural defaulting: a missing property (or ``null`` where not nullable)
    gets its default, then defaulting descends into the result, so ``spec: {default: {}}`` lets the
    defaults of ``spec``'s own fields apply too.
    """
    obj = copy.deepcopy(obj)
    _default_in_place(obj, node)
    return obj


def _default_in_place(obj: Any, node: Mapping[str, Any]) -> None:
    if isinstance(obj, list):
        for item in obj:
            _default_in_place(item, node.get("items", {}))
        return
    if not isinstance(obj, dict):
        return
    props = node.get("properties", {})
    for name, child in props.items():
        if "default" in child and (name not in obj or (obj[name] is None and not child.get("nullable"))):
            obj[name] = copy.deepcopy(child["default"])
    extra = node.get("additionalProperties")
    for key, value in obj.items():
        if key in props:
            _default_in_place(value, props[key])
        elif isinstance(extra, Mapping):
            _default_in_place(value, extra)
