"""Single source of the CRD manifests in this folder and of the field tables in ``docs/api.md``.

The five CustomResourceDefinitions of group ``scheduling.infini-ai.com`` are built here as plain
dicts (one helper per recurring Kubernetes type: quantity, ResourceList, LabelSelector, Toleration,
NodeAffinity …), so a shape is spelled once and every copy of it agrees. The YAML files are the
artefact that ``kubectl apply -f crds/`` and the Helm chart consume; do not edit them by hand.

    python crds/generate.py           # rewrite crds/*.yaml and the generated blocks of docs/api.md
    python crds/generate.py --check   # exit 1 (and name the files) if anything is stale

Only the standard library and PyYAML are needed; the scheduler package is not imported.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

GROUP = "scheduling.infini-ai.com"
VERSION = "v1alpha1"
ROOT = Path(__file__).resolve().parent.parent
CRD_DIR = ROOT / "crds"
DOCS = ROOT / "docs" / "api.md"
EXAMPLES = ROOT / "examples" / "api"

# The regular expression the Kubernetes API server publishes for resource.Quantity.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

Schema = dict[str, Any]

# --------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------


def string(desc: str, **extra: Any) -> Schema:
    return {"description": desc, "type": "string", **extra}


def enum(desc: str, values: Sequence[str], **extra: Any) -> Schema:
    return {"description": desc, "type": "string", "enum": list(values), **extra}


def integer(desc: str, fmt: str = "int32", **extra: Any) -> Schema:
    return {"description": desc, "type": "integer", "format": fmt, **extra}


def boolean(desc: str, **extra: Any) -> Schema:
    return {"description": desc, "type": "boolean", **extra}


def timestamp(desc: str) -> Schema:
    return {"description": desc, "type": "string", "format": "date-time"}


def obj(desc: str, props: Mapping[str, Schema], required: Sequence[str] = (), **extra: Any) -> Schema:
    node: Schema = {"description": desc, "type": "object", "properties": dict(props)}
    if required:
        node["required"] = list(required)
    node.update(extra)
    return node


def array(desc: str, items: Schema, list_type: str = "atomic", **extra: Any) -> Schema:
    node: Schema = {"description": desc, "type": "array", "items": items, **extra}
    node["x-kubernetes-list-type"] = list_type
    return node


def map_list(desc: str, items: Schema, keys: Sequence[str], **extra: Any) -> Schema:
    """A list that is really a map keyed by ``keys`` (unique; merged per entry by server-side apply)."""
    node = array(desc, items, list_type="map", **extra)
    node["x-kubernetes-list-map-keys"] = list(keys)
    return node


def string_list(desc: str, list_type: str = "atomic", **extra: Any) -> Schema:
    return array(desc, {"type": "string"}, list_type=list_type, **extra)


def string_map(desc: str, **extra: Any) -> Schema:
    return {"description": desc, "type": "object", "additionalProperties": {"type": "string"}, **extra}


def quantity(desc: str) -> Schema:
    """``resource.Quantity``: an integer or a string such as ``500m`` / ``64Gi`` / ``1e3``."""
    return {
        "description": desc,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }


def resource_list(desc: str, **extra: Any) -> Schema:
    """``core/v1 ResourceList``: resource name → quantity."""
    return {
        "description": desc,
        "type": "object",
        "additionalProperties": quantity(
            "Amount of the named resource, as a Kubernetes quantity: an integer, or a string such as "
            '"500m", "64Gi" or "1e3".'
        ),
        **extra,
    }


def label_selector(desc: str) -> Schema:
    """``meta/v1 LabelSelector``, with the value rules the API server applies to built-in kinds."""
    requirement = obj(
        "One requirement on a label: key, operator and values.",
        {
            "key": string("Label key the requirement applies to.", minLength=1),
            "operator": enum(
                "How the label's value is tested: In (value is one of values), NotIn (label absent or "
                "value not in values), Exists (label present), DoesNotExist (label absent).",
                ["In", "NotIn", "Exists", "DoesNotExist"],
            ),
            "values": string_list("Values for In and NotIn (at least one); must be empty for Exists and DoesNotExist."),
        },
        required=["key", "operator"],
        anyOf=[
            {"properties": {"operator": {"enum": ["In", "NotIn"]}, "values": {"minItems": 1}}, "required": ["values"]},
            {"properties": {"operator": {"enum": ["Exists", "DoesNotExist"]}, "values": {"maxItems": 0}}},
        ],
    )
    return obj(
        desc,
        {
            "matchLabels": string_map(
                "Labels that must all be present with exactly these values. ANDed with matchExpressions."
            ),
            "matchExpressions": array("Label requirements that must all hold. ANDed with matchLabels.", requirement),
        },
        **{"x-kubernetes-map-type": "atomic"},
    )


def node_selector_term(desc: str) -> Schema:
    """``core/v1 NodeSelectorTerm``; Gt/Lt take exactly one integer, as in the API server."""

    def requirement(what: str, key_desc: str) -> Schema:
        return obj(
            f"One requirement on {what}: key, operator and values.",
            {
                "key": string(key_desc, minLength=1),
                "operator": enum(
                    "How the value is tested: In, NotIn, Exists, DoesNotExist, Gt (greater than the single "
                    "integer in values) or Lt (less than it).",
                    ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"],
                ),
                "values": string_list(
                    "Values: at least one for In and NotIn, none for Exists and DoesNotExist, exactly one "
                    "integer for Gt and Lt."
                ),
            },
            required=["key", "operator"],
            anyOf=[
                {
                    "properties": {"operator": {"enum": ["In", "NotIn"]}, "values": {"minItems": 1}},
                    "required": ["values"],
                },
                {"properties": {"operator": {"enum": ["Exists", "DoesNotExist"]}, "values": {"maxItems": 0}}},
                {
                    "properties": {
                        "operator": {"enum": ["Gt", "Lt"]},
                        "values": {"minItems": 1, "maxItems": 1, "items": {"pattern": r"^[+-]?[0-9]+$"}},
                    },
                    "required": ["values"],
                },
            ],
        )

    return obj(
        desc,
        {
            "matchExpressions": array(
                "Requirements on node labels; all must hold.",
                requirement("a node label", "Node label key."),
            ),
            "matchFields": array(
                "Requirements on node fields; all must hold. The only supported field is metadata.name.",
                requirement("a node field", "Node field; only metadata.name is supported."),
            ),
        },
        **{"x-kubernetes-map-type": "atomic"},
    )


def node_affinity(desc: str) -> Schema:
    return obj(
        desc,
        {
            "requiredDuringSchedulingIgnoredDuringExecution": obj(
                "Hard constraint: the node must match at least one of nodeSelectorTerms (terms are ORed). "
                "Checked when the quota is placed; a bound quota is not moved if node labels change later.",
                {
                    "nodeSelectorTerms": array(
                        "Node selector terms, ORed. An empty term matches no node.",
                        node_selector_term(
                            "A node selector term: all of its matchExpressions and matchFields must hold."
                        ),
                    ),
                },
                required=["nodeSelectorTerms"],
                **{"x-kubernetes-map-type": "atomic"},
            ),
            "preferredDuringSchedulingIgnoredDuringExecution": array(
                "Soft constraints: among the nodes that fit, those matching a preference get its weight "
                "added to their score.",
                obj(
                    "A weighted preference.",
                    {
                        "weight": integer("Score added when preference matches, 1..100.", minimum=1, maximum=100),
                        "preference": node_selector_term("The node selector term the node should match."),
                    },
                    required=["weight", "preference"],
                ),
            ),
        },
    )


def tolerations(desc: str) -> Schema:
    """``core/v1 Toleration`` list, with the cross-field rules of the API server's ValidateTolerations."""
    toleration = obj(
        "A toleration of a node taint (same fields and rules as core/v1 Toleration).",
        {
            "key": string("Taint key the toleration matches. Empty means every key; then operator must be Exists."),
            "operator": enum(
                "Equal (the taint's value must equal value; the default when omitted) or Exists (any "
                "value; value must then be empty).",
                ["Equal", "Exists"],
            ),
            "value": string("Taint value to match with operator Equal; empty with operator Exists."),
            "effect": enum(
                "Taint effect to match: NoSchedule, PreferNoSchedule or NoExecute. Empty matches every effect.",
                ["NoSchedule", "PreferNoSchedule", "NoExecute", ""],
            ),
            "tolerationSeconds": integer(
                "Only with effect NoExecute, as in core/v1 Toleration. Kept for compatibility; placement "
                "only asks whether the taint is tolerated and does not use the duration.",
                fmt="int64",
            ),
        },
        allOf=[
            # value must be empty when operator is Exists
            {
                "anyOf": [
                    {"not": {"properties": {"operator": {"enum": ["Exists"]}}, "required": ["operator"]}},
                    {"properties": {"value": {"maxLength": 0}}},
                ]
            },
            # operator must be Exists when key is empty
            {
                "anyOf": [
                    {"properties": {"key": {"minLength": 1}}, "required": ["key"]},
                    {"properties": {"operator": {"enum": ["Exists"]}}, "required": ["operator"]},
                ]
            },
            # effect must be NoExecute when tolerationSeconds is set
            {
                "anyOf": [
                    {"not": {"required": ["tolerationSeconds"]}},
                    {"properties": {"effect": {"enum": ["NoExecute"]}}, "required": ["effect"]},
                ]
            },
        ],
    )
    return array(desc, toleration)


