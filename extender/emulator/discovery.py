"""Discovery (``/api``, ``/apis``, ``APIResourceList``\\ s), ``/version`` and ``/openapi/v3``.

The OpenAPI v3 documents are only as detailed as kubectl needs: every kind has a PATCH operation
carrying ``x-kubernetes-group-version-kind`` and a ``fieldValidation`` parameter, so ``kubectl
apply`` leaves validation to the server; custom resources also carry their CRD schema under
``components.schemas`` (for ``kubectl explain``). Built-in kinds have no component schema, so
kubectl builds strategic merge patches from its compiled-in types, as against a real server.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import orjson

from extender.emulator.resources import ResourceType

__all__ = [
    "VERSION_INFO",
    "api_group",
    "api_group_list",
    "api_resource_list",
    "api_versions",
    "openapi_document",
    "openapi_index",
]

Obj = dict[str, Any]

VERSION_INFO: Obj = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-sky-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_SUBRESOURCE_VERBS = {"status": ["get", "patch", "update"]}


def api_versions(server_address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _groups(types: Iterable[ResourceType]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for rt in types:
        if rt.group and rt.version not in groups[rt.group]:
            groups[rt.group].append(rt.version)
    return groups


def _version_key(version: str) -> tuple[int, int, int]:
    """Kubernetes version priority: GA > beta > alpha, then by number."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (-1, 0, 0)
    stage = {"alpha": 0, "beta": 1, None: 2}[m.group(2)]
    return (stage, int(m.group(1)), int(m.group(3) or 0))


def api_group(name: str, versions: list[str]) -> Obj:
    ordered = sorted(versions, key=_version_key, reverse=True)
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in ordered]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": name, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(types: Iterable[ResourceType]) -> Obj:
    groups = _groups(types)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {k: v for k, v in api_group(name, vs).items() if k not in ("kind", "apiVersion")}
            for name, vs in sorted(groups.items())
        ],
    }


def api_resource_list(group_version: str, types: Iterable[ResourceType]) -> Obj | None:
    resources: list[Obj] = []
    for rt in sorted(types, key=lambda t: t.plural):
        if rt.group_version != group_version:
            continue
        entry: Obj = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        entry["storageVersionHash"] = hashlib.sha256(rt.key.encode()).hexdigest()[:11]
        resources.append(entry)
        for sub in rt.subresources:
            sub_entry: Obj = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced}
            if sub == "binding":
                sub_entry.update(kind="Binding", verbs=["create"])
            elif sub == "eviction":
                sub_entry.update(group="policy", version="v1", kind="Eviction", verbs=["create"])
            else:
                sub_entry.update(kind=rt.kind, verbs=_SUBRESOURCE_VERBS.get(sub, ["get"]))
            resources.append(sub_entry)
        if rt.key == "pods":
            resources.append(
                {
                    "name": "bindings",
                    "singularName": "binding",
                    "namespaced": True,
                    "kind": "Binding",
                    "verbs": ["create"],
                }
            )
    if not resources:
        return None
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}


def _gv_path(group_version: str) -> str:
    return "api/v1" if group_version == "v1" else f"apis/{group_version}"


def openapi_document(group_version: str, types: Iterable[ResourceType]) -> Obj | None:
    """The ``/openapi/v3/<api/v1 | apis/g/v>`` document, or None if nothing is served there."""
    paths: Obj = {}
    schemas: Obj = {}
    found = False
    for rt in types:
        if rt.group_version != group_version:
            continue
        found = True
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        prefix = "/" + _gv_path(group_version)
        base = f"{prefix}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{prefix}/{rt.plural}"
        ref = _schema_name(rt)
        params = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string", "uniqueItems": True}}]
        if rt.namespaced:
            params.append(
                {"name": "namespace", "in": "path", "required": True, "schema": {"type": "string", "uniqueItems": True}}
            )
        write_params = [
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
        ]
        body_ref = {"$ref": f"#/components/schemas/{ref}"} if rt.schema is not None else {"type": "object"}

        op = functools.partial(_operation, rt=rt, gvk=gvk, body_ref=body_ref)

        kind = rt.kind
        paths[f"{base}/{{name}}"] = {
            "parameters": params,
            "get": op("get", f"read{kind}", extra=[], body=False),
            "put": op("put", f"replace{kind}", extra=write_params, body=True),
            "patch": op(
                "patch",
                f"patch{kind}",
                extra=[
                    *write_params,
                    {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": True}},
                ],
                body=True,
            ),
            "delete": op(
                "delete",
                f"delete{kind}",
                extra=[{"name": "dryRun", "in": "query", "schema": {"type": "string"}}],
                body=False,
            ),
        }
        paths[base] = {
            "parameters": params[1:],
            "get": op("list", f"list{kind}", extra=[], body=False),
            "post": op("post", f"create{kind}", extra=write_params, body=True),
        }
        for sub in rt.subresources:
            if sub == "status":
                paths[f"{base}/{{name}}/status"] = {
                    "parameters": params,
                    "get": op("get", f"read{kind}Status", extra=[], body=False),
                    "put": op("put", f"replace{kind}Status", extra=write_params, body=True),
                    "patch": op("patch", f"patch{kind}Status", extra=write_params, body=True),
                }
        if rt.schema is not None:
            schema = dict(rt.schema)
            props = dict(schema.get("properties") or {})
            props.setdefault("apiVersion", {"type": "string"})
            props.setdefault("kind", {"type": "string"})
            props["metadata"] = {"type": "object"}
            schema["properties"] = props
            schema["x-kubernetes-group-version-kind"] = [gvk]
            schemas[ref] = schema
    if not found:
        return None
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": VERSION_INFO["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _operation(
    action: str, op_id: str, *, extra: list[Obj], body: bool, rt: ResourceType, gvk: Obj, body_ref: Obj
) -> Obj:
    o: Obj = {
        "operationId": op_id,
        "parameters": extra,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": body_ref}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
        "tags": [rt.group or "core"],
    }
    if body:
        o["requestBody"] = {"content": {"application/json": {"schema": body_ref}}, "required": True}
    return o


def _schema_name(rt: ResourceType) -> str:
    group = ".".join(reversed(rt.group.split("."))) if rt.group else "io.k8s.api.core"
    return f"{group}.{rt.version}.{rt.kind}"


def openapi_index(types: Iterable[ResourceType]) -> tuple[Obj, dict[str, bytes]]:
    """``/openapi/v3`` and the documents it points at (keyed by ``api/v1`` / ``apis/g/v``)."""
    type_list = list(types)
    docs: dict[str, bytes] = {}
    paths: Obj = {}
    for gv in sorted({rt.group_version for rt in type_list}):
        doc = openapi_document(gv, type_list)
        if doc is None:
            continue
        raw = orjson.dumps(doc)
        key = _gv_path(gv)
        docs[key] = raw
        digest = hashlib.sha512(raw).hexdigest().upper()
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}, docs
