"""The CustomResourceDefinition strategy: what a CRD must be to be accepted, and its status.

:func:`validate_crd` checks, as the apiextensions-apiserver does (the subset the emulator reads):
first the shape (the types of the fields the emulator reads), then the names (``spec.group`` a
domain with a dot, ``spec.names.plural`` and short names DNS labels, ``metadata.name`` equal to
``<plural>.<group>``), the scope, the versions (exactly one storage version; every version has a
structural ``openAPIV3Schema`` of type ``object``, printer columns of a known type with a valid
JSONPath, selectable fields that are simple paths), and on update the immutable group, scope and
plural. :func:`crd_status` is the status of an accepted CRD (``NamesAccepted``, ``Established``).
Whether another CRD already serves the names is the registry's check.
"""

from __future__ import annotations

from typing import Any

from extender.emulator.errors import Cause
from extender.emulator.jsonpath import JSONPath, JSONPathError
from extender.emulator.meta import validate_dns_label, validate_dns_subdomain
from extender.emulator.schema import CompiledSchema, check_schema

__all__ = ["crd_status", "validate_crd"]

Obj = dict[str, Any]

_STR: Obj = {"type": "string"}
_STRS: Obj = {"type": "array", "items": _STR}
_CRD_SHAPE = CompiledSchema(
    {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["group", "names", "scope", "versions"],
                "properties": {
                    "group": _STR,
                    "scope": _STR,
                    "names": {
                        "type": "object",
                        "required": ["plural", "kind"],
                        "properties": {
                            "plural": _STR,
                            "singular": _STR,
                            "kind": _STR,
                            "listKind": _STR,
                            "shortNames": _STRS,
                            "categories": _STRS,
                        },
                    },
                    "versions": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["name", "served", "storage"],
                            "properties": {
                                "name": _STR,
                                "served": {"type": "boolean"},
                                "storage": {"type": "boolean"},
                                "deprecated": {"type": "boolean"},
                                "schema": {"type": "object"},
                                "subresources": {"type": "object"},
                                "additionalPrinterColumns": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["name", "type", "jsonPath"],
                                        "properties": {
                                            "name": _STR,
                                            "type": _STR,
                                            "jsonPath": _STR,
                                            "format": _STR,
                                            "description": _STR,
                                            "priority": {"type": "integer"},
                                        },
                                    },
                                },
                                "selectableFields": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["jsonPath"],
                                        "properties": {"jsonPath": _STR},
                                    },
                                },
                            },
                        },
                    },
                },
            }
        },
    }
)
"""The shape of a CRD (types of the fields the emulator reads), checked before its semantics."""


_ONE_STORAGE_VERSION = Cause(
    "spec.versions", "FieldValueInvalid", "Invalid value: must have exactly one version marked as storage version"
)


def validate_crd(crd: Obj, old: Obj | None) -> list[Cause]:
    """Why ``crd`` (an update of ``old``, or a create when None) may not be accepted."""
    shape = _CRD_SHAPE.validate(crd)
    if shape:
        return shape
    spec = crd["spec"]
    causes = _validate_names(crd)
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        causes.append(_ONE_STORAGE_VERSION)
        return causes
    causes += _validate_versions(versions)
    if old is not None:
        causes += _validate_immutable(spec, old.get("spec") or {})
    return causes


def _names(spec: Obj) -> Obj:
    raw_names = spec.get("names")
    return raw_names if isinstance(raw_names, dict) else {}


def _validate_names(crd: Obj) -> list[Cause]:
    """``spec.group``, ``spec.names``, ``spec.scope`` and ``metadata.name``."""
    causes: list[Cause] = []
    spec = crd["spec"]
    group = spec.get("group")
    names = _names(spec)
    plural = names.get("plural")
    kind = names.get("kind")
    if not isinstance(group, str) or not group:
        causes.append(Cause("spec.group", "FieldValueRequired", "Required value"))
    elif "." not in group:
        causes.append(
            Cause(
                "spec.group", "FieldValueInvalid", f'Invalid value: "{group}": should be a domain with at least one dot'
            )
        )
    if not isinstance(plural, str) or not plural:
        causes.append(Cause("spec.names.plural", "FieldValueRequired", "Required value"))
    else:
        causes += validate_dns_label(plural, "spec.names.plural")
    if not isinstance(kind, str) or not kind:
        causes.append(Cause("spec.names.kind", "FieldValueRequired", "Required value"))
    for i, short in enumerate(names.get("shortNames") or []):
        causes += validate_dns_label(str(short), f"spec.names.shortNames[{i}]")
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(
            Cause(
                "spec.scope",
                "FieldValueNotSupported",
                f'Unsupported value: "{spec.get("scope")}": supported values: "Cluster", "Namespaced"',
            )
        )
    if isinstance(group, str) and isinstance(plural, str) and crd["metadata"]["name"] != f"{plural}.{group}":
        causes.append(
            Cause(
                "metadata.name",
                "FieldValueInvalid",
                f'Invalid value: "{crd["metadata"]["name"]}": must be spec.names.plural+"."+spec.group',
            )
        )
    if isinstance(group, str):
        causes += validate_dns_subdomain(group, "spec.group")
    return causes


