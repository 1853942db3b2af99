"""Test data written from the API contract (docs/api.md, the issue), not derived from the schemas.

``FULL`` holds one object per kind with every field of the contract set, spec and status, so a
schema that misses or renames a field fails strict validation, and a schema field no fixture
uses fails ``test_full_objects_cover_every_schema_field``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from .schema import load_crds

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "crds"
EXAMPLES_DIR = ROOT / "examples" / "api"
DOCS = ROOT / "docs" / "api.md"
GENERATOR = CRD_DIR / "generate.py"

GROUP = "scheduling.infini-ai.com"
API_VERSION = f"{GROUP}/v1alpha1"

CRDS = load_crds(CRD_DIR)

# The exact pattern the issue prescribes for every quantity.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)"
    r"|(\.[0-9]+))))?$"
)

LABEL_SELECTOR = {
    "matchLabels": {"team": "llm"},
    "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["gold", "silver"]},
        {"key": "frozen", "operator": "DoesNotExist"},
    ],
}

NODE_SELECTOR_TERM = {
    "matchExpressions": [
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A100-SXM4-80GB"]},
        {"key": "gpu-count", "operator": "Gt", "values": ["4"]},
    ],
    "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n7"]}],
}

QUOTA: dict[str, Any] = {
    "apiVersion": API_VERSION,
    "kind": "Quota",
    "metadata": {"name": "q-full", "labels": {"job-family": "llama"}},
    "spec": {
        "queueName": "research",
        "request": {"nvidia.com/gpu": 8, "rdma/hca": "8", "cpu": "96", "memory": "1Ti"},
        "shadowResource": {"nvidia.com/gpu": 1},
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
            {"operator": "Exists"},
            {"key": "maintenance", "effect": ""},
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [NODE_SELECTOR_TERM]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": NODE_SELECTOR_TERM},
                    {"weight": 100, "preference": {"matchExpressions": [
                        {"key": "zone", "operator": "Exists"}]}},
                ],
            },
            "quotaAffinity": [
                {"quotaNames": ["q-train-1", "q-train-2"]},
                {"labelSelector": LABEL_SELECTOR},
                {"quotaNames": ["q-train-3"], "labelSelector": {}},
            ],
            "quotaAntiAffinity": [{"quotaNames": ["q-infer-0"]}, {"labelSelector": LABEL_SELECTOR}],
            "podAffinity": {"podSelector": LABEL_SELECTOR, "namespaces": ["ml-research", "ml-eval"]},
        },
        "sharedQueues": ["research-burst", "eval"],
        "staticBindNode": "n0",
    },
    "status": {
        "phase": "QuotaBound",
        "nodeName": "n0",
        "allocated": {"nvidia.com/gpu": "2", "rdma/hca": "2"},
        "shadowResource": {"nvidia.com/gpu": 1},
        "gpus": "2 nvidia.com/gpu",
        "staticBindStatus": {"nodeName": "n0", "bound": True},
        "tasks": [
            {"uid": "uid-0", "namespace": "ml-research", "name": "llama-sft-worker-0", "job": "ml-research/llama-sft",
             "taskIndex": 0, "request": {"nvidia.com/gpu": "1", "rdma/hca": "1"}, "phase": "Running"},
            {"uid": "uid-1", "namespace": "ml-research", "name": "solo", "job": "ml-research/solo",
             "request": {"nvidia.com/gpu": "1", "rdma/hca": "1"}, "phase": "AllocatedToQuota"},
            {"uid": "admission:7f0c", "namespace": "ml-research", "name": "llama-sft-worker-2",
             "job": "ml-research/llama-sft", "taskIndex": 2, "request": {"nvidia.com/gpu": "1"},
             "phase": "Pending", "expiresAt": "2025-11-29T10:00:33Z"},
        ],
        "reservedTasks": [
            {"job": "ml-research/llama-sft", "taskIndex": 1, "namespace": "ml-research",
             "podName": "llama-sft-worker-1", "podUID": "uid-9", "reason": "Preempted",
             "expiresAt": "2025-11-29T10:05:00Z", "request": {"nvidia.com/gpu": "1", "rdma/hca": 1}},
            {"job": "ml-research/other", "namespace": "ml-research", "podName": "other-0", "podUID": "uid-8",
             "reason": "Evicted", "expiresAt": "2025-11-29T10:05:00.123456789+08:00"},
        ],
        "reason": "",
        "message": "",
        "boundBy": "sky-scheduler",
        "hold": {"job": "default/solo", "nodes": ["n3"], "since": "2025-11-29T10:00:00Z"},
        "lastTransitionTime": "2025-11-29T10:00:03Z",
        "observedGeneration": 3,
    },
}  # fmt: skip

NODETOPOLOGY: dict[str, Any] = {
    "apiVersion": API_VERSION,
    "kind": "NodeTopology",
    "metadata": {"name": "n4"},
    "spec": {
        "zone": "roce#S1,S2",
        "net": {
            "roce": [
                {"name": "enp24s0f0", "switchName": "S1", "switchPort": "Ethernet1/5", "rdmaDevice": "mlx5_1",
                 "master": "bond0"},
                {"name": "enp24s0f1", "switchName": "S2", "switchPort": "Ethernet1/5", "rdmaDevice": "mlx5_2",
                 "master": "bond0"},
                {"name": "enp25s0", "switchName": ""},
            ],
            "ib": [
                {"name": "mlx5_0", "port": 1, "guid": "0x1070fd0300123456",
                 "switchName": "MF0;ib-leaf-1:MQM8700/U1", "switchGuid": "0x1070fd03000abcde",
                 "rdmaDevice": "mlx5_0"},
                {"name": "mlx5_0", "port": 2},
                {"name": "mlx5_3"},
            ],
        },
        "tiers": [
            {"level": 1, "name": "MF0;ib-leaf-1:MQM8700/U1"},
            {"level": 2, "name": "MF0;ib-spine-1:MQM8700/U1+1"},
            {"level": 3, "name": "core-1"},
        ],
    },
    "status": {"observedAt": "2025-11-29T10:00:00Z", "agent": "sky-roce-x7k2p"},
}  # fmt: skip

PODGROUP: dict[str, Any] = {
    "apiVersion": API_VERSION,
    "kind": "PodGroup",
    "metadata": {"name": "llama-sft", "namespace": "ml-research"},
    "spec": {
        "minMember": 4,
        "queue": "research",
        "priorityClassName": "training-high",
        "minResources": {"nvidia.com/gpu": 4, "rdma/hca": 4, "cpu": "3500m"},
        "topology": {
            "enabled": True,
            "strictOrder": False,
            "affinityKey": "llama-data",
            "highestTierAllowed": "spine",
            "mode": "soft",
        },
        "networkTopology": {"highestTierAllowed": 2, "mode": "soft"},  # Volcano's spelling, agreeing
    },
    "status": {
        "phase": "Running",
        "conditions": [
            {"type": "Scheduled", "status": "True", "reason": "GangBound", "message": "4/4 tasks bound",
             "lastTransitionTime": "2025-11-29T10:00:04Z", "transitionID": "c-17"},
            {"type": "Unschedulable", "status": "False"},
        ],
        "queue": "research",
        "running": 4,
        "succeeded": 0,
        "failed": 0,
        "boundQuotas": 4,
        "tierLimit": "leaf (hard)",
        "hold": {"nodes": ["n4", "n5"], "since": "2025-11-29T10:00:00Z"},
    },
}  # fmt: skip

QUEUE: dict[str, Any] = {
    "apiVersion": API_VERSION,
    "kind": "Queue",
    "metadata": {"name": "research"},
    "spec": {
        "weight": 2,
        "capability": {"nvidia.com/gpu": 32},
        "reclaimable": False,
        "state": "Closed",
        "quotaPools": [
            {
                "name": "a100",
                "count": 4,
                "request": {"nvidia.com/gpu": 8, "rdma/hca": 8},
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
                "tolerations": [
                    {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"},
                    {
                        "key": "node.kubernetes.io/unreachable",
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": 300,
                    },
                ],
            },
        ],
    },
    "status": {
        "allocated": {"nvidia.com/gpu": "4", "rdma/hca": "4"},
        "specAllocated": {"NVIDIA-A100-SXM4-80GB": {"nvidia.com/gpu": "4"}, "h100": {}},
        "running": 1,
        "pending": 2,
        "state": "Closing",
        "quotaPools": [
            {
                "name": "a100",
                "count": 4,
                "present": 4,
                "bound": 1,
                "claimed": 1,
                "unholdable": "no node has more than 8 nvidia.com/gpu",
                "message": "names taken by quotas that are not the pool's: research-a100-3",
            },
        ],
    },
}

JOBQUEUE: dict[str, Any] = {
    "apiVersion": API_VERSION,
    "kind": "JobQueue",
    "metadata": {"name": "llm-finetune"},
    "spec": {
        "jobSelector": LABEL_SELECTOR,
        "namespaces": ["ml-research"],
        "priority": -5,
        "state": "Closed",
        "maxRunningJobs": 0,
    },
    "status": {"runningJobs": 0, "pendingJobs": 1, "blockedJobs": 3},
}

FULL: dict[str, dict[str, Any]] = {
    "Quota": QUOTA,
    "NodeTopology": NODETOPOLOGY,
    "PodGroup": PODGROUP,
    "Queue": QUEUE,
    "JobQueue": JOBQUEUE,
}

# The smallest objects the contract allows.
MINIMAL: dict[str, dict[str, Any]] = {
    "Quota": {"apiVersion": API_VERSION, "kind": "Quota", "metadata": {"name": "q"},
              "spec": {"queueName": "research", "request": {"nvidia.com/gpu": 1}}},
    "NodeTopology": {"apiVersion": API_VERSION, "kind": "NodeTopology", "metadata": {"name": "n0"}},
    "PodGroup": {"apiVersion": API_VERSION, "kind": "PodGroup", "metadata": {"name": "pg", "namespace": "ns"}},
    "Queue": {"apiVersion": API_VERSION, "kind": "Queue", "metadata": {"name": "q"}},
    "JobQueue": {"apiVersion": API_VERSION, "kind": "JobQueue", "metadata": {"name": "jq"},
                 "spec": {"jobSelector": {}}},
}  # fmt: skip

# Status documents the scheduler writes in the seed's walk-through (seed 2.7).
SEED_STATUSES: list[tuple[str, dict[str, Any]]] = [
    ("Quota", {"phase": "QuotaEmpty", "nodeName": ""}),
    ("Quota", {"phase": "QuotaBound", "nodeName": "N0", "allocated": {"nvidia.com/gpu": "1", "rdma/hca": "1"}}),
]


def full(kind: str) -> dict[str, Any]:
    return copy.deepcopy(FULL[kind])


def minimal(kind: str) -> dict[str, Any]:
    return copy.deepcopy(MINIMAL[kind])
