"""The Queue CRD: a cluster-wide, weighted share of capacity that jobs and quotas belong to."""

from __future__ import annotations

from crds.definition import AGE, column, crd, root
from crds.kube_types import resource_list, tolerations
from crds.openapi import Schema, boolean, enum, integer, map_list, obj, string, string_map


def _quota_pools() -> Schema:
    """spec.quotaPools: pools of identical quotas the scheduler creates and deletes for the queue."""
    return map_list(
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
    )


def _spec() -> Schema:
    """spec: weight, capability, reclaim, state and quota pools of the queue."""
    return obj(
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
            "quotaPools": _quota_pools(),
        },
        default={},
    )


def _quota_pools_status() -> Schema:
    """status.quotaPools: what the scheduler keeps of each pool."""
    return map_list(
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
    )


def _status() -> Schema:
    """status: what the queue's jobs hold and run, and the state of its quota pools."""
    return obj(
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
            "quotaPools": _quota_pools_status(),
        },
    )


def queue_crd() -> Schema:
    schema = root(
        "Queue",
        "Queue is a cluster-wide share of capacity that jobs (PodGroups) and quotas belong to. Queues "
        "divide the cluster by weight and may be capped by capability. Cluster-scoped.",
        _spec(),
        _status(),
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