def quota_affinity_terms(desc: str) -> Schema:
    term = obj(
        "Selects quotas by name and/or by label. At least one of quotaNames and labelSelector must be set; "
        "when both are set the term selects the union (quotas named in quotaNames, plus quotas matching "
        "labelSelector), like namespaces and namespaceSelector in a pod affinity term.",
        {
            "quotaNames": string_list("Names of the selected quotas.", list_type="set", minItems=1),
            "labelSelector": label_selector(
                "Selects quotas by their labels. An empty selector ({}) selects every quota."
            ),
        },
        anyOf=[{"required": ["quotaNames"]}, {"required": ["labelSelector"]}],
    )
    return array(desc, term)


def root(kind: str, desc: str, spec: Schema, status: Schema, *, spec_required: bool) -> Schema:
    schema = obj(
        desc,
        {
            "apiVersion": string(
                "Versioned schema of this object: scheduling.infini-ai.com/v1alpha1. Servers convert "
                "recognized schemas to the latest internal value and may reject unrecognized values."
            ),
            "kind": string(f"REST resource this object represents: {kind}. Cannot be updated. In CamelCase."),
            "metadata": {"description": "Standard object metadata (name, labels, annotations …).", "type": "object"},
            "spec": spec,
            "status": status,
        },
    )
    if spec_required:
        schema["required"] = ["spec"]
    return schema


def column(name: str, json_path: str, type_: str, desc: str, priority: int = 0) -> Schema:
    col: Schema = {"name": name, "type": type_, "jsonPath": json_path, "description": desc}
    if priority:
        col["priority"] = priority
    return col


AGE = column("AGE", ".metadata.creationTimestamp", "date", "Time since the object was created.")


def crd(
    *,
    kind: str,
    plural: str,
    short_names: Sequence[str],
    scope: str,
    schema: Schema,
    columns: Sequence[Schema],
) -> Schema:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "sky-scheduler", "app.kubernetes.io/part-of": "sky-scheduler"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": list(short_names),
                "categories": ["sky"],
            },
            "scope": scope,
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": list(columns),
                }
            ],
        },
    }


