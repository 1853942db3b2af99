"""The ``pods/binding`` and ``pods/eviction`` subresources (kube-apiserver's BindingREST and
EvictionREST): their request bodies, and what binding does to a pod.

A Binding names the pod (its name and namespace must agree with the URL, a ``uid`` must be the
pod's), a ``target`` Node, and annotations merged into the pod's. Binding sets ``spec.nodeName``
and the ``PodScheduled`` condition; it is refused (409) for a pod being deleted or already
assigned. An Eviction deletes the pod with its ``deleteOptions.preconditions`` (there are no
PodDisruptionBudgets).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from extender.emulator import errors
from extender.emulator.errors import Cause
from extender.emulator.meta import deep_copy, now_rfc3339, validate_metadata_maps

__all__ = ["BindingRequest", "bound_pod", "eviction_preconditions", "parse_binding"]

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class BindingRequest:
    """A checked Binding for the pod ``name``."""

    name: str
    node: str
    uid: Any
    """``metadata.uid`` of the Binding: when set, the pod's uid must be this."""
    annotations: dict[str, str]


def parse_binding(namespace: str, name: str, binding: Any) -> BindingRequest:
    """The Binding of ``POST pods/{name}/binding``; 400 or 422 for a body that is not one."""
    if not isinstance(binding, dict):
        raise errors.bad_request("the body of the request must be a JSON object describing a Binding")
    if binding.get("kind", "Binding") != "Binding":
        raise errors.bad_request(f"the kind of the object ({binding.get('kind')}) does not match Binding")
    meta = binding.get("metadata") or {}
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be a JSON object")
    if meta.get("name") and meta["name"] != name:
        raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict) or not all(isinstance(v, str) for v in annotations.values()):
        raise errors.bad_request(
            "json: cannot unmarshal into Go struct field ObjectMeta.metadata.annotations of type map[string]string"
        )
    target = binding.get("target") or {}
    node = target.get("name") if isinstance(target, dict) else None
    if not isinstance(node, str) or not node:
        raise errors.invalid("", "Binding", name, [Cause("target.name", "FieldValueRequired", "Required value")])
    if target.get("kind") not in (None, "", "Node"):
        raise errors.invalid(
            "",
            "Binding",
            name,
            [Cause("target.kind", "FieldValueNotSupported", 'Unsupported value: must be "Node"')],
        )
    return BindingRequest(name, node, meta.get("uid"), annotations)


def bound_pod(pod: Obj, binding: BindingRequest) -> Obj:
    """A new pod: ``pod`` assigned to the Binding's node (409 when it may not be)."""
    name = binding.name
    pmeta = pod["metadata"]
    uid = binding.uid
    if uid and uid != pmeta["uid"]:
        raise errors.conflict(
            "",
            "pods/binding",
            name,
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: {pmeta['uid']}",
        )
    if pmeta.get("deletionTimestamp"):
        raise errors.conflict("", "pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
    bound = (pod.get("spec") or {}).get("nodeName")
    if bound:
        raise errors.conflict("", "pods/binding", name, f'pod {name} is already assigned to node "{bound}"')
    new: Obj = deep_copy(pod)
    if binding.annotations:
        new["metadata"].setdefault("annotations", {}).update(binding.annotations)
        causes = validate_metadata_maps(new["metadata"])
        if causes:
            raise errors.invalid("", "Binding", name, causes)
    new.setdefault("spec", {})["nodeName"] = binding.node
    status = new.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conditions.append(
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()}
    )
    status["conditions"] = conditions
    new["metadata"]["generation"] = int(pmeta.get("generation") or 1) + 1
    return new


def eviction_preconditions(name: str, eviction: Any) -> Any:
    """The ``deleteOptions.preconditions`` of the Eviction of ``POST pods/{name}/eviction``."""
    if not isinstance(eviction, dict):
        raise errors.bad_request("the body of the request must be a JSON object describing an Eviction")
    if eviction.get("kind", "Eviction") != "Eviction":
        raise errors.bad_request(f"the kind of the object ({eviction.get('kind')}) does not match Eviction")
    meta = eviction.get("metadata") or {}
    if isinstance(meta, dict) and meta.get("name") and meta["name"] != name:
        raise errors.bad_request(f"name in URL does not match name in Eviction object ({meta['name']} != {name})")
    options = eviction.get("deleteOptions") or {}
    if not isinstance(options, dict):
        raise errors.bad_request(f"deleteOptions of the Eviction must be an object, not {type(options).__name__}")
    preconditions = options.get("preconditions")
    if preconditions is not None and not isinstance(preconditions, dict):
        raise errors.bad_request(f"deleteOptions.preconditions must be an object, not {type(preconditions).__name__}")
    return preconditions
