"""The JobQueue CRD: a priority sub-queue and admission gate that selects jobs by label."""

from __future__ import annotations

from crds.definition import AGE, column, crd, root
from crds.kube_types import label_selector
from crds.openapi import Schema, enum, integer, obj, string_list


def _spec() -> Schema:
    """spec: which jobs the JobQueue selects, its priority, state and running-job cap."""
    return obj(
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


def _status() -> Schema:
    """status: counts of the matched jobs that run, wait and are held back."""
    return obj(
        "Observed counts. Written by the scheduler through the status subresource.",
        {
            "runningJobs": integer("Matched jobs that are running.", minimum=0),
            "pendingJobs": integer("Matched jobs admitted by this JobQueue and waiting for resources.", minimum=0),
            "blockedJobs": integer(
                "Matched jobs held back by this JobQueue (Closed, or maxRunningJobs reached).", minimum=0
            ),
        },
    )


def jobqueue_crd() -> Schema:
    schema = root(
        "JobQueue",
        "JobQueue is a priority sub-queue and admission gate for jobs (seed 6.4): it selects jobs by label, "
        "orders them by priority, may cap how many run at once, and when Closed blocks them (reason "
        "JobBlockedByJobQueue). Cluster-scoped.",
        _spec(),
        _status(),
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