# --------------------------------------------------------------------------------------------
# Quota
# --------------------------------------------------------------------------------------------


def quota_crd() -> Schema:
    spec = obj(
        "Desired quota: how much it holds, which queue owns it, and where it may be placed. Written by "
        "users or an orchestration system; the scheduler only reads it.",
        {
            "queueName": string(
                "Queue that owns this quota. Tasks of jobs in this queue, and in sharedQueues, may claim it.",
                minLength=1,
            ),
            "request": resource_list(
                "Resources the quota holds (resource name to quantity), e.g. nvidia.com/gpu: 8, "
                "rdma/hca: 8. The quota is bound only to a node whose quota-idle (allocatable minus the "
                "requests of the quotas already bound there) covers every entry. The tasks claiming the "
                "quota may together request up to request + status.shadowResource.",
                minProperties=1,
            ),
            "shadowResource": resource_list(
                "Oversell grant: resources the tasks claiming this quota may request beyond request, so "
                "they may claim up to request + shadowResource in total. Not deducted from any node's "
                "quota-idle. The scheduler reports the grant in force in status.shadowResource. Absent: none."
            ),
            "nodeSelector": string_map(
                "Labels the quota's node must carry, all of them (like a pod's nodeSelector), e.g. "
                "nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB. A key among the configured GPU-spec label "
                "keys also sets the quota's GPU spec code, so A100 and H100 quotas are kept apart.",
                **{"x-kubernetes-map-type": "atomic"},
            ),
            "tolerations": tolerations(
                "Node taints this quota tolerates. The quota is bound only to a node whose NoSchedule and "
                "NoExecute taints are all tolerated. Same semantics as a pod's tolerations."
            ),
            "affinity": obj(
                "Placement constraints of the quota: node affinity, affinity and anti-affinity to other "
                "quotas, and which pods may claim it.",
                {
                    "nodeAffinity": node_affinity(
                        "Node affinity, as in a pod's spec.affinity.nodeAffinity: required terms restrict "
                        "the nodes the quota may be bound to, preferred terms raise their score."
                    ),
                    "quotaAffinity": quota_affinity_terms(
                        "Quotas this quota must share a node with: it is bound only to the node of the "
                        "quotas each term selects. Quotas are stable logical objects, so the relation "
                        "survives pod restarts (seed 2.4 ③)."
                    ),
                    "quotaAntiAffinity": quota_affinity_terms(
                        "Quotas this quota must not share a node with: it is never bound to a node that "
                        "holds a quota any term selects."
                    ),
                    "podAffinity": obj(
                        "Restricts which pods may claim this quota: only pods matching podSelector, in one "
                        "of namespaces. Absent: any pod of the quota's queues may claim it.",
                        {
                            "podSelector": label_selector(
                                "Labels a pod must match to claim this quota. Absent or empty ({}): no "
                                "label restriction."
                            ),
                            "namespaces": string_list(
                                "Namespaces a claiming pod must be in. Absent or empty: any namespace.",
                                list_type="set",
                            ),
                        },
                    ),
                },
            ),
            "sharedQueues": string_list(
                "Other queues whose jobs may also claim this quota, besides queueName.", list_type="set"
            ),
            "staticBindNode": string(
                "Pin the quota to this node (static binding, seed 2.4 ①): the scheduler binds it only to "
                "this node and keeps it there when its tasks finish. Tasks prefer statically bound quotas."
            ),
        },
        required=["queueName", "request"],
    )
    task = obj(
        "A task (pod) claiming this quota.",
        {
            "uid": string("UID of the pod.", minLength=1),
            "namespace": string("Namespace of the pod."),
            "name": string("Name of the pod."),
            "job": string(
                "Job the task belongs to, as namespace/name: the PodGroup, or the pod itself for a pod without a group."
            ),
            "taskIndex": integer(
                "Index of the task within its job (task-index annotation or a framework replica-index "
                "label), when known.",
                minimum=0,
            ),
            "request": resource_list(
                "What the pod requests of the resources the quota declares (other resources are not the quota's)."
            ),
            "phase": string(
                "State of the task in the scheduler: Pending, AllocatedToQuota (claimed the quota, quota "
                "not yet on a node), Allocated, Binding, Bound, Running, or a final pod phase."
            ),
            "expiresAt": timestamp(
                "Set on an in-flight claim: recorded at admission (or by an inline bind) before the pod "
                "exists, so every webhook replica and the binder count it at once. The entry is replaced "
                "by the pod's own once the pod is seen; a pod that never appears stops holding the quota "
                "at expiresAt (the binder leader removes the entry). uid is then admission:<request uid>."
            ),
        },
        required=["uid", "namespace", "name", "job", "request", "phase"],
    )
    reserved = obj(
        "A reservation left by a task that went away.",
        {
            "job": string("Job of the departed task, as namespace/name."),
            "taskIndex": integer("Index of the departed task within its job, when known.", minimum=0),
            "namespace": string("Namespace of the departed pod."),
            "podName": string(
                "Name of the departed pod. A new pod that names it in annotation "
                "scheduling.infini-ai.com/inherit-resource-from inherits the reservation."
            ),
            "podUID": string("UID of the departed pod.", minLength=1),
            "reason": enum(
                "Why the task went away: Preempted, Deleted, Evicted or Failed.",
                ["Preempted", "Deleted", "Evicted", "Failed"],
            ),
            "expiresAt": timestamp(
                "When the reservation lapses; after that the quota may be claimed by any task, or released."
            ),
            "request": resource_list(
                "What the departed task claimed of the quota (the quota's resource names only); kept free "
                "for its replacement until expiresAt."
            ),
        },
        required=["job", "namespace", "podName", "podUID", "reason", "expiresAt"],
    )
    status = obj(
        "Observed state of the quota. Written by the scheduler's quota-binder loop through the status "
        "subresource; users never write it. nodeName and reservedTasks are state kept only here; tasks "
        "and allocated are derived from the pods and recomputed every cycle.",
        {
            "phase": enum(
                "Lifecycle: QuotaEmpty (not bound, nodeName empty) or QuotaBound (bound to nodeName; its "
                "request is deducted from that node's quota-idle). A bound quota returns to QuotaEmpty when "
                "all its tasks have finished, unless it is statically bound or holds reservations.",
                ["QuotaEmpty", "QuotaBound"],
            ),
            "nodeName": string(
                "Node the quota is bound to; empty while QuotaEmpty. Source of truth for the quota's "
                "placement; the scheduler corrects it from the node its live pods actually run on."
            ),
            "allocated": resource_list(
                "Sum of the requests of the tasks claiming this quota (the tasks list). At most "
                "spec.request + shadowResource."
            ),
            "shadowResource": resource_list(
                "Oversell pool in force: resources tasks may claim beyond spec.request, so the quota may be "
                "claimed up to request + shadowResource. Set by the scheduler from spec.shadowResource."
            ),
            "staticBindStatus": obj(
                "State of the static binding asked for by spec.staticBindNode.",
                {
                    "nodeName": string("Node the quota is statically bound to."),
                    "bound": boolean("True once the quota is bound to that node."),
                },
            ),
            "tasks": map_list(
                "Tasks (pods) currently claiming this quota, one entry per pod UID. Rebuilt every cycle from "
                "the pods' scheduling.infini-ai.com/quota-name annotations.",
                task,
                ["uid"],
            ),
            "reservedTasks": map_list(
                "Reservations (seed 2.4 ②): a task that was preempted, deleted, evicted or failed keeps its "
                "place until expiresAt. Meanwhile the quota stays bound and only a replacement of that task "
                "(same job and taskIndex, or a pod inheriting from podName) may take the reserved share.",
                reserved,
                ["podUID"],
            ),
            "reason": string(
                "One CamelCase word for the quota's state. Unbound: why, as a code from the scheduler's "
                "reason vocabulary (the same codes as /diagnose), e.g. InsufficientQuotaIdle; QuotaNotBound "
                "when tasks claim it and the binder places it next; Unclaimed when nothing claims it. "
                "Bound: what holds it on its node: Claimed (tasks claim it), Reserved (reservations of "
                "departed tasks only), StaticBind (spec.staticBindNode), Idle (nothing: released soon)."
            ),
            "message": string("Human-readable explanation of reason (while unbound)."),
            "boundBy": string(
                "Who bound the quota to nodeName: the scheduler writes its component name when it binds. "
                "A quota whose nodeName another controller wrote (no boundBy) is left bound when no task "
                "claims it; only the scheduler's own bindings are released."
            ),
            "gpus": string(
                "The GPUs spec.request holds, per GPU resource the scheduler is configured with "
                "(serve --gpu-resources, in that order), e.g. 8 amd.com/gpu or 4 nvidia.com/gpu, "
                "2 gpu.intel.com/i915; absent when it holds none. Shown in the GPUS column."
            ),
            "lastTransitionTime": timestamp("When phase last changed."),
            "observedGeneration": integer(
                "metadata.generation of the spec this status was computed from.", fmt="int64", minimum=0
            ),
        },
    )
    schema = root(
        "Quota",
        "Quota is a named, logical share of resources that the scheduler binds to one node (seed 2.3). "
        "A task (pod) claims a quota with annotation scheduling.infini-ai.com/quota-name; the quota-binder "
        "loop places the quota on a node with room for its whole request (Quota to Node); then the pod is "
        "bound to the quota's node. Cluster-scoped. Create quotas with kubectl apply; the scheduler writes "
        "status.",
        spec,
        status,
        spec_required=True,
    )
    return crd(
        kind="Quota",
        plural="quotas",
        short_names=["qo"],
        scope="Cluster",
        schema=schema,
        columns=[
            column("NODE", ".status.nodeName", "string", "Node the quota is bound to (empty while unbound)."),
            column("PHASE", ".status.phase", "string", "QuotaEmpty or QuotaBound."),
            column("QUEUE", ".spec.queueName", "string", "Queue that owns the quota."),
            column("GPUS", ".status.gpus", "string", "GPUs held, per configured GPU resource (status.gpus)."),
            AGE,
            column("REASON", ".status.reason", "string", "Why the quota is not bound, or what holds it.", priority=1),
        ],
    )


