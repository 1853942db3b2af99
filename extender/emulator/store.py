"""The object store: the API semantics of writes, shared by the HTTP server and the Python API.

:class:`Store` adds to the versioned :class:`~extender.emulator.storage.Storage` (objects,
resourceVersions, watches, reads) what kube-apiserver's generic registry does on a write: create
(``generateName``, server-owned metadata, the namespace must exist), update and patch (optimistic
concurrency on ``metadata.resourceVersion``, the ``status`` subresource, ``generation`` bumped by
spec changes, no-op writes skipped), server-side apply (approximated), delete (preconditions,
finalizers, namespace contents), ``pods/binding`` and ``pods/eviction``; and the CRDs it stores
become served types. The Python API hands out deep copies of what it returns.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from typing import Any

from extender.emulator import binding, errors, kinds, patch, validation, webhookconfig
from extender.emulator.errors import Cause
from extender.emulator.meta import deep_copy, now_rfc3339
from extender.emulator.resources import ResourceType
from extender.emulator.selection import Selection
from extender.emulator.storage import Storage, obj_key
from extender.emulator.webhookconfig import Webhook

__all__ = ["DEFAULT_NAMESPACES", "Store"]

Obj = dict[str, Any]

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
_CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation")
_NAME_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"


class Store(Storage):
    """Objects of every served resource and the semantics of writing them."""

    def __init__(self, *, history_size: int = 1000, rng: random.Random | None = None) -> None:
        super().__init__(history_size=history_size)
        self._rng = rng or random.Random()
        self._webhooks: tuple[tuple[tuple[str, str], ...], list[Webhook]] | None = None
        for ns in DEFAULT_NAMESPACES:
            self.create(self.resource("", "v1", "namespaces"), None, {"metadata": {"name": ns}})

    # ------------------------------------------------------------------------------------------
    # checks shared by writes (see extender.emulator.validation)

    def _unknown_fields(self, rt: ResourceType, obj: Obj, field_validation: str) -> list[str]:
        return validation.prune_unknown_fields(rt, obj, field_validation, self._registry.schema(rt))

    def _validate(self, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        name = obj["metadata"].get("name") or ""
        causes = validation.validation_causes(rt, obj, old, self._registry.schema(rt))
        if rt.key == _CRD_KEY and not causes:
            causes += self._registry.name_conflicts(obj)
        if causes:
            raise errors.invalid(rt.group, rt.kind, name, causes)

    # ------------------------------------------------------------------------------------------
    # writes

    def create(
        self,
        rt: ResourceType,
        namespace: str | None,
        body: Any,
        *,
        dry_run: bool = False,
        field_validation: str = "Warn",
        with_status: bool = False,
        warnings: list[str] | None = None,
    ) -> Obj:
        """POST: 201 semantics. ``with_status`` keeps a given status (a Python-API convenience)."""
        obj = validation.check_body(rt, body, namespace, name=None)
        meta = obj["metadata"]
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        found = self._unknown_fields(rt, obj, field_validation)
        if warnings is not None:
            warnings += found
        with self._lock:
            if not meta.get("name"):
                prefix = meta.get("generateName")
                if not prefix:
                    raise errors.invalid(
                        rt.group,
                        rt.kind,
                        "",
                        [
                            Cause(
                                "metadata.name",
                                "FieldValueRequired",
                                "Required value: name or generateName is required",
                            )
                        ],
                    )
                meta["name"] = self._generate_name(rt, meta.get("namespace"), prefix)
            for key in _SERVER_META:
                meta.pop(key, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            meta["generation"] = 1
            kinds.prepare_create(rt, obj, with_status=with_status)
            self._validate(rt, obj, None)
            ns = meta.get("namespace")
            if rt.namespaced and obj_key(None, ns) not in self._kinds["namespaces"].objects:
                raise errors.not_found("", "namespaces", ns)
            if obj_key(ns, meta["name"]) in self._kind(rt).objects:
                raise errors.already_exists(rt.group, rt.plural, meta["name"])
            if dry_run:
                return obj
            stored = self._commit(rt, "ADDED", obj, None)
            if rt.key == _CRD_KEY:
                self._serve_crd(stored)
            return stored

    def admission_object(
        self,
        rt: ResourceType,
        namespace: str | None,
        body: Any,
        *,
        field_validation: str = "Warn",
        warnings: list[str] | None = None,
    ) -> Obj:
        """The object a CREATE would store, as admission sees it: decoded, pruned and defaulted,
        not yet named from ``generateName``, not validated (kube-apiserver's order: defaulting,
        mutating admission, then naming and validation in the registry). 404 for a namespace
        that does not exist (the NamespaceLifecycle plugin runs before the webhooks)."""
        obj = validation.check_body(rt, body, namespace, name=None)
        found = self._unknown_fields(rt, obj, field_validation)
        if warnings is not None:
            warnings += found
        kinds.prepare_create(rt, obj, with_status=False)
        ns = obj["metadata"].get("namespace")
        if rt.namespaced and self.namespace_labels(ns) is None:
            raise errors.not_found("", "namespaces", ns)
        return obj

    def namespace_labels(self, namespace: str | None) -> dict[str, str] | None:
        """The labels of a namespace; None when it does not exist."""
        with self._lock:
            ns = self._kinds["namespaces"].objects.get(obj_key(None, namespace or ""))
        return None if ns is None else dict((ns.get("metadata") or {}).get("labels") or {})

    def mutating_webhooks(self) -> list[Webhook]:
        """The webhooks of the stored MutatingWebhookConfigurations, in call order (parsed once
        per change of the configurations)."""
        with self._lock:
            objects = self._kinds[webhookconfig.KEY].objects
            stamp = tuple((k, o["metadata"]["resourceVersion"]) for k, o in sorted(objects.items()))
            if self._webhooks is None or self._webhooks[0] != stamp:
                self._webhooks = (stamp, webhookconfig.ordered_webhooks(list(objects.values())))
            return self._webhooks[1]

    def _generate_name(self, rt: ResourceType, namespace: str | None, prefix: str) -> str:
        objects = self._kind(rt).objects
        for _ in range(100):
            name = prefix[:58] + "".join(self._rng.choice(_NAME_SUFFIX) for _ in range(5))
            if obj_key(namespace, name) not in objects:
                return name
        raise errors.ApiError(409, "AlreadyExists", f"could not generate a unique name from {prefix!r}")

    def update(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str = "Warn",
        warnings: list[str] | None = None,
    ) -> Obj:
        """PUT (of the object or of its ``status``): 409 on a stale ``metadata.resourceVersion``."""
        obj = validation.check_body(rt, body, namespace, name=name)
        found = self._unknown_fields(rt, obj, field_validation)
        if warnings is not None:
            warnings += found
        with self._lock:
            old = self._current(rt, namespace, name)
            rv = obj["metadata"].get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.stale_conflict(rt.group, rt.plural, name)
            return self._write(rt, old, obj, subresource=subresource, dry_run=dry_run)

    def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str = "Warn",
        warnings: list[str] | None = None,
    ) -> Obj:
        """PATCH with a merge, JSON or strategic-merge patch; a ``metadata.resourceVersion``
        the patch leaves in the object must be the current one (409 otherwise)."""
        if patch_type == patch.STRATEGIC_MERGE_PATCH and rt.schema is not None:
            raise errors.unsupported_media_type(patch_type, [patch.JSON_PATCH, patch.MERGE_PATCH])
        if patch_type not in patch.PATCH_TYPES:
            raise errors.unsupported_media_type(patch_type, list(patch.PATCH_TYPES))
        try:
            body = deep_copy(body)
        except TypeError as exc:  # the Python API may be handed non-JSON values
            raise errors.bad_request(f"the patch is not valid JSON: {exc}") from None
        with self._lock:
            old = self._current(rt, namespace, name)
            patched = patch.apply_patch(patch_type, old, body)
            if not isinstance(patched, dict):
                raise errors.bad_request("the patched object is not a JSON object")
            obj = validation.check_body(rt, patched, namespace, name=name)
            rv = obj["metadata"].get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.stale_conflict(rt.group, rt.plural, name)
            found = self._unknown_fields(rt, obj, field_validation)
            if warnings is not None:
                warnings += found
            return self._write(rt, old, obj, subresource=subresource, dry_run=dry_run)

    def server_side_apply(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_validation: str = "Strict",
        warnings: list[str] | None = None,
    ) -> tuple[Obj, bool]:
        """``application/apply-patch+yaml``, approximated: create the object if it is missing,
        else merge the applied configuration into it (a strategic merge for built-in kinds, a
        merge patch for custom resources). There is no field ownership: fields are never removed
        by omission and conflicts between managers are never reported. Returns (object, created)."""
        if not isinstance(body, dict):
            raise errors.bad_request("the apply patch must be an object (YAML or JSON)")
        with self._lock:
            exists = obj_key(namespace if rt.namespaced else None, name) in self._kind(rt).objects
            if not exists and subresource is None:
                meta = body.get("metadata")
                body = {**body, "metadata": {**(meta if isinstance(meta, dict) else {}), "name": name}}
                created = self.create(
                    rt, namespace, body, dry_run=dry_run, field_validation=field_validation, warnings=warnings
                )
                return created, True
            kind = patch.STRATEGIC_MERGE_PATCH if rt.schema is None else patch.MERGE_PATCH
            applied = {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}
            obj = self.patch(
                rt,
                namespace,
                name,
                kind,
                applied,
                subresource=subresource,
                dry_run=dry_run,
                field_validation=field_validation,
                warnings=warnings,
            )
            return obj, False

    def _current(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self._kind(rt).objects.get(obj_key(namespace if rt.namespaced else None, name))
        if obj is None:
            raise errors.not_found(rt.group, rt.plural, name)
        return obj

    def _write(self, rt: ResourceType, old: Obj, obj: Obj, *, subresource: str | None, dry_run: bool) -> Obj:
        """Common tail of update and patch (lock held): keep what the write may not change,
        validate, bump generation, skip no-ops, finish a pending deletion."""
        if subresource not in (None, "status") or (subresource == "status" and not rt.has_status):
            raise errors.ApiError(
                404, "NotFound", f"the server could not find the requested resource ({rt.plural}/{subresource})"
            )
        name = old["metadata"]["name"]
        old_meta = old["metadata"]
        meta = obj["metadata"]
        if meta.get("uid") and meta["uid"] != old_meta["uid"]:
            raise errors.conflict(
                rt.group,
                rt.plural,
                name,
                f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: {old_meta['uid']}",
            )
        for key in _SERVER_META:
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        kinds.prepare_update(rt, obj, old, subresource=subresource)
        meta = obj["metadata"]
        self._validate(rt, obj, old if subresource is None else None)
        if kinds.spec_part(obj) != kinds.spec_part(old):
            meta["generation"] = int(old_meta.get("generation") or 1) + 1
        if obj == old:
            return old  # a no-op write: no new resourceVersion, no event (as the apiserver)
        if dry_run:
            return obj
        if old_meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._commit(rt, "DELETED", obj, old)
        stored = self._commit(rt, "MODIFIED", obj, old)
        if rt.key == _CRD_KEY:
            self._serve_crd(stored)
        return stored

    def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        *,
        preconditions: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> tuple[Obj, bool]:
        """DELETE: ``(object, deleted)``; ``deleted`` is False while finalizers hold it."""
        if rt.key == "namespaces" and name in _IMMORTAL_NAMESPACES:
            raise errors.forbidden(f'namespaces "{name}" is forbidden: this namespace may not be deleted')
        with self._lock:
            old = self._current(rt, namespace, name)
            self._check_preconditions(rt, old, preconditions)
            meta = old["metadata"]
            if meta.get("finalizers"):
                if meta.get("deletionTimestamp") or dry_run:
                    return old, False
                new = dict(old)
                new["metadata"] = {**meta, "deletionTimestamp": now_rfc3339(), "deletionGracePeriodSeconds": 0}
                return self._commit(rt, "MODIFIED", new, old), False
            if dry_run:
                return old, True
            if rt.key == "namespaces":
                self._delete_namespace_contents(name)
            gone = self._commit(rt, "DELETED", old, None)
            if rt.key == _CRD_KEY:
                self._unserve_crd(gone)
            return gone, True

    def _check_preconditions(self, rt: ResourceType, obj: Obj, preconditions: Mapping[str, Any] | None) -> None:
        if not preconditions:
            return
        if not isinstance(preconditions, Mapping):
            raise errors.bad_request("preconditions must be a JSON object with uid and/or resourceVersion")
        meta = obj["metadata"]
        name = meta["name"]
        uid = preconditions.get("uid")
        if uid and uid != meta["uid"]:
            raise errors.conflict(
                rt.group,
                rt.plural,
                name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta['uid']}",
            )
        rv = preconditions.get("resourceVersion")
        if rv and rv != meta["resourceVersion"]:
            raise errors.conflict(
                rt.group,
                rt.plural,
                name,
                f"Precondition failed: ResourceVersion in precondition: {rv}, "
                f"ResourceVersion in object meta: {meta['resourceVersion']}",
            )

    def _delete_namespace_contents(self, namespace: str) -> None:
        prefix = namespace + "/"
        seen: set[str] = set()
        for rt in self._registry.types():
            if not rt.namespaced or rt.key in seen:
                continue
            seen.add(rt.key)
            kind = self._kind(rt)
            for key in [k for k in kind.objects if k.startswith(prefix)]:
                self._commit(rt, "DELETED", kind.objects[key], None)

    def delete_collection(self, rt: ResourceType, selection: Selection, *, dry_run: bool = False) -> list[Obj]:
        with self._lock:
            out = []
            for obj in self._matching(rt, selection):
                meta = obj["metadata"]
                gone, _ = self.delete(rt, meta.get("namespace"), meta["name"], dry_run=dry_run)
                out.append(gone)
            return out

    # ------------------------------------------------------------------------------------------
    # pods/binding and pods/eviction (see extender.emulator.binding)

    def bind(self, namespace: str, name: str, body: Any, *, dry_run: bool = False) -> Obj:
        """``POST pods/{name}/binding``: set ``spec.nodeName`` and merge the Binding's annotations."""
        pods = self.resource("", "v1", "pods")
        request = binding.parse_binding(namespace, name, body)
        with self._lock:
            pod = self._current(pods, namespace, name)
            new = binding.bound_pod(pod, request)
            if not dry_run:
                self._commit(pods, "MODIFIED", new, pod)
        return errors.status_success(201)

    def evict(self, namespace: str, name: str, eviction: Any, *, dry_run: bool = False) -> Obj:
        """``POST pods/{name}/eviction`` (no PodDisruptionBudgets: the pod is deleted)."""
        pods = self.resource("", "v1", "pods")
        preconditions = binding.eviction_preconditions(name, eviction)
        self.delete(pods, namespace, name, preconditions=preconditions, dry_run=dry_run)
        return errors.status_success(201)
