"""Per-kind semantics the apiserver's registry strategies implement (the subset the emulator keeps).

``prepare_create`` / ``prepare_update`` mirror ``PrepareForCreate`` / ``PrepareForUpdate`` (what
the server resets or defaults), ``validate`` mirrors ``Validate`` / ``ValidateUpdate``.
"""

from __future__ import annotations

import base64
from typing import Any

from extender.emulator import webhookconfig
from extender.emulator.errors import Cause
from extender.emulator.jsonpath import JSONPath, JSONPathError
from extender.emulator.meta import validate_dns_label, validate_dns_subdomain
from extender.emulator.resources import ResourceType
from extender.emulator.schema import CompiledSchema, check_schema

__all__ = ["crd_status", "prepare_create", "prepare_update", "spec_part", "validate"]

Obj = dict[str, Any]

POD_MUTABLE_MESSAGE = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative),`spec.schedulingGates` (only removals)"
)


def spec_part(obj: Obj) -> Obj:
    """Everything but ``metadata`` and ``status``: a change here bumps ``metadata.generation``."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def prepare_create(rt: ResourceType, obj: Obj, *, with_status: bool) -> None:
    """Reset and default what the server owns on create (in place)."""
    if rt.has_status and not with_status and rt.key not in ("nodes", "customresourcedefinitions.apiextensions.k8s.io"):
        obj.pop("status", None)
    if rt.key == "pods":
        _default_pod_spec(obj)
        if not with_status or "status" not in obj:
            obj["status"] = {"phase": "Pending"}
    elif rt.key == "namespaces":
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        obj["status"] = {"phase": "Active"}
        labels = obj["metadata"].setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
    elif rt.key == "secrets":
        _fold_string_data(obj)
        obj.setdefault("type", "Opaque")
    elif rt.key == "customresourcedefinitions.apiextensions.k8s.io":
        obj["status"] = crd_status(obj)
    elif rt.key == webhookconfig.KEY:
        webhookconfig.default_configuration(obj)


def _default_pod_spec(obj: Obj) -> None:
    """The pod defaults the apiserver applies on every write (a subset)."""
    spec = obj.setdefault("spec", {})
    if isinstance(spec, dict):
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        if "priorityClassName" not in spec:
            spec.setdefault("priority", 0)
        for key in ("containers", "initContainers"):
            for container in spec.get(key) or ():
                if isinstance(container, dict):
                    _default_requests_from_limits(container)


def _default_requests_from_limits(container: Obj) -> None:
    """kube-apiserver's ``SetDefaults_Pod`` (pkg/apis/core/v1/defaults.go): for every container and
    init container of a Pod (not of a pod template), each resource with a limit and no request
    gets the limit as its request. A request already given is never changed, even when it
    differs from the limit; a container without limits is left alone."""
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return
    limits = resources.get("limits")
    if not isinstance(limits, dict) or not limits:
        return  # an empty map would stay empty (and be omitted), as in the apiserver
    requests = resources.get("requests")
    if not isinstance(requests, dict):
        requests = resources["requests"] = {}
    for name, value in limits.items():
        requests.setdefault(name, value)


def prepare_update(rt: ResourceType, new: Obj, old: Obj, *, subresource: str | None) -> None:
    """Keep what this write may not change (in place on ``new``)."""
    if subresource == "status":
        status = new.get("status")
        new.clear()
        new.update({k: v for k, v in old.items() if k != "status"})
        if status is not None:
            new["status"] = status
        return
    if rt.has_status:
        if "status" in old:
            new["status"] = old["status"]
        else:
            new.pop("status", None)
    if rt.key == "pods":
        _default_pod_spec(new)
    elif rt.key == "secrets":
        _fold_string_data(new)
    elif rt.key == "namespaces":
        new["spec"] = old.get("spec", {})  # spec.finalizers change only through /finalize
        labels = new["metadata"].setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = new["metadata"]["name"]
    elif rt.key == "customresourcedefinitions.apiextensions.k8s.io":
        new["status"] = crd_status(new)
    elif rt.key == webhookconfig.KEY:
        webhookconfig.default_configuration(new)


def _fold_string_data(obj: Obj) -> None:
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = obj.setdefault("data", {})
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()


def validate(rt: ResourceType, obj: Obj, old: Obj | None) -> list[Cause]:
    if rt.key == "pods":
        return _validate_pod(obj, old)
    if rt.key == "customresourcedefinitions.apiextensions.k8s.io":
        return _validate_crd(obj, old)
    if rt.key == webhookconfig.KEY:
        return webhookconfig.validate_configuration(obj)
    if rt.key == "events":
        involved_ns = (obj.get("involvedObject") or {}).get("namespace")
        if involved_ns and involved_ns != obj["metadata"].get("namespace"):
            return [
                Cause("involvedObject.namespace", "FieldValueInvalid", "Invalid value: does not match event.namespace")
            ]
    return []


def _strip_mutable(spec: Any) -> Any:
    if not isinstance(spec, dict):
        return spec
    out = {k: v for k, v in spec.items() if k not in ("activeDeadlineSeconds", "tolerations", "schedulingGates")}
    for key in ("containers", "initContainers"):
        if isinstance(out.get(key), list):
            out[key] = [{k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c for c in out[key]]
    return out


def _validate_pod(pod: Obj, old: Obj | None) -> list[Cause]:
    causes: list[Cause] = []
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return [Cause("spec", "FieldValueRequired", "Required value")]
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append(Cause("spec.containers", "FieldValueRequired", "Required value"))
    else:
        for i, c in enumerate(containers):
            if not isinstance(c, dict):
                causes.append(Cause(f"spec.containers[{i}]", "FieldValueInvalid", "Invalid value: must be an object"))
                continue
            name = c.get("name")
            if not isinstance(name, str) or not name:
                causes.append(Cause(f"spec.containers[{i}].name", "FieldValueRequired", "Required value"))
            else:
                causes += validate_dns_label(name, f"spec.containers[{i}].name")
            if not c.get("image"):
                causes.append(Cause(f"spec.containers[{i}].image", "FieldValueRequired", "Required value"))
    if old is not None:
        old_spec = old.get("spec") or {}
        if _strip_mutable(spec) != _strip_mutable(old_spec):
            causes.append(Cause("spec", "FieldValueForbidden", POD_MUTABLE_MESSAGE))
        old_tol = old_spec.get("tolerations") or []
        new_tol = spec.get("tolerations") or []
        if any(t not in new_tol for t in old_tol):
            causes.append(
                Cause(
                    "spec.tolerations",
                    "FieldValueForbidden",
                    "Forbidden: existing toleration can not be modified except its tolerationSeconds",
                )
            )
        old_gates = [g.get("name") for g in old_spec.get("schedulingGates") or [] if isinstance(g, dict)]
        new_gates = [g.get("name") for g in spec.get("schedulingGates") or [] if isinstance(g, dict)]
        if any(g not in old_gates for g in new_gates):
            causes.append(
                Cause(
                    "spec.schedulingGates",
                    "FieldValueForbidden",
                    "Forbidden: only deletion is allowed, but found new scheduling gate",
                )
            )
    return causes


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


def _validate_crd(crd: Obj, old: Obj | None) -> list[Cause]:
    shape = _CRD_SHAPE.validate(crd)
    if shape:
        return shape
    causes: list[Cause] = []
    spec = crd["spec"]
    group = spec.get("group")
    raw_names = spec.get("names")
    names: Obj = raw_names if isinstance(raw_names, dict) else {}
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
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        causes.append(
            Cause(
                "spec.versions",
                "FieldValueInvalid",
                "Invalid value: must have exactly one version marked as storage version",
            )
        )
        return causes
    storage = 0
    for i, v in enumerate(versions):
        where = f"spec.versions[{i}]"
        if not isinstance(v, dict) or not v.get("name"):
            causes.append(Cause(f"{where}.name", "FieldValueRequired", "Required value"))
            continue
        storage += 1 if v.get("storage") else 0
        schema = (v.get("schema") or {}).get("openAPIV3Schema")
        if not isinstance(schema, dict):
            causes.append(
                Cause(f"{where}.schema.openAPIV3Schema", "FieldValueRequired", "Required value: schemas are required")
            )
        else:
            causes += [
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
        for j, col in enumerate(v.get("additionalPrinterColumns") or []):
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
        for j, sel in enumerate(v.get("selectableFields") or []):
            try:
                if JSONPath.parse(str((sel or {}).get("jsonPath", ""))).filtered:
                    raise JSONPathError("a selectable field is a simple path: no filter")
            except JSONPathError as exc:
                causes.append(
                    Cause(f"{where}.selectableFields[{j}].jsonPath", "FieldValueInvalid", f"Invalid value: {exc}")
                )
    if storage != 1:
        causes.append(
            Cause(
                "spec.versions",
                "FieldValueInvalid",
                "Invalid value: must have exactly one version marked as storage version",
            )
        )
    if old is not None:
        old_spec = old.get("spec") or {}
        if old_spec.get("group") != group:
            causes.append(Cause("spec.group", "FieldValueInvalid", "Invalid value: field is immutable"))
        if old_spec.get("scope") != spec.get("scope"):
            causes.append(Cause("spec.scope", "FieldValueInvalid", "Invalid value: field is immutable"))
        if (old_spec.get("names") or {}).get("plural") != plural:
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
