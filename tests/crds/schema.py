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

Also here: :func:`apply_defaults` (structural defaulting), :func:`structural_errors` (the
"structural schema" rules the apiserver enforces on a CRD) and :func:`printer_cells` (evaluating
``additionalPrinterColumns`` the way the apiserver builds a Table). Nothing Kubernetes-specific
is imported; ``jsonschema`` and PyYAML only.
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
    "FieldError",
    "apply_defaults",
    "column_schema",
    "field_path",
    "go_pattern",
    "load_crds",
    "openapi_schema",
    "printer_cells",
    "prune",
    "structural_errors",
    "to_json_schema",
    "validate",
    "validator",
]

Schema = dict[str, Any]

_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
_SCALAR_TYPES = frozenset({"string", "integer", "number", "boolean"})
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
_OBJECT_META_FIELDS = frozenset(
    {
        "name", "generateName", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
        "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
        "finalizers", "managedFields", "selfLink",
    }
)  # fmt: skip


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
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    return version


def openapi_schema(crd: Mapping[str, Any], version: str | None = None) -> Schema:
    """The ``openAPIV3Schema`` of ``version`` (default: the storage version)."""
    if version is None:
        return storage_version(crd)["schema"]["openAPIV3Schema"]
    (v,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return v["schema"]["openAPIV3Schema"]


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
        out["anyOf"] = copy.deepcopy(_INT_OR_STRING)
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


@FORMATS.checks("date-time", raises=ValueError)
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


# --------------------------------------------------------------------------------------------
# Structural schema rules (what the apiserver checks when the CRD is created)
# --------------------------------------------------------------------------------------------


def _is_int_or_string_pattern(node: Mapping[str, Any]) -> bool:
    if node.get("anyOf") == _INT_OR_STRING:
        return True
    all_of = node.get("allOf")
    return bool(all_of) and isinstance(all_of[0], Mapping) and all_of[0] == {"anyOf": _INT_OR_STRING}


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
                junctor == "allOf" and int_or_string and i == 0 and child == {"anyOf": _INT_OR_STRING}
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


# --------------------------------------------------------------------------------------------
# Printer columns
# --------------------------------------------------------------------------------------------


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