# --------------------------------------------------------------------------------------------
# NodeTopology
# --------------------------------------------------------------------------------------------


def nodetopology_crd() -> Schema:
    roce = obj(
        "A RoCE network interface and the switch it is cabled to.",
        {
            "name": string("Interface name of the netdev, e.g. enp24s0f0.", minLength=1),
            "switchName": string(
                "Neighbour switch from LLDP: its system (chassis) name, or the chassis ID when the switch "
                "announces no name. Empty while no LLDP neighbour has been seen."
            ),
            "switchPort": string("Switch port the interface is cabled to (LLDP port ID), e.g. Ethernet1/1."),
            "rdmaDevice": string("RDMA device backing the netdev (from rdma link), e.g. mlx5_1."),
            "master": string("Bond the interface is enslaved to, e.g. bond0; empty when it is not a bond slave."),
        },
        required=["name"],
    )
    ib = obj(
        "An InfiniBand HCA port and the leaf switch it is cabled to.",
        {
            "name": string("HCA name, e.g. mlx5_0.", minLength=1),
            "port": integer("HCA port number, from 1.", minimum=1, default=1),
            "guid": string("Port GUID, e.g. 0x1070fd0300123456."),
            "switchName": string(
                "Unique name of the leaf switch the port is cabled to: the name given for its GUID in "
                "the collector's --switch-names file, else its node description when no other switch "
                'of the fabric has it (e.g. "MF0;ib-leaf-1:MQM8700/U1"), else the description followed '
                'by the GUID (e.g. "Quantum Mellanox Technologies (0x0c42a10301b00001)").'
            ),
            "switchGuid": string("GUID of that switch (its identity in the fabric)."),
            "rdmaDevice": string("RDMA device name on the node (usually equal to name)."),
        },
        required=["name"],
    )
    tier = obj(
        "The unit of one tier of the fabric the node is in.",
        {
            "level": integer(
                "Tier: 1 = leaf (the switches the node's RDMA NICs are cabled to), 2 = spine or spine group, "
                "3 = core, and so on outwards.",
                minimum=1,
            ),
            "name": string(
                "Name of the unit, the same on every node in it: at level 1 the node's leaf switch names "
                "joined by commas; above, the unit's switch with the smallest name, with +N when the unit "
                "has N more switches (a spine group), or the names of the several units a multi-rail "
                "node is in, joined by commas.",
                minLength=1,
            ),
        },
        required=["level", "name"],
    )
    spec = obj(
        "Discovered topology of the node. Written by the discovery agents, only when it changed.",
        {
            "zone": string(
                "Zone key generated from the switch names: prefix roce# or ib# and the sorted distinct "
                "switch names, e.g. roce#S1,S2. Informational: the scheduler derives the key itself, and the "
                "node annotation scheduling.infini-ai.com/rdma-topology-key and the node label zone take "
                "precedence."
            ),
            "net": obj(
                "RDMA NICs of the node and the switches they are cabled to.",
                {
                    "roce": map_list(
                        "RoCE NICs found by the RoCE agent on the node (Multus macvlan masters, bonds "
                        "expanded into their slaves), one entry per interface.",
                        roce,
                        ["name"],
                    ),
                    "ib": map_list(
                        "InfiniBand HCA ports found by the InfiniBand collector (ibnetdiscover), one entry "
                        "per HCA port.",
                        ib,
                        ["name", "port"],
                    ),
                },
            ),
            "tiers": map_list(
                "The node's place in the fabric, from the leaf outwards, one entry per tier, in level "
                "order. InfiniBand: worked out by the collector from the switch-to-switch links; RoCE: "
                "level 1 from LLDP, the levels above from the agent's fabric map. The scheduler reads it "
                "below the node annotations scheduling.infini-ai.com/tier-N and above the topology labels.",
                tier,
                ["level"],
            ),
        },
    )
    status = obj(
        "Heartbeat of the agent that last looked at the node. Written by discovery through the status "
        "subresource; not used for scheduling.",
        {
            "observedAt": timestamp("When the agent last checked the node, whether or not spec changed."),
            "agent": string("Agent that reported, e.g. the discovery pod name."),
        },
    )
    schema = root(
        "NodeTopology",
        "NodeTopology records which RDMA switch each RDMA NIC of a node is cabled to (seed 3.2). One "
        "object per node, named after the node. Written by the discovery agents (RoCE DaemonSet, "
        "InfiniBand collector); read by the scheduler to group nodes into RDMA zones. Cluster-scoped.",
        spec,
        status,
        spec_required=False,
    )
    return crd(
        kind="NodeTopology",
        plural="nodetopologies",
        short_names=["ntopo"],
        scope="Cluster",
        schema=schema,
        columns=[
            column("ZONE", ".spec.zone", "string", "Generated zone key of the node."),
            column("LEAF", ".spec.tiers[?(@.level==1)].name", "string", "The node's leaf switch(es) (tier 1)."),
            column("SPINE", ".spec.tiers[?(@.level==2)].name", "string", "The node's spine or spine group (tier 2)."),
            AGE,
            column(
                "LAST-SEEN",
                ".status.observedAt",
                "date",
                "Time since a discovery agent last checked the node (its heartbeat).",
                priority=1,
            ),
        ],
    )


