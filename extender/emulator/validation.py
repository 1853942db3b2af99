"""What every write checks of the object it is given, in kube-apiserver's order.

1. :func:`check_body` — decoding: a JSON object of the resource's kind and group, ``ObjectMeta``
   fields of the right types, name and namespace agreeing with the URL (the URL's win), empty
   ``labels``/``annotations``/``finalizers``/``ownerReferences`` dropped (Go's ``omitempty``),
   ``managedFields`` and ``selfLink`` dropped.
2. :func:`prune_unknown_fields` — the ``fieldValidation`` parameter: unknown fields are pruned
   and reported as warnings (``Warn``), silently (``Ignore``) or refused with 400 (``Strict``).
3. :func:`validation_causes` — validation: name, labels and annotations, the custom resource's
   schema (after its defaults) and the kind's own rules; the caller answers 422 with the causes.
"""

from __future__ import annotations

from typing import Any

from extender.emulator import errors, kinds
from extender.emulator.errors import Cause
from extender.emulator.meta import deep_copy, validate_dns_label, validate_dns_subdomain, validate_metadata_maps
from extender.emulator.resources import ResourceType
from extender.emulator.schema import CompiledSchema

__all__ = ["FIELD_VALIDATION", "check_body", "prune_unknown_fields", "validation_causes"]

Obj = dict[str, Any]

FIELD_VALIDATION = ("Ignore", "Warn", "Strict")
_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)


def check_body(rt: ResourceType, body: Any, namespace: str | None, *, name: str | None) -> Obj:
    """A fresh copy of ``body`` as an object of ``rt`` (``apiVersion``, ``kind`` and ``metadata``
    first); 400 for a body that cannot be one. ``name`` is the URL's (None on create)."""
    if not isinstance(body, dict):
        raise errors.bad_request(f"the body of the request must be a JSON object describing a {rt.kind}")
    try:
        obj: Obj = deep_copy(body)
    except TypeError as exc:  # the Python API may be handed non-JSON values
        raise errors.bad_request(f"the object is not valid JSON: {exc}") from None
    kind = obj.setdefault("kind", rt.kind)
    api_version = obj.setdefault("apiVersion", rt.api_version)
    if kind != rt.kind:
        raise errors.bad_request(f"the kind of the object ({kind}) does not match the kind of the resource ({rt.kind})")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else None
    if group != rt.group:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API version ({rt.api_version})"
        )
    meta = obj.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be a JSON object")
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    obj = {"apiVersion": rt.api_version, "kind": rt.kind, "metadata": meta, **rest}
    _check_meta_types(meta)
    _place(rt, meta, namespace, name)
    meta.pop("managedFields", None)
    meta.pop("selfLink", None)
    return obj


def _check_meta_types(meta: Obj) -> None:
    """The string fields and string maps of ``ObjectMeta``; empty optional fields are dropped."""
    for key in ("name", "generateName", "namespace", "uid", "resourceVersion"):
        if key in meta and meta[key] is not None and not isinstance(meta[key], str):
            raise errors.bad_request(
                f"json: cannot unmarshal {type(meta[key]).__name__} into Go struct field "
                f"ObjectMeta.metadata.{key} of type string"
            )
    for key in ("finalizers", "ownerReferences"):
        if key in meta and not meta[key]:
            del meta[key]  # empty = absent (Go's omitempty): keeps no-op writes no-ops
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is None or value == {}:
            meta.pop(key, None)
            continue
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise errors.bad_request(
                f"json: cannot unmarshal into Go struct field ObjectMeta.metadata.{key} of type map[string]string"
            )


def _place(rt: ResourceType, meta: Obj, namespace: str | None, name: str | None) -> None:
    """Set the namespace and name from the URL, refusing a body that names others."""
    if rt.namespaced:
        body_ns = meta.get("namespace")
        if body_ns and namespace and body_ns != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        if not (body_ns or namespace):
            raise errors.bad_request("the namespace of the object is required")
        meta["namespace"] = namespace or body_ns
    else:
        meta.pop("namespace", None)
    if name is not None:
        body_name = meta.get("name")
        if body_name and body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        meta["name"] = name


def prune_unknown_fields(rt: ResourceType, obj: Obj, validation: str, compiled: CompiledSchema | None) -> list[str]:
    """Prune unknown fields of ``obj`` (in place); ``Strict`` raises 400 instead. Returns warnings."""
    if validation not in FIELD_VALIDATION:
        raise errors.bad_request(f'fieldValidation must be one of "Ignore", "Warn", "Strict", got "{validation}"')
    unknown = [f"metadata.{k}" for k in obj["metadata"] if k not in _META_FIELDS]
    for k in unknown:
        obj["metadata"].pop(k.split(".", 1)[1], None)
    if compiled is not None:
        unknown += compiled.prune(obj)
    elif rt.top_level_fields is not None:
        extra = [k for k in obj if k not in rt.top_level_fields]
        for k in extra:
            del obj[k]
        unknown += extra
    if unknown and validation == "Strict":
        listed = ", ".join(f'unknown field "{u}"' for u in unknown)
        raise errors.bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: strict decoding error: {listed}'
        )
    if validation == "Warn":
        return [f'unknown field "{u}"' for u in unknown]
    return []


def validation_causes(rt: ResourceType, obj: Obj, old: Obj | None, compiled: CompiledSchema | None) -> list[Cause]:
    """Why ``obj`` (an update of ``old``, or a create when None) is invalid; applies the schema's
    defaults to ``obj`` first."""
    meta = obj["metadata"]
    name = meta.get("name") or ""
    causes: list[Cause] = []
    if rt.key == "namespaces":
        causes += validate_dns_label(name, "metadata.name")
    elif rt.key != "events" or not name:
        causes += validate_dns_subdomain(name, "metadata.name")
    causes += validate_metadata_maps(meta)
    if compiled is not None:
        compiled.apply_defaults(obj)
        causes += compiled.validate(obj)
    causes += kinds.validate(rt, obj, old)
    return causes
