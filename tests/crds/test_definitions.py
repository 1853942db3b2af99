"""The CRD manifests are well-formed apiextensions.k8s.io/v1 objects that implement the contract."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import models

from . import printer_columns, schema, structural
from .objects import CRD_DIR, CRDS, GENERATOR, GROUP, QUANTITY_PATTERN

# kind -> plural, scope, shortNames
CONTRACT = {
    "Quota": ("quotas", "Cluster", ["qo"]),
    "NodeTopology": ("nodetopologies", "Cluster", ["ntopo"]),
    "PodGroup": ("podgroups", "Namespaced", ["skypg"]),
    "Queue": ("queues", "Cluster", ["skyq"]),
    "JobQueue": ("jobqueues", "Cluster", ["jq"]),
}

# (name, jsonPath, type) of the columns `kubectl get` shows without -o wide, in order.
COLUMNS = {
    "Quota": [
        ("NODE", ".status.nodeName", "string"),
        ("PHASE", ".status.phase", "string"),
        ("QUEUE", ".spec.queueName", "string"),
        ("GPUS", ".status.gpus", "string"),  # vendor-neutral: written by the binder from --gpu-resources
        ("AGE", ".metadata.creationTimestamp", "date"),
    ],
    "NodeTopology": [
        ("ZONE", ".spec.zone", "string"),
        ("LEAF", ".spec.tiers[?(@.level==1)].name", "string"),
        ("SPINE", ".spec.tiers[?(@.level==2)].name", "string"),
        ("AGE", ".metadata.creationTimestamp", "date"),
    ],
    "PodGroup": [
        ("MINMEMBER", ".spec.minMember", "integer"),
        ("PHASE", ".status.phase", "string"),
        ("QUEUE", ".status.queue", "string"),
        ("AGE", ".metadata.creationTimestamp", "date"),
    ],
    "Queue": [
        ("WEIGHT", ".spec.weight", "integer"),
        ("STATE", ".spec.state", "string"),
        ("AGE", ".metadata.creationTimestamp", "date"),
    ],
    "JobQueue": [
        ("PRIORITY", ".spec.priority", "integer"),
        ("STATE", ".spec.state", "string"),
        ("RUNNING", ".status.runningJobs", "integer"),
        ("AGE", ".metadata.creationTimestamp", "date"),
    ],
}

# Short names of built-in resources and of Volcano's PodGroup/Queue: ours must not shadow them.
TAKEN_SHORT_NAMES = {
    "cm", "cs", "csr", "ds", "deploy", "ep", "ev", "hpa", "ing", "limits", "netpol", "no", "ns", "pc",
    "pdb", "po", "pv", "pvc", "quota", "rc", "rs", "sa", "sc", "sts", "svc", "crd", "crds", "cj",
    "pg", "podgroup", "podgroups", "q", "queue", "queues", "vcjob", "vj",
}  # fmt: skip

KINDS = sorted(CONTRACT)


def version(kind: str) -> Mapping[str, Any]:
    return schema.storage_version(CRDS[kind])


def root_schema(kind: str) -> Mapping[str, Any]:
    return schema.openapi_schema(CRDS[kind])


def nodes(node: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every schema node reachable through properties / items / additionalProperties / junctors."""
    yield path or "<root>", node
    for name, child in node.get("properties", {}).items():
        yield from nodes(child, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from nodes(node["additionalProperties"], f"{path}[*]")
    if "items" in node:
        yield from nodes(node["items"], f"{path}[]")
    for junctor in ("allOf", "anyOf", "oneOf"):
        for i, child in enumerate(node.get(junctor, [])):
            yield from nodes(child, f"{path}<{junctor}{i}>")
    if "not" in node:
        yield from nodes(node["not"], f"{path}<not>")


def fields(node: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every declared field (a property), with its dotted path; list items as ``[]``."""
    for name, child in node.get("properties", {}).items():
        here = f"{path}.{name}" if path else name
        yield here, child
        yield from fields(child, here)
    if "items" in node:
        yield from fields(node["items"], path + "[]")
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from fields(node["additionalProperties"], path + "[*]")


# --------------------------------------------------------------------------------------------


def test_crds_folder_holds_one_file_per_kind_named_after_the_plural() -> None:
    files = {p.name for p in CRD_DIR.glob("*.yaml")}
    assert files == {f"{GROUP}_{plural}.yaml" for plural, _, _ in CONTRACT.values()}
    for path in CRD_DIR.glob("*.yaml"):
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
        assert len(docs) == 1, f"{path.name}: one CustomResourceDefinition per file"
        assert docs[0]["kind"] == "CustomResourceDefinition"
        assert docs[0]["apiVersion"] == "apiextensions.k8s.io/v1"
        assert path.name == f"{GROUP}_{docs[0]['spec']['names']['plural']}.yaml"


def test_the_five_kinds_of_the_contract_are_defined() -> None:
    assert sorted(CRDS) == KINDS


@pytest.mark.parametrize("kind", KINDS)
def test_names_are_consistent(kind: str) -> None:
    crd = CRDS[kind]
    plural, scope, short_names = CONTRACT[kind]
    names = crd["spec"]["names"]
    assert crd["spec"]["group"] == GROUP
    assert crd["metadata"]["name"] == f"{plural}.{GROUP}"
    assert names["kind"] == kind
    assert names["plural"] == plural
    assert names["singular"] == kind.lower()
    assert names["listKind"] == f"{kind}List"
    assert names["shortNames"] == short_names
    assert names["categories"] == ["sky"]
    assert crd["spec"]["scope"] == scope
    for name in (names["plural"], names["singular"], *names["shortNames"]):
        assert re.fullmatch(r"[a-z][a-z0-9]*", name), name


def test_short_names_are_unique_and_do_not_shadow_builtin_or_volcano_names() -> None:
    all_names: list[str] = []
    for crd in CRDS.values():
        names = crd["spec"]["names"]
        all_names += [names["plural"], names["singular"], *names["shortNames"]]
        assert not set(names["shortNames"]) & TAKEN_SHORT_NAMES, names["shortNames"]
    assert len(all_names) == len(set(all_names))


@pytest.mark.parametrize("kind", KINDS)
def test_exactly_one_version_is_served_and_stored_with_the_status_subresource(kind: str) -> None:
    versions = CRDS[kind]["spec"]["versions"]
    assert [(v["name"], v["served"], v["storage"]) for v in versions] == [("v1alpha1", True, True)]
    assert versions[0]["subresources"] == {"status": {}}
    assert "status" in root_schema(kind)["properties"]


@pytest.mark.parametrize("kind", KINDS)
def test_printer_columns_are_the_contracted_ones_in_order(kind: str) -> None:
    cols = version(kind)["additionalPrinterColumns"]
    default = [(c["name"], c["jsonPath"], c["type"]) for c in cols if not c.get("priority", 0)]
    assert default == COLUMNS[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_printer_column_paths_reach_schema_fields_of_a_matching_type(kind: str) -> None:
    for col in version(kind)["additionalPrinterColumns"]:
        assert col["type"] in ("integer", "number", "string", "boolean", "date")
        assert col.get("description"), f"{kind} column {col['name']} needs a description"
        node = printer_columns.column_schema(root_schema(kind), col["jsonPath"])
        if col["type"] == "date":
            assert node.get("format") == "date-time", col
        elif col["type"] == "string":
            assert node.get("type") == "string" or node.get("x-kubernetes-int-or-string"), col
        else:
            assert node.get("type") == col["type"], col


def test_a_printer_column_path_that_names_no_field_is_caught() -> None:
    with pytest.raises(KeyError, match="nodeNmae"):
        printer_columns.column_schema(root_schema("Quota"), ".status.nodeNmae")
    with pytest.raises(ValueError, match="simple"):
        printer_columns.column_schema(root_schema("Quota"), ".status.tasks[0].uid")


@pytest.mark.parametrize("kind", KINDS)
def test_schema_is_structural(kind: str) -> None:
    assert structural.structural_errors(root_schema(kind)) == []


@pytest.mark.parametrize("kind", KINDS)
def test_every_field_has_a_description_for_kubectl_explain(kind: str) -> None:
    root = root_schema(kind)
    assert root.get("description")
    missing = [path for path, node in fields(root) if not str(node.get("description", "")).strip()]
    assert missing == []


@pytest.mark.parametrize("kind", KINDS)
def test_every_schema_keyword_is_one_kubernetes_knows(kind: str) -> None:
    # the generated model's JSON names (attribute_map is in the class, not in the package's stubs)
    attribute_map: Mapping[str, str] = vars(models.V1JSONSchemaProps)["attribute_map"]
    known = set(attribute_map.values())
    unknown = [(path, sorted(set(node) - known)) for path, node in nodes(root_schema(kind)) if set(node) - known]
    assert unknown == []


def _build(model: str, data: Any) -> Any:
    """Construct the kubernetes_asyncio model for ``data``; unknown keys and missing required fields raise."""
    if model.startswith("list["):
        assert isinstance(data, list), (model, data)
        return [_build(model[5:-1], x) for x in data]
    if model.startswith("dict("):
        inner = model[5:-1].split(", ", 1)[1]
        return {k: _build(inner, v) for k, v in data.items()}
    cls = getattr(models, model, None)
    if cls is None:  # str, int, bool, object
        return data
    by_json = {json: attr for attr, json in cls.attribute_map.items()}
    unknown = set(data) - set(by_json)
    assert not unknown, f"{model}: unknown fields {sorted(unknown)}"
    kwargs = {by_json[k]: _build(cls.openapi_types[by_json[k]], v) for k, v in data.items()}
    return cls(**kwargs)


@pytest.mark.parametrize("kind", KINDS)
def test_manifest_fits_the_kubernetes_customresourcedefinition_model(kind: str) -> None:
    crd = dict(CRDS[kind])
    version_ = dict(crd["spec"]["versions"][0])
    version_.pop("schema")  # JSONSchemaProps are checked keyword by keyword above
    crd["spec"] = {**crd["spec"], "versions": [version_]}
    built = _build("V1CustomResourceDefinition", crd)
    assert built.spec.names.kind == kind


def test_the_model_check_rejects_a_misspelt_field() -> None:
    crd = dict(CRDS["Queue"])
    bad_version = {**crd["spec"]["versions"][0], "additionalPrinterColumn": []}
    bad_version.pop("schema")
    with pytest.raises(AssertionError, match="additionalPrinterColumn"):
        _build("V1CustomResourceDefinition", {**crd, "spec": {**crd["spec"], "versions": [bad_version]}})


@pytest.mark.parametrize("kind", KINDS)
def test_every_quantity_uses_the_kubernetes_quantity_pattern(kind: str) -> None:
    quantities = [
        (p, n)
        for p, n in nodes(root_schema(kind))
        if n.get("x-kubernetes-int-or-string") and not p.endswith(".highestTierAllowed")  # a tier, not a quantity
    ]
    for path, node in quantities:
        assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        assert node["pattern"] == QUANTITY_PATTERN, path
        assert "type" not in node, path
    resource_lists = [
        path
        for path, node in nodes(root_schema(kind))
        if isinstance(node.get("additionalProperties"), Mapping)
        and node["additionalProperties"].get("x-kubernetes-int-or-string")
    ]
    assert len(resource_lists) == len(quantities)  # every quantity sits in a ResourceList
    assert bool(quantities) == (kind in ("Quota", "PodGroup", "Queue"))


# (kind, field path, type, format-or-None); "quantity-map" is a ResourceList.
CONTRACT_FIELDS = [
    ("Quota", "spec.queueName", "string"),
    ("Quota", "spec.request", "quantity-map"),
    ("Quota", "spec.nodeSelector", "string-map"),
    ("Quota", "spec.tolerations[].key", "string"),
    ("Quota", "spec.tolerations[].operator", "string"),
    ("Quota", "spec.tolerations[].value", "string"),
    ("Quota", "spec.tolerations[].effect", "string"),
    ("Quota", "spec.tolerations[].tolerationSeconds", "integer:int64"),
    ("Quota", "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[]"
              ".matchExpressions[].operator", "string"),
    ("Quota", "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[]"
              ".matchFields[].values", "array"),
    ("Quota", "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[].weight", "integer:int32"),
    ("Quota", "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[].preference", "object"),
    ("Quota", "spec.affinity.quotaAffinity[].quotaNames", "array"),
    ("Quota", "spec.affinity.quotaAffinity[].labelSelector.matchLabels", "string-map"),
    ("Quota", "spec.affinity.quotaAntiAffinity[].labelSelector.matchExpressions[].key", "string"),
    ("Quota", "spec.affinity.podAffinity.podSelector.matchLabels", "string-map"),
    ("Quota", "spec.affinity.podAffinity.namespaces", "array"),
    ("Quota", "spec.sharedQueues", "array"),
    ("Quota", "spec.staticBindNode", "string"),
    ("Quota", "status.phase", "string"),
    ("Quota", "status.nodeName", "string"),
    ("Quota", "status.allocated", "quantity-map"),
    ("Quota", "status.shadowResource", "quantity-map"),
    ("Quota", "status.staticBindStatus.nodeName", "string"),
    ("Quota", "status.staticBindStatus.bound", "boolean"),
    ("Quota", "status.tasks[].uid", "string"),
    ("Quota", "status.tasks[].namespace", "string"),
    ("Quota", "status.tasks[].name", "string"),
    ("Quota", "status.tasks[].job", "string"),
    ("Quota", "status.tasks[].taskIndex", "integer:int32"),
    ("Quota", "status.tasks[].request", "quantity-map"),
    ("Quota", "status.tasks[].phase", "string"),
    ("Quota", "status.reservedTasks[].job", "string"),
    ("Quota", "status.reservedTasks[].taskIndex", "integer:int32"),
    ("Quota", "status.reservedTasks[].namespace", "string"),
    ("Quota", "status.reservedTasks[].podName", "string"),
    ("Quota", "status.reservedTasks[].podUID", "string"),
    ("Quota", "status.reservedTasks[].reason", "string"),
    ("Quota", "status.reservedTasks[].expiresAt", "string:date-time"),
    ("Quota", "status.reason", "string"),
    ("Quota", "status.message", "string"),
    ("Quota", "status.lastTransitionTime", "string:date-time"),
    ("Quota", "status.observedGeneration", "integer:int64"),
    ("NodeTopology", "spec.zone", "string"),
    ("NodeTopology", "spec.net.roce[].name", "string"),
    ("NodeTopology", "spec.net.roce[].switchName", "string"),
    ("NodeTopology", "spec.net.roce[].switchPort", "string"),
    ("NodeTopology", "spec.net.roce[].rdmaDevice", "string"),
    ("NodeTopology", "spec.net.roce[].master", "string"),
    ("NodeTopology", "spec.net.ib[].name", "string"),
    ("NodeTopology", "spec.net.ib[].port", "integer:int32"),
    ("NodeTopology", "spec.net.ib[].guid", "string"),
    ("NodeTopology", "spec.net.ib[].switchName", "string"),
    ("NodeTopology", "spec.net.ib[].switchGuid", "string"),
    ("NodeTopology", "spec.net.ib[].rdmaDevice", "string"),
    ("NodeTopology", "spec.tiers[].level", "integer:int32"),
    ("NodeTopology", "spec.tiers[].name", "string"),
    ("NodeTopology", "status.observedAt", "string:date-time"),
    ("NodeTopology", "status.agent", "string"),
    ("PodGroup", "spec.minMember", "integer:int32"),
    ("PodGroup", "spec.queue", "string"),
    ("PodGroup", "spec.priorityClassName", "string"),
    ("PodGroup", "spec.minResources", "quantity-map"),
    ("PodGroup", "spec.topology.enabled", "boolean"),
    ("PodGroup", "spec.topology.strictOrder", "boolean"),
    ("PodGroup", "spec.topology.affinityKey", "string"),
    ("PodGroup", "status.phase", "string"),
    ("PodGroup", "status.conditions[].type", "string"),
    ("PodGroup", "status.conditions[].status", "string"),
    ("PodGroup", "status.conditions[].reason", "string"),
    ("PodGroup", "status.conditions[].message", "string"),
    ("PodGroup", "status.conditions[].lastTransitionTime", "string:date-time"),
    ("PodGroup", "status.conditions[].transitionID", "string"),
    ("PodGroup", "status.running", "integer:int32"),
    ("PodGroup", "status.succeeded", "integer:int32"),
    ("PodGroup", "status.failed", "integer:int32"),
    ("PodGroup", "status.boundQuotas", "integer:int32"),
    ("Queue", "spec.weight", "integer:int32"),
    ("Queue", "spec.capability", "quantity-map"),
    ("Queue", "spec.reclaimable", "boolean"),
    ("Queue", "spec.state", "string"),
    ("Queue", "status.allocated", "quantity-map"),
    ("Queue", "status.specAllocated", "object"),
    ("Queue", "status.running", "integer:int32"),
    ("Queue", "status.pending", "integer:int32"),
    ("Queue", "status.state", "string"),
    ("JobQueue", "spec.jobSelector.matchLabels", "string-map"),
    ("JobQueue", "spec.jobSelector.matchExpressions[].values", "array"),
    ("JobQueue", "spec.namespaces", "array"),
    ("JobQueue", "spec.priority", "integer:int32"),
    ("JobQueue", "spec.state", "string"),
    ("JobQueue", "spec.maxRunningJobs", "integer:int32"),
    ("JobQueue", "status.runningJobs", "integer:int32"),
    ("JobQueue", "status.pendingJobs", "integer:int32"),
    ("JobQueue", "status.blockedJobs", "integer:int32"),
]  # fmt: skip


def _describe(node: Mapping[str, Any]) -> str:
    extra = node.get("additionalProperties")
    if node.get("type") == "object" and isinstance(extra, Mapping):
        if extra.get("x-kubernetes-int-or-string"):
            return "quantity-map"
        if extra.get("type") == "string":
            return "string-map"
    if node.get("format") and node.get("type") in ("string", "integer"):
        return f"{node['type']}:{node['format']}"
    return str(node.get("type"))


@pytest.mark.parametrize(("kind", "path", "expected"), CONTRACT_FIELDS, ids=[f"{k}:{p}" for k, p, _ in CONTRACT_FIELDS])
def test_contract_field_exists_with_its_type(kind: str, path: str, expected: str) -> None:
    declared = dict(fields(root_schema(kind)))
    assert path in declared, f"{kind} has no field {path}"
    assert _describe(declared[path]) == expected


REQUIRED = {
    ("Quota", ""): ["spec"],
    ("Quota", "spec"): ["queueName", "request"],
    ("Quota", "status.tasks"): ["uid", "namespace", "name", "job", "request", "phase"],
    ("Quota", "status.reservedTasks"): ["job", "namespace", "podName", "podUID", "reason", "expiresAt"],
    ("NodeTopology", "spec.net.roce"): ["name"],
    ("NodeTopology", "spec.net.ib"): ["name"],
    ("PodGroup", "status.conditions"): ["type", "status"],
    ("JobQueue", ""): ["spec"],
    ("JobQueue", "spec"): ["jobSelector"],
}


@pytest.mark.parametrize(("kind", "path"), sorted(REQUIRED))
def test_required_fields_are_the_contracted_ones(kind: str, path: str) -> None:
    node = root_schema(kind) if not path else dict(fields(root_schema(kind)))[path]
    node = node.get("items", node)
    assert sorted(node.get("required", [])) == sorted(REQUIRED[(kind, path)])


ENUMS = [
    ("Quota", "status.phase", ["QuotaEmpty", "QuotaBound"]),
    ("Quota", "spec.tolerations[].operator", ["Equal", "Exists"]),
    ("Quota", "spec.tolerations[].effect", ["NoSchedule", "PreferNoSchedule", "NoExecute", ""]),
    ("Quota", "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[]"
              ".matchExpressions[].operator", ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
    ("Quota", "status.reservedTasks[].reason", ["Preempted", "Deleted", "Evicted", "Failed"]),
    ("PodGroup", "status.phase", ["Pending", "Inqueue", "Unschedulable", "Running", "Completed", "Unknown"]),
    ("PodGroup", "status.conditions[].status", ["True", "False", "Unknown"]),
    ("Queue", "spec.state", ["Open", "Closed"]),
    ("JobQueue", "spec.state", ["Open", "Closed"]),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "path", "values"), ENUMS, ids=[f"{k}:{p}" for k, p, _ in ENUMS])
def test_enums_are_the_contracted_ones(kind: str, path: str, values: list[str]) -> None:
    assert dict(fields(root_schema(kind)))[path]["enum"] == values


DEFAULTS = [
    ("PodGroup", "spec.minMember", 1),
    ("Queue", "spec.weight", 1),
    ("Queue", "spec.reclaimable", True),
    ("Queue", "spec.state", "Open"),
    ("JobQueue", "spec.state", "Open"),
    ("JobQueue", "spec.priority", 0),
    ("NodeTopology", "spec.net.ib[].port", 1),
]

MINIMUMS = [
    ("PodGroup", "spec.minMember", 1),
    ("Queue", "spec.weight", 1),
    ("JobQueue", "spec.maxRunningJobs", 0),
    ("NodeTopology", "spec.net.ib[].port", 1),
    ("Quota", "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[].weight", 1),
    ("Quota", "status.observedGeneration", 0),
]


@pytest.mark.parametrize(("kind", "path", "value"), DEFAULTS, ids=[f"{k}:{p}" for k, p, _ in DEFAULTS])
def test_defaults_are_the_contracted_ones(kind: str, path: str, value: object) -> None:
    default = dict(fields(root_schema(kind)))[path]["default"]
    assert default == value and type(default) is type(value)


@pytest.mark.parametrize(("kind", "path", "value"), MINIMUMS, ids=[f"{k}:{p}" for k, p, _ in MINIMUMS])
def test_minimums_are_the_contracted_ones(kind: str, path: str, value: int) -> None:
    assert dict(fields(root_schema(kind)))[path]["minimum"] == value


def _load_generator() -> Any:
    spec = importlib.util.spec_from_file_location("sky_crds_generate", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_manifests_and_docs_are_what_the_generator_produces() -> None:
    generator = _load_generator()
    stale = [str(p.relative_to(CRD_DIR.parent)) for p in generator.stale_files()]
    assert stale == [], "run: python crds/generate.py"


def test_manifests_load_back_to_exactly_the_generated_definitions() -> None:
    generator = _load_generator()
    assert {d["spec"]["names"]["kind"]: d for d in generator.all_crds()} == CRDS