# --------------------------------------------------------------------------------------------
# PodGroup
# --------------------------------------------------------------------------------------------


def tier_limit_fields() -> dict[str, Schema]:
    """``highestTierAllowed`` + ``mode`` (extender/cache/tierlimit.py reads them)."""
    return {
        "highestTierAllowed": {
            "description": "Highest topology tier the gang may span: a number (0 NVLink domain, 1 leaf "
            "switch, 2 spine, 3 core, …) or a name: nvlink (or accelerator), leaf, spine, core. "
            "Absent: no limit (the planner still prefers the lowest tier that holds the gang).",
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "minimum": 0,
            "maximum": 16,
            "pattern": "^([0-9]|1[0-6]|nvlink|accelerator|leaf|spine|core)$",
            "x-kubernetes-int-or-string": True,
        },
        "mode": enum(
            "hard: never place the gang above highestTierAllowed (it waits, reason "
            "FitsOnlyAboveAllowedTier); soft (default): prefer it, fall back to a higher tier.",
            ["hard", "soft"],
        ),
    }


def podgroup_crd() -> Schema:
    spec = obj(
        "Job-level scheduling options. Written by users or the training operator.",
        {
            "minMember": integer(
                "Gang size: how many pods of the job must have quotas and nodes together before any of them "
                "is bound (Volcano's minAvailable). Defaults to 1.",
                minimum=1,
                default=1,
            ),
            "queue": string(
                "Queue the job belongs to. Empty: the pods' scheduling.infini-ai.com/queue-name annotation."
            ),
            "priorityClassName": string(
                "PriorityClass of the job: orders jobs within a queue and decides which may preempt which. "
                "Empty: the priority of the pods."
            ),
            "minResources": resource_list(
                "Resources the gang needs to start; the job is not admitted while its queue cannot hold "
                "them. Absent: computed from the pods."
            ),
            "topology": obj(
                "RDMA topology options (seed 3.4, 3.5). When set, a field here wins over the pods' "
                "enable-topology-scheduling and topology-affinity-key annotations.",
                {
                    "enabled": boolean(
                        "Place the job's quotas inside one RDMA zone (switch domain). Absent: automatic, on "
                        "when the pods request an rdma/* resource (rdma/hca, rdma/roce). true forces it on, "
                        "false turns it off."
                    ),
                    "strictOrder": boolean(
                        "Node index must ascend with task index (task 0 on the lowest-index node …), so "
                        "ranks follow the physical order. Default false."
                    ),
                    "affinityKey": string("Jobs with the same key are pulled into the same RDMA zone (seed 3.5)."),
                    **tier_limit_fields(),
                },
            ),
            "networkTopology": obj(
                "Volcano's spelling of highestTierAllowed and mode (numbers are this scheduler's tiers). "
                "If both this and topology name a tier they must agree.",
                tier_limit_fields(),
            ),
        },
        default={},
    )
    condition = obj(
        "One observation of the job's scheduling state.",
        {
            "type": string("Condition type, e.g. Scheduled or Unschedulable.", minLength=1),
            "status": enum("True, False or Unknown.", ["True", "False", "Unknown"]),
            "reason": string(
                "CamelCase code from the scheduler's reason vocabulary (shared with the extender's failure "
                "messages and /diagnose), e.g. JobBlockedByJobQueue or InsufficientQuota."
            ),
            "message": string("Human-readable detail: what the job is waiting for."),
            "lastTransitionTime": timestamp("When status last changed."),
            "transitionID": string("ID of the scheduling cycle that last set this condition."),
        },
        required=["type", "status"],
    )
    status = obj(
        "Observed state of the job. Written by the scheduler through the status subresource.",
        {
            "phase": enum(
                "Pending (not admitted yet: Queue or JobQueue closed or full, or fewer than minMember pods "
                "exist), Inqueue (admitted; quotas and nodes being assigned), Unschedulable (admitted, but "
                "the last scheduling cycle could not place it, or it backs off after its quotas were "
                "released: the Unschedulable condition says why), Running (at least minMember pods "
                "running), Completed (no pod left alive and some finished) or Unknown (some pods running "
                "but fewer than minMember).",
                ["Pending", "Inqueue", "Unschedulable", "Running", "Completed", "Unknown"],
            ),
            "queue": string(
                "Queue the job is counted in: spec.queue, else the pods' scheduling.infini-ai.com/queue-name "
                "annotation, else the scheduler's default queue."
            ),
            "conditions": map_list(
                "Latest observations, one per type, e.g. Unschedulable with the reason the job waits.",
                condition,
                ["type"],
            ),
            "running": integer("Pods of the job in phase Running.", minimum=0),
            "succeeded": integer("Pods of the job that finished in phase Succeeded.", minimum=0),
            "failed": integer("Pods of the job that finished in phase Failed.", minimum=0),
            "boundQuotas": integer("Tasks of the job whose quota is bound to a node.", minimum=0),
            "tierLimit": string(
                "The job's highestTierAllowed as the scheduler applies it: a tier name and its mode "
                "(e.g. leaf (hard)), or none."
            ),
        },
    )
    schema = root(
        "PodGroup",
        "PodGroup groups the pods of one job for gang scheduling (minMember pods get quotas and nodes "
        "together, or none do) and carries its queue and topology options. Pods join with annotation "
        "scheduling.k8s.io/group-name: <name> (the key Volcano uses). A pod without a group is a job of "
        "one. Namespaced.",
        spec,
        status,
        spec_required=False,
    )
    return crd(
        kind="PodGroup",
        plural="podgroups",
        short_names=["skypg"],
        scope="Namespaced",
        schema=schema,
        columns=[
            column("MINMEMBER", ".spec.minMember", "integer", "Gang size."),
            column("PHASE", ".status.phase", "string", "Phase of the job."),
            column("QUEUE", ".status.queue", "string", "Queue the job is counted in."),
            AGE,
            column("RUNNING", ".status.running", "integer", "Pods running.", priority=1),
            column("BOUNDQUOTAS", ".status.boundQuotas", "integer", "Tasks whose quota is bound.", priority=1),
            column(
                "TIERLIMIT",
                ".status.tierLimit",
                "string",
                "Highest topology tier the gang may span, with its mode (none: any).",
                priority=1,
            ),
        ],
    )


