"""The PodGroup CRD: the pods of one job, gang-scheduled together, with their queue and topology options."""

from __future__ import annotations

from crds.definition import AGE, column, crd, root
from crds.kube_types import resource_list
from crds.openapi import Schema, boolean, enum, integer, map_list, obj, string, string_list, timestamp


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


def _topology() -> Schema:
    """spec.topology: RDMA zone placement, strict rank order and the tier limit."""
    return obj(
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
    )


def _network_topology() -> Schema:
    """spec.networkTopology: Volcano's spelling of the tier limit."""
    return obj(
        "Volcano's spelling of highestTierAllowed and mode (numbers are this scheduler's tiers). "
        "If both this and topology name a tier they must agree.",
        tier_limit_fields(),
    )


def _spec() -> Schema:
    """spec: gang size, queue, priority, minimum resources and topology options of the job."""
    return obj(
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
            "topology": _topology(),
            "networkTopology": _network_topology(),
        },
        default={},
    )


def _condition() -> Schema:
    """One entry of status.conditions: an observation of the job's scheduling state."""
    return obj(
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


def _status() -> Schema:
    """status: phase, queue, conditions and pod counts of the job."""
    return obj(
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
                _condition(),
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
            "hold": obj(
                "The nodes held for the gang while it waits (topology holds: reserve_after_cycles, "
                "max_holds, hold_seconds); other jobs' quotas are not bound to them. Absent: no hold. "
                "Kept here so that every replica and a new leader see the hold too.",
                {
                    "nodes": string_list("The held nodes, in node-index order.", maxItems=10000),
                    "since": timestamp("When the hold began (it ends hold_seconds later at most)."),
                },
                required=["nodes", "since"],
            ),
        },
    )


def podgroup_crd() -> Schema:
    schema = root(
        "PodGroup",
        "PodGroup groups the pods of one job for gang scheduling (minMember pods get quotas and nodes "
        "together, or none do) and carries its queue and topology options. Pods join with annotation "
        "scheduling.k8s.io/group-name: <name> (the key Volcano uses). A pod without a group is a job of "
        "one. Namespaced.",
        _spec(),
        _status(),
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
