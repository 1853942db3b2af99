"""The resource types the emulator serves: the built-in ones and those defined by CRDs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BUILTIN_TYPES",
    "CORE_FIELD_SELECTORS",
    "PrinterColumn",
    "ResourceType",
    "from_crd",
]

_ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    """``additionalPrinterColumns[]`` of a CRD version (or a built-in kind's column)."""

    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0
    format: str = ""


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One served resource (``group``/``version``/``plural``).

    ``key`` identifies the stored objects independently of the version (``pods``,
    ``quotas.scheduling.infini-ai.com``): all served versions of a CRD share one store, as with
    conversion strategy ``None``.
    """

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    """``status``, ``binding``, ``eviction``, ``scale`` … served under ``<plural>/<name>/<sub>``."""
    verbs: tuple[str, ...] = _ALL_VERBS
    printer_columns: tuple[PrinterColumn, ...] | None = None
    """None for built-in kinds (their tables are hard-coded in :mod:`tables`)."""
    schema: Mapping[str, Any] | None = None
    """A CRD version's ``openAPIV3Schema``; built-in kinds have none (not validated)."""
    field_selectors: tuple[str, ...] = ("metadata.name", "metadata.namespace")
    selectable_fields: tuple[tuple[str, str], ...] = ()
    """CRD ``selectableFields``: (field selector name, JSONPath)."""
    top_level_fields: frozenset[str] | None = None
    """Known top-level fields of a built-in kind (``fieldValidation``); None: use :attr:`schema`."""
    crd_name: str | None = None

    @property
    def key(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The REST path of the collection or of one object (for messages and the journal)."""
        base = f"/apis/{self.group}/{self.version}" if self.group else "/api/v1"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


_META_TOP = frozenset({"apiVersion", "kind", "metadata"})

CORE_FIELD_SELECTORS: Mapping[str, tuple[str, ...]] = {
    "pods": (
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.restartPolicy",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "nodes": ("metadata.name", "spec.unschedulable"),
    "namespaces": ("metadata.name", "status.phase"),
    "secrets": ("metadata.name", "metadata.namespace", "type"),
    "events": (
        "metadata.name",
        "metadata.namespace",
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
}


def _builtin(
    group: str,
    version: str,
    plural: str,
    kind: str,
    *,
    namespaced: bool,
    short_names: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    subresources: tuple[str, ...] = (),
    top: frozenset[str],
) -> ResourceType:
    return ResourceType(
        group=group,
        version=version,
        plural=plural,
        singular=kind.lower(),
        kind=kind,
        namespaced=namespaced,
        short_names=short_names,
        categories=categories,
        subresources=subresources,
        field_selectors=CORE_FIELD_SELECTORS.get(plural, ("metadata.name", "metadata.namespace")),
        top_level_fields=_META_TOP | top,
    )


_SPEC_STATUS = frozenset({"spec", "status"})

BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _builtin(
        "",
        "v1",
        "namespaces",
        "Namespace",
        namespaced=False,
        short_names=("ns",),
        subresources=("status",),
        top=_SPEC_STATUS,
    ),
    _builtin(
        "", "v1", "nodes", "Node", namespaced=False, short_names=("no",), subresources=("status",), top=_SPEC_STATUS
    ),
    _builtin(
        "",
        "v1",
        "pods",
        "Pod",
        namespaced=True,
        short_names=("po",),
        categories=("all",),
        subresources=("status", "binding", "eviction"),
        top=_SPEC_STATUS,
    ),
    _builtin(
        "",
        "v1",
        "events",
        "Event",
        namespaced=True,
        short_names=("ev",),
        top=frozenset(
            {
                "involvedObject",
                "reason",
                "message",
                "source",
                "firstTimestamp",
                "lastTimestamp",
                "count",
                "type",
                "eventTime",
                "series",
                "action",
                "related",
                "reportingComponent",
                "reportingInstance",
            }
        ),
    ),
    _builtin(
        "",
        "v1",
        "configmaps",
        "ConfigMap",
        namespaced=True,
        short_names=("cm",),
        top=frozenset({"data", "binaryData", "immutable"}),
    ),
    _builtin(
        "", "v1", "secrets", "Secret", namespaced=True, top=frozenset({"data", "stringData", "type", "immutable"})
    ),
    _builtin("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True, top=frozenset({"spec"})),
    _builtin(
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        namespaced=True,
        short_names=("sa",),
        top=frozenset({"secrets", "imagePullSecrets", "automountServiceAccountToken"}),
    ),
    _builtin(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        namespaced=False,
        categories=("api-extensions",),
        top=frozenset({"webhooks"}),
    ),
    _builtin(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short_names=("crd", "crds"),
        categories=("api-extensions",),
        subresources=("status",),
        top=_SPEC_STATUS,
    ),
)


def from_crd(crd: Mapping[str, Any]) -> list[ResourceType]:
    """The resource types a (validated) CRD serves: one per ``served`` version."""
    spec = crd["spec"]
    names = spec["names"]
    out: list[ResourceType] = []
    for v in spec["versions"]:
        if not v.get("served", True):
            continue
        subs = v.get("subresources") or {}
        columns = tuple(
            PrinterColumn(
                name=str(c["name"]),
                type=str(c.get("type", "string")),
                json_path=str(c["jsonPath"]),
                description=str(c.get("description", "")),
                priority=int(c.get("priority", 0)),
                format=str(c.get("format", "")),
            )
            for c in v.get("additionalPrinterColumns") or ()
        )
        selectable = tuple(
            (str(f["jsonPath"]).lstrip("."), str(f["jsonPath"])) for f in v.get("selectableFields") or ()
        )
        out.append(
            ResourceType(
                group=spec["group"],
                version=v["name"],
                plural=names["plural"],
                singular=names.get("singular") or names["kind"].lower(),
                kind=names["kind"],
                namespaced=spec["scope"] == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=("status",) if "status" in subs else (),
                printer_columns=columns,
                schema=(v.get("schema") or {}).get("openAPIV3Schema"),
                field_selectors=("metadata.name", "metadata.namespace", *(s for s, _ in selectable)),
                selectable_fields=selectable,
                crd_name=crd["metadata"]["name"],
            )
        )
    return out