# --------------------------------------------------------------------------------------------
# Queue
# --------------------------------------------------------------------------------------------


def queue_crd() -> Schema:
    spec = obj(
        "Desired share of the queue. Written by the cluster operator.",
        {
            "weight": integer(
                "Relative share of the cluster when queues compete: capacity is divided in proportion to "
                "weight. Default 1.",
                minimum=1,
                default=1,
            ),
            "capability": resource_list(
                "Upper bound on the resources the queue's jobs may hold in total. Absent: no bound."
            ),
            "reclaimable": boolean(
                "Whether resources the queue holds beyond its weighted share may be reclaimed for other "
                "queues. Default true.",
                default=True,
            ),
            "state": enum(
                "Open: new jobs are admitted. Closed: new jobs of the queue stay Pending; running jobs go on. "
                "Default Open.",
                ["Open", "Closed"],
                default="Open",
            ),
            "quotaPools": map_list(
                "Quotas the scheduler keeps for the queue, so nobody writes one Quota per task: for each "
                "pool, exactly count Quota objects named <queue>-<pool>-<i> (i from 0), labelled "
                "scheduling.infini-ai.com/queue and scheduling.infini-ai.com/quota-pool. Missing ones are "
                "created; surplus ones (highest index first) are deleted only once no task claims them "
                "and they are not bound to a node. A pool quota whose spec differs from the pool is "
                "brought to it while unclaimed and unbound.",
                obj(
                    "A pool of identical quotas.",
                    {
                        "name": string(
                            "Pool name, part of the quota names: a DNS label.",
                            minLength=1,
                            maxLength=40,
                            pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                        ),
                        "count": integer("How many quotas the pool holds.", minimum=0, maximum=10000),
                        "request": resource_list(
                            "spec.request of each quota of the pool, e.g. nvidia.com/gpu: 8, rdma/hca: 8.",
                            minProperties=1,
                        ),
                        "nodeSelector": string_map(
                            "spec.nodeSelector of each quota of the pool (e.g. the GPU model label).",
                            **{"x-kubernetes-map-type": "atomic"},
                        ),
                        "tolerations": tolerations("spec.tolerations of each quota of the pool."),
                    },
                    required=["name", "count", "request"],
                ),
                ["name"],
            ),
        },
        default={},
    )
    status = obj(
        "Observed use of the queue. Written by the scheduler through the status subresource.",
        {
            "allocated": resource_list("Resources held by the queue's tasks."),
            "specAllocated": {
                "description": "allocated broken down by GPU spec code (the card model derived from node "
                "labels, e.g. NVIDIA-A100-SXM4-80GB): spec code to ResourceList (seed 6.3).",
                "type": "object",
                "additionalProperties": resource_list("Resources held on nodes of this spec code."),
            },
            "running": integer("Jobs of the queue that are running.", minimum=0),
            "pending": integer("Jobs of the queue that wait for admission or resources.", minimum=0),
            "state": enum(
                "Observed state: Open, Closed, Closing (closed, jobs still running) or Unknown.",
                ["Open", "Closed", "Closing", "Unknown"],
            ),
            "quotaPools": map_list(
                "State of each pool of spec.quotaPools.",
                obj(
                    "What the scheduler keeps of one pool.",
                    {
                        "name": string("Pool name.", minLength=1),
                        "count": integer("Quotas the pool should hold (spec).", minimum=0),
                        "present": integer("Quota objects of the pool that exist.", minimum=0),
                        "bound": integer("Quotas of the pool bound to a node.", minimum=0),
                        "claimed": integer("Quotas of the pool that tasks claim.", minimum=0),
                        "unholdable": string(
                            "Set when no node could ever hold the pool's request: which resource, and the "
                            "most any node has of it."
                        ),
                        "message": string(
                            "Set when the pool cannot be kept: e.g. quota names the pool needs are taken by "
                            "quotas that are not the pool's (they are never taken over)."
                        ),
                    },
                    required=["name", "count", "present"],
                ),
                ["name"],
            ),
        },
    )
    schema = root(
        "Queue",
        "Queue is a cluster-wide share of capacity that jobs (PodGroups) and quotas belong to. Queues "
        "divide the cluster by weight and may be capped by capability. Cluster-scoped.",
        spec,
        status,
        spec_required=False,
    )
    return crd(
        kind="Queue",
        plural="queues",
        short_names=["skyq"],
        scope="Cluster",
        schema=schema,
        columns=[
            column("WEIGHT", ".spec.weight", "integer", "Relative share."),
            column("STATE", ".spec.state", "string", "Open or Closed."),
            AGE,
            column("RUNNING", ".status.running", "integer", "Running jobs.", priority=1),
            column("PENDING", ".status.pending", "integer", "Waiting jobs.", priority=1),
        ],
    )


