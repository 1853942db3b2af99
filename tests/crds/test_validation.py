"""Objects the API server must accept, and objects it must reject with an error naming the field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from . import printer_columns, schema
from .objects import API_VERSION, CRDS, EXAMPLES_DIR, FULL, SEED_STATUSES, full, minimal

KINDS = sorted(CRDS)


def examples() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(EXAMPLES_DIR.glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
        assert len(docs) == 1, f"{path.name}: one object per example file"
        out[path.name] = docs[0]
    return out


def test_there_is_one_example_per_kind() -> None:
    assert sorted(doc["kind"] for doc in examples().values()) == KINDS


@pytest.mark.parametrize("name", sorted(examples()))
def test_example_is_valid(name: str) -> None:
    doc = examples()[name]
    assert doc["apiVersion"] == API_VERSION
    assert schema.validate(doc, CRDS[doc["kind"]]) == []


@pytest.mark.parametrize("name", sorted(examples()))
def test_example_is_commented_for_the_reader(name: str) -> None:
    text = (EXAMPLES_DIR / name).read_text(encoding="utf-8")
    comment_lines = [line for line in text.splitlines() if line.lstrip().startswith("#") or " # " in line]
    assert len(comment_lines) >= 5


def test_example_objects_are_the_ones_of_the_seed_walkthrough() -> None:
    by_kind = {doc["kind"]: doc for doc in examples().values()}
    quota = by_kind["Quota"]
    assert quota["metadata"]["name"] == "q-train-0"
    assert quota["spec"] == {"queueName": "research", "request": {"nvidia.com/gpu": 1, "rdma/hca": 1}}
    assert "namespace" not in quota["metadata"]
    topo = by_kind["NodeTopology"]
    assert topo["metadata"]["name"] == "n0"
    assert {nic["switchName"] for nic in topo["spec"]["net"]["roce"]} == {"S1"}
    pg = by_kind["PodGroup"]
    assert (pg["metadata"]["name"], pg["spec"]["minMember"], pg["spec"]["queue"]) == ("llama-sft", 4, "research")
    assert by_kind["Queue"]["metadata"]["name"] == "research"
    # the JobQueue example selects the PodGroup example
    jq = by_kind["JobQueue"]["spec"]
    assert jq["jobSelector"]["matchLabels"].items() <= pg["metadata"]["labels"].items()
    assert pg["metadata"]["namespace"] in jq["namespaces"]


@pytest.mark.parametrize("kind", KINDS)
def test_object_with_every_contract_field_is_valid(kind: str) -> None:
    assert schema.validate(FULL[kind], CRDS[kind]) == []


@pytest.mark.parametrize("kind", KINDS)
def test_smallest_object_the_contract_allows_is_valid(kind: str) -> None:
    assert schema.validate(minimal(kind), CRDS[kind]) == []


@pytest.mark.parametrize(("kind", "status"), SEED_STATUSES)
def test_status_from_the_seed_walkthrough_is_valid(kind: str, status: dict[str, Any]) -> None:
    obj = {**minimal(kind), "status": status}
    assert schema.validate(obj, CRDS[kind]) == []


def _paths(node: Any, path: str = "") -> set[str]:
    """Field paths present in an object; list items as [], map values as [*] (maps chosen by schema)."""
    out: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}" if path else key
            out.add(here)
            out |= _paths(value, here)
    elif isinstance(node, list):
        for item in node:
            out |= _paths(item, path + "[]")
    return out


def _schema_paths(node: dict[str, Any], path: str = "") -> set[str]:
    out: set[str] = set()
    for name, child in node.get("properties", {}).items():
        here = f"{path}.{name}" if path else name
        out.add(here)
        out |= _schema_paths(child, here)
    if "items" in node:
        out |= _schema_paths(node["items"], path + "[]")
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_full_objects_cover_every_schema_field(kind: str) -> None:
    declared = _schema_paths(schema.openapi_schema(CRDS[kind])) - {"apiVersion", "kind", "metadata"}
    assert declared - _paths(FULL[kind]) == set()


# --------------------------------------------------------------------------------------------
# Invalid objects: (id, kind, mutation of the full object, field the error must name)
# --------------------------------------------------------------------------------------------

Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    def mutate(obj: dict[str, Any]) -> None:
        *parents, last = _split(path)
        node: Any = obj
        for key in parents:
            node = node[key]
        node[last] = value

    return mutate


def _del(path: str) -> Mutation:
    def mutate(obj: dict[str, Any]) -> None:
        *parents, last = _split(path)
        node: Any = obj
        for key in parents:
            node = node[key]
        del node[last]

    return mutate


_TIER = "spec/topology/highestTierAllowed"
_VTIER = "spec/networkTopology/highestTierAllowed"


def _split(path: str) -> list[Any]:
    """JSON-pointer-like: segments split on "/", "~1" stands for a "/" inside a key, digits index lists."""
    return [int(p) if p.isdigit() else p.replace("~1", "/") for p in path.split("/")]


INVALID: list[tuple[str, str, Mutation, str]] = [
    ("quota-no-request", "Quota", _del("spec/request"), "spec.request"),
    ("quota-no-queue", "Quota", _del("spec/queueName"), "spec.queueName"),
    ("quota-empty-queue", "Quota", _set("spec/queueName", ""), "spec.queueName"),
    ("quota-no-spec", "Quota", _del("spec"), "spec"),
    ("quota-empty-request", "Quota", _set("spec/request", {}), "spec.request"),
    ("quota-gpus-in-words", "Quota", _set("spec/request/nvidia.com~1gpu", "8 GPUs"), "spec.request[nvidia.com/gpu]"),
    ("quota-float-quantity", "Quota", _set("spec/request/nvidia.com~1gpu", 0.5), "spec.request[nvidia.com/gpu]"),
    ("quota-bool-quantity", "Quota", _set("spec/request/cpu", True), "spec.request[cpu]"),
    ("quota-bad-suffix", "Quota", _set("spec/request/memory", "1Kb"), "spec.request[memory]"),
    ("quota-trailing-newline", "Quota", _set("spec/request/memory", "1Gi\n"), "spec.request[memory]"),
    ("quota-request-not-a-map", "Quota", _set("spec/request", ["nvidia.com/gpu"]), "spec.request"),
    ("quota-node-selector-int", "Quota", _set("spec/nodeSelector/gpu", 8), "spec.nodeSelector[gpu]"),
    ("quota-phase-bound", "Quota", _set("status/phase", "Bound"), "status.phase"),
    ("toleration-maybe", "Quota", _set("spec/tolerations/0/operator", "Maybe"), "spec.tolerations[0].operator"),
    ("toleration-effect", "Quota", _set("spec/tolerations/0/effect", "NoScheduling"), "spec.tolerations[0].effect"),
    ("toleration-exists-with-value", "Quota", _set("spec/tolerations/1/value", "x"), "spec.tolerations[1]"),
    ("toleration-no-key-equal", "Quota", _set("spec/tolerations/2/operator", "Equal"), "spec.tolerations[2]"),
    ("toleration-no-key-no-op", "Quota", _del("spec/tolerations/2/operator"), "spec.tolerations[2]"),
    ("toleration-seconds-not-noexecute", "Quota", _set("spec/tolerations/1/effect", "NoSchedule"),
     "spec.tolerations[1]"),
    ("toleration-seconds-string", "Quota", _set("spec/tolerations/1/tolerationSeconds", "300"),
     "spec.tolerations[1].tolerationSeconds"),
    ("node-affinity-op", "Quota",
     _set("spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/"
          "matchExpressions/0/operator", "Like"),
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
     ".matchExpressions[0].operator"),
    ("node-affinity-gt-not-int", "Quota",
     _set("spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/"
          "matchExpressions/1/values", ["four"]),
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
     ".matchExpressions[1]"),
    ("node-affinity-in-no-values", "Quota",
     _set("spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/"
          "matchExpressions/0/values", []),
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
     ".matchExpressions[0]"),
    ("node-affinity-no-terms", "Quota",
     _set("spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution", {}),
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"),
    ("preferred-weight-0", "Quota",
     _set("spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution/0/weight", 0),
     "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"),
    ("preferred-weight-101", "Quota",
     _set("spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution/1/weight", 101),
     "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[1].weight"),
    ("quota-affinity-empty-term", "Quota", _set("spec/affinity/quotaAffinity/0", {}), "spec.affinity.quotaAffinity[0]"),
    ("quota-affinity-no-names", "Quota", _set("spec/affinity/quotaAntiAffinity/0/quotaNames", []),
     "spec.affinity.quotaAntiAffinity[0].quotaNames"),
    ("quota-affinity-duplicate-name", "Quota", _set("spec/affinity/quotaAffinity/0/quotaNames", ["a", "a"]),
     "spec.affinity.quotaAffinity[0].quotaNames[1]"),
    ("label-selector-exists-with-values", "Quota",
     _set("spec/affinity/podAffinity/podSelector/matchExpressions/1/values", ["x"]),
     "spec.affinity.podAffinity.podSelector.matchExpressions[1]"),
    ("label-selector-gt", "Quota",
     _set("spec/affinity/podAffinity/podSelector/matchExpressions/1/operator", "Gt"),
     "spec.affinity.podAffinity.podSelector.matchExpressions[1].operator"),
    ("pod-affinity-namespaces-string", "Quota", _set("spec/affinity/podAffinity/namespaces", "ml-research"),
     "spec.affinity.podAffinity.namespaces"),
    ("shared-queues-duplicate", "Quota", _set("spec/sharedQueues", ["eval", "eval"]), "spec.sharedQueues[1]"),
    ("static-bind-node-list", "Quota", _set("spec/staticBindNode", ["n0"]), "spec.staticBindNode"),
    ("unknown-spec-field", "Quota", _set("spec/nodeName", "n0"), "spec.nodeName"),
    ("misspelt-affinity", "Quota", _set("spec/affinity/nodeAfinity", {}), "spec.affinity.nodeAfinity"),
    ("unknown-top-level-field", "Quota", _set("specs", {}), "specs"),
    ("task-without-uid", "Quota", _del("status/tasks/0/uid"), "status.tasks[0].uid"),
    ("task-without-phase", "Quota", _del("status/tasks/0/phase"), "status.tasks[0].phase"),
    ("task-duplicate-uid", "Quota", _set("status/tasks/1/uid", "uid-0"), "status.tasks[1]"),
    ("task-negative-index", "Quota", _set("status/tasks/0/taskIndex", -1), "status.tasks[0].taskIndex"),
    ("task-index-string", "Quota", _set("status/tasks/0/taskIndex", "0"), "status.tasks[0].taskIndex"),
    ("reserved-reason-killed", "Quota", _set("status/reservedTasks/0/reason", "Killed"),
     "status.reservedTasks[0].reason"),
    ("reserved-expiry-tomorrow", "Quota", _set("status/reservedTasks/0/expiresAt", "tomorrow"),
     "status.reservedTasks[0].expiresAt"),
    ("reserved-expiry-no-zone", "Quota", _set("status/reservedTasks/0/expiresAt", "2025-11-29T10:05:00"),
     "status.reservedTasks[0].expiresAt"),
    ("reserved-expiry-feb-30", "Quota", _set("status/reservedTasks/0/expiresAt", "2025-02-30T10:05:00Z"),
     "status.reservedTasks[0].expiresAt"),
    ("reserved-without-pod-uid", "Quota", _del("status/reservedTasks/1/podUID"), "status.reservedTasks[1].podUID"),
    ("allocated-bad-quantity", "Quota", _set("status/allocated/rdma~1hca", "one"), "status.allocated[rdma/hca]"),
    ("shadow-bad-quantity", "Quota", _set("status/shadowResource/nvidia.com~1gpu", "1.5 cards"),
     "status.shadowResource[nvidia.com/gpu]"),
    ("static-bound-yes", "Quota", _set("status/staticBindStatus/bound", "yes"), "status.staticBindStatus.bound"),
    ("observed-generation-negative", "Quota", _set("status/observedGeneration", -1), "status.observedGeneration"),
    ("transition-time-garbage", "Quota", _set("status/lastTransitionTime", "10:00"), "status.lastTransitionTime"),
    ("podgroup-min-member-0", "PodGroup", _set("spec/minMember", 0), "spec.minMember"),
    ("podgroup-min-member-string", "PodGroup", _set("spec/minMember", "4"), "spec.minMember"),
    ("podgroup-phase", "PodGroup", _set("status/phase", "Done"), "status.phase"),
    ("podgroup-condition-status", "PodGroup", _set("status/conditions/0/status", "Yes"), "status.conditions[0].status"),
    ("podgroup-condition-no-type", "PodGroup", _del("status/conditions/1/type"), "status.conditions[1].type"),
    ("podgroup-condition-duplicate", "PodGroup", _set("status/conditions/1/type", "Scheduled"), "status.conditions[1]"),
    ("podgroup-topology-auto", "PodGroup", _set("spec/topology/enabled", "auto"), "spec.topology.enabled"),
    ("podgroup-running-negative", "PodGroup", _set("status/running", -1), "status.running"),
    ("podgroup-min-resources", "PodGroup", _set("spec/minResources/cpu", "3.5 cores"), "spec.minResources[cpu]"),
    ("podgroup-unknown-topology-field", "PodGroup", _set("spec/topology/zone", "S1"), "spec.topology.zone"),
    ("podgroup-tier-name", "PodGroup", _set(_TIER, "rack"), _TIER.replace("/", ".")),
    ("podgroup-tier-too-high", "PodGroup", _set(_TIER, 17), _TIER.replace("/", ".")),
    ("podgroup-tier-negative", "PodGroup", _set(_VTIER, -1), _VTIER.replace("/", ".")),
    ("podgroup-tier-mode", "PodGroup", _set("spec/topology/mode", "strict"), "spec.topology.mode"),
    ("queue-negative-weight", "Queue", _set("spec/weight", -1), "spec.weight"),
    ("queue-zero-weight", "Queue", _set("spec/weight", 0), "spec.weight"),
    ("queue-state-paused", "Queue", _set("spec/state", "Paused"), "spec.state"),
    ("queue-reclaimable-string", "Queue", _set("spec/reclaimable", "true"), "spec.reclaimable"),
    ("queue-capability", "Queue", _set("spec/capability/nvidia.com~1gpu", "lots"), "spec.capability[nvidia.com/gpu]"),
    ("queue-spec-allocated", "Queue", _set("status/specAllocated/h100/nvidia.com~1gpu", "x"),
     "status.specAllocated[h100][nvidia.com/gpu]"),
    ("queue-status-state", "Queue", _set("status/state", "Draining"), "status.state"),
    ("queue-pending-negative", "Queue", _set("status/pending", -3), "status.pending"),
    ("jobqueue-no-selector", "JobQueue", _del("spec/jobSelector"), "spec.jobSelector"),
    ("jobqueue-max-running-negative", "JobQueue", _set("spec/maxRunningJobs", -1), "spec.maxRunningJobs"),
    ("jobqueue-state-lowercase", "JobQueue", _set("spec/state", "closed"), "spec.state"),
    ("jobqueue-namespaces-duplicate", "JobQueue", _set("spec/namespaces", ["a", "b", "a"]), "spec.namespaces[2]"),
    ("jobqueue-priority-float", "JobQueue", _set("spec/priority", 1.5), "spec.priority"),
    ("jobqueue-selector-operator", "JobQueue", _set("spec/jobSelector/matchExpressions/0/operator", "in"),
     "spec.jobSelector.matchExpressions[0].operator"),
    ("jobqueue-blocked-negative", "JobQueue", _set("status/blockedJobs", -1), "status.blockedJobs"),
    ("topology-nic-without-name", "NodeTopology", _del("spec/net/roce/2/name"), "spec.net.roce[2].name"),
    ("topology-nic-duplicate", "NodeTopology", _set("spec/net/roce/1/name", "enp24s0f0"), "spec.net.roce[1]"),
    ("topology-ib-port-0", "NodeTopology", _set("spec/net/ib/1/port", 0), "spec.net.ib[1].port"),
    ("topology-ib-duplicate-default-port", "NodeTopology", _set("spec/net/ib/2/name", "mlx5_0"), "spec.net.ib[2]"),
    ("topology-observed-at", "NodeTopology", _set("status/observedAt", "yesterday"), "status.observedAt"),
    ("topology-unknown-nic-field", "NodeTopology", _set("spec/net/roce/0/speed", "200G"), "spec.net.roce[0].speed"),
]  # fmt: skip


def _apply(kind: str, mutate: Mutation) -> dict[str, Any]:
    obj = full(kind)
    mutate(obj)
    return obj


@pytest.mark.parametrize(("case", "kind", "mutate", "field"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_object_is_rejected_naming_the_field(case: str, kind: str, mutate: Mutation, field: str) -> None:
    assert schema.validate(FULL[kind], CRDS[kind]) == []  # the unmutated object is fine
    errors = schema.validate(_apply(kind, mutate), CRDS[kind])
    assert errors, f"{case}: accepted"
    assert field in {e.field for e in errors}, f"{case}: errors name {[str(e) for e in errors]}"


def test_invalid_cases_are_unique() -> None:
    assert len({c[0] for c in INVALID}) == len(INVALID)


VALID_QUANTITIES = [0, 1, 8, -1, "0", "1", "8", "500m", "1.5", ".5", "1.", "+1", "-1", "64Gi", "1Ki", "1Ei", "1k",
                    "1M", "1E", "1e3", "1E3", "1e-3", "1e+3", "0.01", "100n", "5u", "1.5Gi"]  # fmt: skip
INVALID_QUANTITIES = ["8 GPUs", "", " 1", "1 ", "1Kb", "1KI", "1.2.3", "Gi", "1e", "0x10", "1Gi\n", "1,5", "one",
                      "1mi", "1K", "++1", 1.5, True, None, [], {}]  # fmt: skip


@pytest.mark.parametrize("value", VALID_QUANTITIES, ids=repr)
def test_kubernetes_quantity_is_accepted(value: object) -> None:
    obj = minimal("Quota")
    obj["spec"]["request"] = {"nvidia.com/gpu": value}
    assert schema.validate(obj, CRDS["Quota"]) == []


@pytest.mark.parametrize("value", INVALID_QUANTITIES, ids=repr)
def test_malformed_quantity_is_rejected(value: object) -> None:
    obj = minimal("Quota")
    obj["spec"]["request"] = {"nvidia.com/gpu": value}
    assert "spec.request[nvidia.com/gpu]" in {e.field for e in schema.validate(obj, CRDS["Quota"])}


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_fields_are_accepted_then_pruned_without_strict_validation(kind: str) -> None:
    obj = full(kind)
    obj["spec"]["futureField"] = {"x": 1}
    obj["status"]["debug"] = "x"
    assert {e.field for e in schema.validate(obj, CRDS[kind])} == {"spec.futureField", "status.debug"}
    assert schema.validate(obj, CRDS[kind], strict=False) == []
    pruned = schema.prune(obj, schema.openapi_schema(CRDS[kind]))
    assert pruned == FULL[kind]


def test_defaults_fill_an_object_that_omits_spec() -> None:
    pg = schema.apply_defaults(minimal("PodGroup"), schema.openapi_schema(CRDS["PodGroup"]))
    assert pg["spec"] == {"minMember": 1}
    queue = schema.apply_defaults(minimal("Queue"), schema.openapi_schema(CRDS["Queue"]))
    assert queue["spec"] == {"weight": 1, "reclaimable": True, "state": "Open"}
    jq = schema.apply_defaults(minimal("JobQueue"), schema.openapi_schema(CRDS["JobQueue"]))
    assert jq["spec"] == {"jobSelector": {}, "priority": 0, "state": "Open"}
    for kind, obj in (("PodGroup", pg), ("Queue", queue), ("JobQueue", jq)):
        assert schema.validate(obj, CRDS[kind]) == []


def test_defaults_do_not_override_given_values() -> None:
    queue = full("Queue")
    assert schema.apply_defaults(queue, schema.openapi_schema(CRDS["Queue"])) == FULL["Queue"]


def test_ib_port_defaults_to_1_so_entries_without_port_collide_with_port_1() -> None:
    topo = schema.apply_defaults(full("NodeTopology"), schema.openapi_schema(CRDS["NodeTopology"]))
    assert [p["port"] for p in topo["spec"]["net"]["ib"]] == [1, 2, 1]


def test_quota_without_gpu_has_an_empty_gpu_column() -> None:
    cells = printer_columns.printer_cells(
        minimal("Quota") | {"spec": {"queueName": "q", "request": {"cpu": 1}}}, CRDS["Quota"]
    )
    assert cells["GPUS"] is None and cells["NODE"] is None


def test_kubectl_get_quota_shows_node_phase_queue_gpu_age() -> None:
    quota = examples()["quota.yaml"]
    quota = {**quota, "metadata": {**quota["metadata"], "creationTimestamp": "2025-11-29T10:00:00Z"},
             "status": {"phase": "QuotaBound", "nodeName": "n0", "gpus": "1 nvidia.com/gpu"}}  # fmt: skip
    assert printer_columns.printer_cells(quota, CRDS["Quota"]) == {
        "NODE": "n0",
        "PHASE": "QuotaBound",
        "QUEUE": "research",
        "GPUS": "1 nvidia.com/gpu",
        "AGE": "2025-11-29T10:00:00Z",
    }
    assert list(printer_columns.printer_cells(quota, CRDS["Quota"], wide=True)) == [
        "NODE",
        "PHASE",
        "QUEUE",
        "GPUS",
        "AGE",
        "REASON",
    ]


def test_kubectl_get_nodetopology_shows_zone_leaf_spine_age() -> None:
    assert printer_columns.printer_cells(full("NodeTopology"), CRDS["NodeTopology"]) == {
        "ZONE": "roce#S1,S2",
        "LEAF": "MF0;ib-leaf-1:MQM8700/U1",
        "SPINE": "MF0;ib-spine-1:MQM8700/U1+1",
        "AGE": None,
    }
    assert printer_columns.printer_cells(minimal("NodeTopology"), CRDS["NodeTopology"]) == {
        "ZONE": None, "LEAF": None, "SPINE": None, "AGE": None,
    }  # fmt: skip


def test_two_tiers_of_the_same_level_are_refused() -> None:
    topo = full("NodeTopology")
    topo["spec"]["tiers"].append({"level": 2, "name": "another"})
    assert [e.field for e in schema.validate(topo, CRDS["NodeTopology"])] == ["spec.tiers[3]"]
