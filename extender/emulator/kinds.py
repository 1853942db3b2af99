"""Per-kind semantics the apiserver's registry strategies implement (the subset the emulator keeps).

``prepare_create`` / ``prepare_update`` mirror ``PrepareForCreate`` / ``PrepareForUpdate`` (what
the server resets or defaults), ``validate`` mirrors ``Validate`` / ``ValidateUpdate``. The
CustomResourceDefinition strategy is :mod:`extender.emulator.crd`, the MutatingWebhookConfiguration
one :mod:`extender.emulator.webhookconfig`.
"""

from __future__ import annotations

import base64
from typing import Any

from extender.emulator import webhookconfig
from extender.emulator.crd import crd_status, validate_crd
from extender.emulator.errors import Cause
from extender.emulator.meta import validate_dns_label
from extender.emulator.resources import ResourceType

__all__ = ["prepare_create", "prepare_update", "spec_part", "validate"]

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
        return validate_crd(obj, old)
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