# --------------------------------------------------------------------------------------------
# JobQueue
# --------------------------------------------------------------------------------------------


def jobqueue_crd() -> Schema:
    spec = obj(
        "Which jobs the JobQueue holds and how it admits them. Written by the cluster operator.",
        {
            "jobSelector": label_selector(
                "Selects jobs by the labels of their PodGroup (for a pod without a PodGroup, by the pod's "
                "labels). An empty selector ({}) selects every job."
            ),
            "namespaces": string_list(
                "Only jobs in these namespaces are matched. Absent or empty: every namespace.", list_type="set"
            ),
            "priority": integer(
                "Order among JobQueues: jobs of a higher-priority JobQueue are considered first. A job "
                "matched by several JobQueues belongs to the one with the highest priority (ties: the "
                "first name in alphabetical order). Default 0.",
                default=0,
            ),
            "state": enum(
                "Open: matched jobs may be admitted. Closed: matched jobs are blocked with reason "
                "JobBlockedByJobQueue until it is reopened. Default Open.",
                ["Open", "Closed"],
                default="Open",
            ),
            "maxRunningJobs": integer(
                "When this many matched jobs are running, further matched jobs wait. Absent: no limit.",
                minimum=0,
            ),
        },
        required=["jobSelector"],
    )
    status = obj(
        "Observed counts. Written by the scheduler through the status subresource.",
        {
            "runningJobs": integer("Matched jobs that are running.", minimum=0),
            "pendingJobs": integer("Matched jobs admitted by this JobQueue and waiting for resources.", minimum=0),
            "blockedJobs": integer(
                "Matched jobs held back by this JobQueue (Closed, or maxRunningJobs reached).", minimum=0
            ),
        },
    )
    schema = root(
        "JobQueue",
        "JobQueue is a priority sub-queue and admission gate for jobs (seed 6.4): it selects jobs by label, "
        "orders them by priority, may cap how many run at once, and when Closed blocks them (reason "
        "JobBlockedByJobQueue). Cluster-scoped.",
        spec,
        status,
        spec_required=True,
    )
    return crd(
        kind="JobQueue",
        plural="jobqueues",
        short_names=["jq"],
        scope="Cluster",
        schema=schema,
        columns=[
            column("PRIORITY", ".spec.priority", "integer", "Order among JobQueues."),
            column("STATE", ".spec.state", "string", "Open or Closed."),
            column("RUNNING", ".status.runningJobs", "integer", "Matched jobs running."),
            AGE,
        ],
    )


