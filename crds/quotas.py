"""The Quota CRD: a named, logical share of resources that the quota-binder loop binds to one node."""

from __future__ import annotations

from crds.definition import AGE, column, crd, root
from crds.kube_types import label_selector, node_affinity, resource_list, tolerations
from crds.openapi import (
    Schema,
    array,
    boolean,
    enum,
    integer,
    map_list,
    obj,
    string,
    string_list,
    string_map,
    timestamp,
)


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


def _pod_affinity() -> Schema:
    """spec.affinity.podAffinity: which pods may claim the quota."""
    return obj(
        "Restricts which pods may claim this quota: only pods matching podSelector, in one "
        "of namespaces. Absent: any pod of the quota's queues may claim it.",
        {
            "podSelector": label_selector(
                "Labels a pod must match to claim this quota. Absent or empty ({}): no label restriction."
            ),
            "namespaces": string_list(
                "Namespaces a claiming pod must be in. Absent or empty: any namespace.",
                list_type="set",
            ),
        },
    )


def _affinity() -> Schema:
    """spec.affinity: node affinity, quota (anti-)affinity and pod affinity of the quota."""
    return obj(
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
            "podAffinity": _pod_affinity(),
        },
    )


def _spec() -> Schema:
    """spec: what the quota holds, the queues that may claim it and where it may be placed."""
    return obj(
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
            "affinity": _affinity(),
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


def _claiming_task() -> Schema:
    """One entry of status.tasks: a pod that claims the quota, and what it requests of it."""
    return obj(
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


def _reservation() -> Schema:
    """One entry of status.reservedTasks: the share a departed task keeps for its replacement."""
    return obj(
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


def _status() -> Schema:
    """status: where the quota is bound, the tasks claiming it and the reservations it keeps."""
    return obj(
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
                _claiming_task(),
                ["uid"],
            ),
            "reservedTasks": map_list(
                "Reservations (seed 2.4 ②): a task that was preempted, deleted, evicted or failed keeps its "
                "place until expiresAt. Meanwhile the quota stays bound and only a replacement of that task "
                "(same job and taskIndex, or a pod inheriting from podName) may take the reserved share.",
                _reservation(),
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
            "hold": obj(
                "The nodes held for a job of one pod (no PodGroup) that claims this quota and waits "
                "(topology holds: reserve_after_cycles, max_holds, hold_seconds); other jobs' quotas are not "
                "bound to them. A gang's hold is kept in its PodGroup's status.hold instead. Absent: no hold. "
                "Kept here so that every replica and a new leader see the hold too.",
                {
                    "job": string("The holding job: namespace/name of its pod."),
                    "nodes": string_list("The held nodes, in node-index order.", maxItems=10000),
                    "since": timestamp("When the hold began (it ends hold_seconds later at most)."),
                },
                required=["job", "nodes", "since"],
            ),
            "lastTransitionTime": timestamp("When phase last changed."),
            "observedGeneration": integer(
                "metadata.generation of the spec this status was computed from.", fmt="int64", minimum=0
            ),
        },
    )


def quota_crd() -> Schema:
    schema = root(
        "Quota",
        "Quota is a named, logical share of resources that the scheduler binds to one node (seed 2.3). "
        "A task (pod) claims a quota with annotation scheduling.infini-ai.com/quota-name; the quota-binder "
        "loop places the quota on a node with room for its whole request (Quota to Node); then the pod is "
        "bound to the quota's node. Cluster-scoped. Create quotas with kubectl apply; the scheduler writes "
        "status.",
        _spec(),
        _status(),
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
