"""The resource request handlers, one per verb, as kube-apiserver's ``endpoints/handlers``.

:func:`verb` names the verb of a request (method, resource URL, ``watch``); :data:`HANDLERS`
maps each verb but ``watch`` (:mod:`extender.emulator.watchstream`) to its handler, and
:func:`handle_bindings` serves ``POST namespaces/{ns}/bindings``. A handler reads its query
parameters and body, calls the store and answers. A fault injected to fail *after* the request
(see :mod:`extender.emulator.faults`) is raised in place of the answer once the store has done
the work (lists answer regardless). A create of a resource (not of a subresource) passes the
mutating admission chain first when webhook configurations are stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import yaml

from extender.emulator import admission, errors, patch
from extender.emulator.faults import Firing
from extender.emulator.httpio import Request, Send, Target, query_dry_run, query_int, query_str, send_json
from extender.emulator.resources import ResourceType
from extender.emulator.selection import Selection
from extender.emulator.store import Store
from extender.emulator.tables import wants_table

__all__ = ["HANDLERS", "Call", "handle_bindings", "verb"]

Obj = dict[str, Any]


def verb(method: str, t: Target, watching: bool) -> str:
    """The verb of a request (as RBAC and audit name it); 405 for a method the URL does not take."""
    if t.rt is None:
        if method != "POST":
            raise errors.method_not_allowed(method, "bindings")
        return "create"
    if method == "GET":
        if watching:
            return "watch"
        return "get" if t.name else "list"
    if method == "POST":
        if t.name and t.subresource in ("binding", "eviction"):
            return "create"
        if t.name is None:
            return "create"
    if method == "PUT" and t.name and t.subresource in (None, "status"):
        return "update"
    if method == "PATCH" and t.name and t.subresource in (None, "status"):
        return "patch"
    if method == "DELETE" and t.subresource is None:
        return "delete" if t.name else "deletecollection"
    raise errors.method_not_allowed(method, t.plural + (f"/{t.subresource}" if t.subresource else ""))


@dataclass(slots=True)
class Call:
    """One resource request being served: what every handler needs."""

    store: Store
    admission: admission.AdmissionChain
    req: Request
    send: Send
    t: Target
    firing: Firing | None

    async def answer(self, code: int, body: Obj, warnings: list[str] | None = None) -> int:
        firing = self.firing
        if firing is not None and firing.error is not None and firing.after:
            raise firing.error  # the write happened; the client is told it failed
        headers = [(b"warning", f'299 - "{w}"'.encode()) for w in (warnings or [])]
        return await send_json(self.send, code, body, headers)


async def handle_bindings(call: Call) -> int:
    """``POST namespaces/{ns}/bindings``: the pod is named by the Binding's ``metadata.name``."""
    body = await call.req.json()
    meta = body.get("metadata") if isinstance(body, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise errors.bad_request("a Binding needs metadata.name (the pod's name)")
    result = call.store.bind(call.t.namespace or "", name, body, dry_run=query_dry_run(call.req.params))
    return await call.answer(201, result)


async def handle_get(call: Call, rt: ResourceType) -> int:
    obj = call.store.get(rt, call.t.namespace, call.t.name or "")
    req = call.req
    version = wants_table(req.accept)
    if version is not None:
        meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
        obj = call.store.table_converter(rt).table(
            [obj], version=version, list_meta=meta, include_object=query_str(req.params, "includeObject") or "Metadata"
        )
    return await call.answer(200, obj)


async def handle_list(call: Call, rt: ResourceType) -> int:
    params = call.req.params
    selection = Selection.parse(
        rt, call.t.namespace, query_str(params, "labelSelector"), query_str(params, "fieldSelector")
    )
    limit = query_int(params, "limit") or 0
    if limit < 0:
        raise errors.bad_request("limit must be non-negative")
    items, rv, token, remaining = call.store.list_objects(
        rt, selection, limit=limit, continue_token=query_str(params, "continue") or None
    )
    meta: Obj = {"resourceVersion": str(rv)}
    if token:
        meta["continue"] = token
        meta["remainingItemCount"] = remaining
    version = wants_table(call.req.accept)
    if version is not None:
        body = call.store.table_converter(rt).table(
            items, version=version, list_meta=meta, include_object=query_str(params, "includeObject") or "Metadata"
        )
    else:
        body = {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta, "items": items}
    return await send_json(call.send, 200, body)


async def handle_create(call: Call, rt: ResourceType) -> int:
    """POST of a resource, or of a pod's ``binding`` or ``eviction``."""
    params, t, store = call.req.params, call.t, call.store
    ns = t.namespace or ""
    warnings: list[str] = []
    field_validation = query_str(params, "fieldValidation") or "Warn"
    body = await call.req.json()
    if t.subresource == "binding":
        return await call.answer(201, store.bind(ns, t.name or "", body, dry_run=query_dry_run(params)))
    if t.subresource == "eviction":
        return await call.answer(201, store.evict(ns, t.name or "", body, dry_run=query_dry_run(params)))
    dry_run = query_dry_run(params)
    if t.subresource is None:
        body = await _admit(call, rt, body, dry_run=dry_run, field_validation=field_validation, warnings=warnings)
    obj = store.create(rt, t.namespace, body, dry_run=dry_run, field_validation=field_validation, warnings=warnings)
    return await call.answer(201, obj, warnings)


async def _admit(
    call: Call, rt: ResourceType, body: Any, *, dry_run: bool, field_validation: str, warnings: list[str]
) -> Any:
    """The body after the mutating admission chain (unchanged when no webhook is stored)."""
    store = call.store
    if not store.mutating_webhooks():
        return body
    obj = store.admission_object(rt, call.t.namespace, body, field_validation=field_validation, warnings=warnings)
    options: dict[str, Any] = {k: v for k, v in (("fieldManager", query_str(call.req.params, "fieldManager")),) if v}
    if dry_run:
        options["dryRun"] = ["All"]
    req = admission.Request(rt, obj["metadata"].get("namespace"), dry_run, admission.ADMIN_USER, options)
    result = await call.admission.admit_create(req, obj)
    warnings += result.warnings
    return result.obj


async def handle_update(call: Call, rt: ResourceType) -> int:
    """PUT of a resource or of its ``status``."""
    params, t = call.req.params, call.t
    warnings: list[str] = []
    field_validation = query_str(params, "fieldValidation") or "Warn"
    body = await call.req.json()
    obj = call.store.update(
        rt,
        t.namespace,
        t.name or "",
        body,
        subresource=t.subresource,
        dry_run=query_dry_run(params),
        field_validation=field_validation,
        warnings=warnings,
    )
    return await call.answer(200, obj, warnings)


async def handle_patch(call: Call, rt: ResourceType) -> int:
    """PATCH of a resource or of its ``status``: JSON, merge or strategic-merge patch, or apply."""
    params, t = call.req.params, call.t
    warnings: list[str] = []
    field_validation = query_str(params, "fieldValidation") or "Warn"
    content_type = call.req.content_type
    if content_type == patch.APPLY_PATCH:
        return await _server_side_apply(call, rt, warnings)
    body = await call.req.json()
    obj = call.store.patch(
        rt,
        t.namespace,
        t.name or "",
        content_type,
        body,
        subresource=t.subresource,
        dry_run=query_dry_run(params),
        field_validation=field_validation,
        warnings=warnings,
    )
    return await call.answer(200, obj, warnings)


async def _server_side_apply(call: Call, rt: ResourceType, warnings: list[str]) -> int:
    """``application/apply-patch+yaml``: 201 when the object was created, else 200."""
    params, t = call.req.params, call.t
    raw = await call.req.body()
    try:
        applied = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise errors.bad_request(f"the apply patch is not valid YAML: {exc}") from None
    obj, created = call.store.server_side_apply(
        rt,
        t.namespace,
        t.name or "",
        applied,
        subresource=t.subresource,
        dry_run=query_dry_run(params),
        field_validation=query_str(params, "fieldValidation") or "Strict",
        warnings=warnings,
    )
    return await call.answer(201 if created else 200, obj, warnings)


async def handle_delete(call: Call, rt: ResourceType) -> int:
    """DELETE of one object: the object for pods, namespaces, custom resources and objects kept
    by finalizers (202), a ``Success`` Status for the other kinds."""
    t = call.t
    options = await call.req.json(optional=True) or {}
    if not isinstance(options, dict):
        raise errors.bad_request("the body of a delete must be a DeleteOptions object")
    obj, deleted = call.store.delete(
        rt,
        t.namespace,
        t.name or "",
        preconditions=options.get("preconditions"),
        dry_run=query_dry_run(call.req.params, options),
    )
    if rt.key in ("pods", "namespaces") or rt.schema is not None or not deleted:
        return await call.answer(200 if deleted else 202, obj)
    details = {"name": obj["metadata"]["name"], "kind": rt.plural, "uid": obj["metadata"]["uid"]}
    if rt.group:
        details["group"] = rt.group
    return await call.answer(200, errors.status_success(200, details))


async def handle_deletecollection(call: Call, rt: ResourceType) -> int:
    """DELETE of the objects a label and field selector match: the list of the deleted objects."""
    params = call.req.params
    options = await call.req.json(optional=True) or {}
    selection = Selection.parse(
        rt, call.t.namespace, query_str(params, "labelSelector"), query_str(params, "fieldSelector")
    )
    gone = call.store.delete_collection(
        rt, selection, dry_run=query_dry_run(params, options if isinstance(options, dict) else None)
    )
    body = {
        "kind": rt.list_kind,
        "apiVersion": rt.api_version,
        "metadata": {"resourceVersion": str(call.store.resource_version)},
        "items": gone,
    }
    return await call.answer(200, body)


HANDLERS: dict[str, Callable[[Call, ResourceType], Awaitable[int]]] = {
    "get": handle_get,
    "list": handle_list,
    "create": handle_create,
    "update": handle_update,
    "patch": handle_patch,
    "delete": handle_delete,
    "deletecollection": handle_deletecollection,
}