def all_crds() -> list[Schema]:
    return [quota_crd(), nodetopology_crd(), podgroup_crd(), queue_crd(), jobqueue_crd()]


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Block style, no aliases, indented sequences (the layout controller-gen and kubectl use)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def crd_file(doc: Schema) -> Path:
    return CRD_DIR / f"{GROUP}_{doc['spec']['names']['plural']}.yaml"


def render_crd(doc: Schema) -> str:
    header = (
        "# Generated by crds/generate.py; do not edit by hand.\n"
        "# Change crds/generate.py, then run: python crds/generate.py\n"
    )
    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)
    return header + "---\n" + body


def _type_of(node: Schema) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "quantity" if node.get("pattern") == QUANTITY_PATTERN else "integer or string"
    t = node.get("type", "")
    if t == "array":
        return "[]" + _type_of(node["items"])
    if t == "object" and "additionalProperties" in node:
        return "map[string]" + _type_of(node["additionalProperties"])
    if t == "integer":
        return f"integer ({node.get('format', 'int64')})"
    if t == "string" and node.get("format"):
        return f"string ({node['format']})"
    return str(t)


def _constraints(node: Schema, required: bool) -> str:
    parts: list[str] = []
    if required:
        parts.append("**required**")
    if "enum" in node:
        parts.append("one of " + ", ".join(f"`{v}`" if v else '`""`' for v in node["enum"]))
    if "default" in node:
        default = node["default"]
        shown = "{}" if default == {} else (str(default).lower() if isinstance(default, bool) else default)
        parts.append(f"default `{shown}`")
    if "minimum" in node and "maximum" in node:
        parts.append(f"{node['minimum']}..{node['maximum']}")
    elif "minimum" in node:
        parts.append(f"≥ {node['minimum']}")
    if node.get("minProperties"):
        parts.append(f"at least {node['minProperties']} entry")
    if node.get("minItems"):
        parts.append(f"at least {node['minItems']} item")
    if node.get("minLength"):
        parts.append("non-empty")
    list_type = node.get("x-kubernetes-list-type")
    if list_type == "set":
        parts.append("unique items")
    elif list_type == "map":
        keys = ", ".join(node.get("x-kubernetes-list-map-keys", []))
        parts.append(f"unique by {keys}")
    return "; ".join(parts)


def field_rows(node: Schema, prefix: str, required: bool = False) -> Iterator[tuple[str, str, str, str]]:
    """(path, type, constraints, description) for ``node`` and every field below it, depth first."""
    yield prefix, _type_of(node), _constraints(node, required), node.get("description", "")
    inner = node
    suffix = ""
    while inner.get("type") == "array":
        inner = inner["items"]
        suffix += "[]"
    if inner.get("type") != "object" or "properties" not in inner:
        return
    req = set(inner.get("required", []))
    for name, child in inner["properties"].items():
        yield from field_rows(child, f"{prefix}{suffix}.{name}", name in req)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def field_table(doc: Schema) -> str:
    schema = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    lines = ["| Field | Type | Constraints | Description |", "|---|---|---|---|"]
    req = set(schema.get("required", []))
    for top in ("spec", "status"):
        for path, type_, cons, desc in field_rows(schema["properties"][top], top, top in req):
            lines.append(f"| `{path}` | {_cell(type_)} | {_cell(cons)} | {_cell(desc)} |")
    return "\n".join(lines)


def columns_table(doc: Schema) -> str:
    lines = ["| Column | JSONPath | Shown |", "|---|---|---|"]
    for col in doc["spec"]["versions"][0]["additionalPrinterColumns"]:
        shown = "`-o wide` only" if col.get("priority", 0) else "always"
        lines.append(f"| {col['name']} | `{col['jsonPath']}` | {shown} |")
    return "\n".join(lines)


_BLOCK = re.compile(r"(<!-- BEGIN GENERATED: (?P<name>[\w./-]+) -->\n)(?P<body>.*?)(<!-- END GENERATED -->)", re.S)


def generated_blocks() -> dict[str, str]:
    """Named blocks of docs/api.md and their current content."""
    blocks: dict[str, str] = {}
    for doc in all_crds():
        kind = doc["spec"]["names"]["kind"]
        blocks[f"{kind}/fields"] = field_table(doc)
        blocks[f"{kind}/columns"] = columns_table(doc)
    for path in sorted(EXAMPLES.glob("*.yaml")):
        blocks[f"example/{path.name}"] = "```yaml\n" + path.read_text(encoding="utf-8").rstrip("\n") + "\n```"
    return blocks


def render_docs(text: str) -> str:
    blocks = generated_blocks()
    missing = [name for name in blocks if f"<!-- BEGIN GENERATED: {name} -->" not in text]
    if missing:
        raise SystemExit(f"{DOCS}: no place for generated block(s) {', '.join(missing)}")

    def fill(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in blocks:
            raise SystemExit(f"{DOCS}: unknown generated block {name!r}")
        return m.group(1) + blocks[name] + "\n" + m.group(4)

    return _BLOCK.sub(fill, text)


def expected_files() -> dict[Path, str]:
    files = {crd_file(doc): render_crd(doc) for doc in all_crds()}
    if DOCS.exists():
        files[DOCS] = render_docs(DOCS.read_text(encoding="utf-8"))
    return files


def stale_files() -> list[Path]:
    return [
        path for path, text in expected_files().items() if not path.exists() or path.read_text(encoding="utf-8") != text
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale files; exit 1 if any")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        for path in stale:
            print(f"stale: {path.relative_to(ROOT)} (run: python crds/generate.py)", file=sys.stderr)
        return 1 if stale else 0
    for path, text in expected_files().items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