def _validate_versions(versions: list[Any]) -> list[Cause]:
    """Every version, and exactly one storage version."""
    causes: list[Cause] = []
    storage = 0
    for i, v in enumerate(versions):
        where = f"spec.versions[{i}]"
        if not isinstance(v, dict) or not v.get("name"):
            causes.append(Cause(f"{where}.name", "FieldValueRequired", "Required value"))
            continue
        storage += 1 if v.get("storage") else 0
        causes += _validate_version_schema(where, v)
        causes += _validate_printer_columns(where, v)
        causes += _validate_selectable_fields(where, v)
    if storage != 1:
        causes.append(_ONE_STORAGE_VERSION)
    return causes


def _validate_version_schema(where: str, version: Obj) -> list[Cause]:
    schema = (version.get("schema") or {}).get("openAPIV3Schema")
    if not isinstance(schema, dict):
        return [Cause(f"{where}.schema.openAPIV3Schema", "FieldValueRequired", "Required value: schemas are required")]
    causes = [
        Cause(f"{where}.schema.openAPIV3Schema", "FieldValueInvalid", f"Invalid value: {p}")
        for p in check_schema(schema)
    ]
    if schema.get("type") != "object":
        causes.append(
            Cause(
                f"{where}.schema.openAPIV3Schema.type",
                "FieldValueRequired",
                'Required value: must be "object" at the root',
            )
        )
    return causes


def _validate_printer_columns(where: str, version: Obj) -> list[Cause]:
    causes: list[Cause] = []
    for j, col in enumerate(version.get("additionalPrinterColumns") or []):
        cw = f"{where}.additionalPrinterColumns[{j}]"
        if not isinstance(col, dict) or not col.get("name"):
            causes.append(Cause(f"{cw}.name", "FieldValueRequired", "Required value"))
            continue
        if col.get("type") not in ("integer", "number", "string", "boolean", "date"):
            causes.append(
                Cause(
                    f"{cw}.type",
                    "FieldValueNotSupported",
                    f'Unsupported value: "{col.get("type")}": supported values: '
                    '"boolean", "date", "integer", "number", "string"',
                )
            )
        try:
            JSONPath.parse(str(col.get("jsonPath", "")))
        except JSONPathError as exc:
            causes.append(Cause(f"{cw}.jsonPath", "FieldValueInvalid", f"Invalid value: {exc}"))
    return causes


def _validate_selectable_fields(where: str, version: Obj) -> list[Cause]:
    causes: list[Cause] = []
    for j, sel in enumerate(version.get("selectableFields") or []):
        try:
            if JSONPath.parse(str((sel or {}).get("jsonPath", ""))).filtered:
                raise JSONPathError("a selectable field is a simple path: no filter")
        except JSONPathError as exc:
            causes.append(
                Cause(f"{where}.selectableFields[{j}].jsonPath", "FieldValueInvalid", f"Invalid value: {exc}")
            )
    return causes


def _validate_immutable(spec: Obj, old_spec: Obj) -> list[Cause]:
    """What an update may not change: the group, the scope and the plural."""
    causes: list[Cause] = []
    if old_spec.get("group") != spec.get("group"):
        causes.append(Cause("spec.group", "FieldValueInvalid", "Invalid value: field is immutable"))
    if old_spec.get("scope") != spec.get("scope"):
        causes.append(Cause("spec.scope", "FieldValueInvalid", "Invalid value: field is immutable"))
    if (old_spec.get("names") or {}).get("plural") != _names(spec).get("plural"):
        causes.append(Cause("spec.names.plural", "FieldValueInvalid", "Invalid value: field is immutable"))
    return causes


def crd_status(crd: Obj) -> Obj:
    """The status a healthy apiserver reports for an accepted CRD."""
    raw_spec = crd.get("spec")
    spec: Obj = raw_spec if isinstance(raw_spec, dict) else {}
    raw_names = spec.get("names")
    names: Obj = dict(raw_names) if isinstance(raw_names, dict) else {}
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    now = crd["metadata"].get("creationTimestamp")
    raw_versions = spec.get("versions")
    versions: list[Any] = raw_versions if isinstance(raw_versions, list) else []
    conditions = [
        {
            "type": "NamesAccepted",
            "status": "True",
            "reason": "NoConflicts",
            "message": "no conflicts found",
            "lastTransitionTime": now,
        },
        {
            "type": "Established",
            "status": "True",
            "reason": "InitialNamesAccepted",
            "message": "the initial names have been accepted",
            "lastTransitionTime": now,
        },
    ]
    return {
        "acceptedNames": names,
        "conditions": conditions,
        "storedVersions": [
            v.get("name")
            for v in versions
            if isinstance(v, dict) and v.get("storage") and isinstance(v.get("name"), str)
        ],
    }
