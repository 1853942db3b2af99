"""``/diagnose``: why a job (or a pod) is where it is, as structured JSON (seed 六 6.4, DESIGN §7).

The FitAction ladder is evaluated *now*, on a fresh session over the cache, rung by rung; the
first rung that stops the job is its ``stage``:

1. ``JobQueue`` — job valid (PodGroup exists, back-off over) and admitted (JobQueue, Queue);
2. ``QuotaAssignment`` — every task holds a quota (hop ①);
3. ``Gang`` — at least minMember tasks hold quotas, and their quotas are bound;
4. ``ZoneSelection`` — (topology jobs) a zone plan exists for the unbound quotas;
5. ``NodePredicates`` — an unbound quota fits some node (QN pipeline over every node), or a
   task fits its quota's node (TN);
6. ``Bind`` — kube-scheduler still has to bind pods whose quota node admits them.

Per-node failures are aggregated (``"3 nodes: InsufficientQuotaIdle(nvidia.com/gpu 8 > 7)"``).
The binder's last verdict for the job is included as ``lastCycle``. ``unblock`` says what would
help, per reason. The vocabulary is the one enum shared with the extender and PodGroup
conditions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.actions.placement import place_quota
from extender.framework.session import FitStage, JobVerdict, Session
from extender.framework.status import Reason, Status, summarize
from extender.model.job import JobInfo
from extender.model.task import ON_NODE, TaskInfo

__all__ = ["UNBLOCK", "diagnose_job", "diagnose_pod"]

_STAGE_NAMES = {
    FitStage.JOB_QUEUE: "JobQueue",
    FitStage.QUOTA_ASSIGNMENT: "QuotaAssignment",
    FitStage.GANG: "Gang",
    FitStage.ZONE_SELECTION: "ZoneSelection",
    FitStage.NODE_PREDICATES: "NodePredicates",
    FitStage.BIND: "Bind",
}

UNBLOCK: dict[Reason, str] = {
    Reason.JOB_BLOCKED_BY_JOB_QUEUE: "open the JobQueue that selects the job, or raise its maxRunningJobs",
    Reason.QUEUE_CLOSED: "open the job's Queue (spec.state: Open)",
    Reason.BACKOFF: "wait: the job's quotas were released and it backs off before retrying",
    Reason.GANG_NOT_READY: "create the PodGroup / the missing pods of the gang",
    Reason.NO_QUOTA: "create Quotas for the job's queue, or share one with it (spec.sharedQueues)",
    Reason.INSUFFICIENT_QUOTA: "free or enlarge quotas of the queue (request + shadowResource)",
    Reason.QUOTA_RESERVED: "wait for the reservation to expire (status.reservedTasks[].expiresAt)",
    Reason.POD_QUOTA_AFFINITY_NOT_MATCH: "label the pods to match the quota's podAffinity, or use another quota",
    Reason.QUOTA_QUEUE_MISMATCH: "use a quota of the job's queue",
    Reason.QUOTA_SPEC_MISMATCH: "use a quota of the GPU model the pods ask for",
    Reason.QUOTA_NOT_FOUND: "create the quota the pods name, or remove the annotation so one is assigned",
    Reason.WAITING_FOR_GANG: "wait for the rest of the gang, or free room so that all of it fits at once",
    Reason.NO_ZONE_FITS: "free nodes in one RDMA zone of the GPU model, or add capacity",
    Reason.INSUFFICIENT_QUOTA_IDLE: "nodes are full of bound quotas: release idle quotas or add nodes",
    Reason.QUOTA_IDLE_AFTER_RELEASE: "wait: idle quotas on suitable nodes are about to be released",
    Reason.NODE_NOT_READY: "repair the node, or let release_quota move the quota after its back-off",
    Reason.NODE_UNSCHEDULABLE: "uncordon the node",
    Reason.TAINT_NOT_TOLERATED: "add tolerations to the quota and its pods, or untaint nodes",
    Reason.NODE_SELECTOR_MISMATCH: "fix the nodeSelector of the quota / pods, or label nodes",
    Reason.NODE_AFFINITY_MISMATCH: "relax the node affinity",
    Reason.QUOTA_AFFINITY_NOT_MATCH: "make room on the node of the quotas it must share a node with",
    Reason.QUOTA_ANTI_AFFINITY: "relax quota anti-affinity or add nodes",
    Reason.SPEC_MISMATCH: "use nodes of one GPU model for the whole job",
    Reason.TOPOLOGY_ORDER: "free nodes with ascending node index, or drop strict order (enable-topology-scheduling)",
    Reason.STORAGE_NOT_READY: "wait for the storage daemon to report the mount points ready on a node",
    Reason.INSUFFICIENT_IDLE: "pods of other schedulers or spot pods use the node: free it",
    Reason.LOWER_PRIORITY_PODS_USE_NODE: "kube-scheduler's preemption will evict the spot pods",
    Reason.SPOT_POOL_EXHAUSTED: "wait for spot capacity",
    Reason.RELEASED_UNSCHEDULABLE: "the job's pods could not be placed; it retries after back-off",
    Reason.CACHE_NOT_SYNCED: "wait for the scheduler to finish starting",
    Reason.WAITING_FOR_BIND: "kube-scheduler binds them next; if it does not, see `kubectl describe pod`",
    Reason.BIND_FAILED: "see the pod's events for the bind error",
}


def _rung(stage: FitStage, status: Status, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"stage": _STAGE_NAMES[stage], "passed": status.ok}
    if not status.ok:
        out["reason"] = status.reason.value if status.reason else "Unknown"
        out["message"] = status.message()
    out.update({k: v for k, v in extra.items() if v not in (None, [], {})})
    return out


def _task_row(ssn: Session, t: TaskInfo) -> dict[str, Any]:
    q = ssn.quota(t.quota) if t.quota else None
    row = {
        "name": t.name,
        "uid": t.uid,
        "index": t.index,
        "state": t.status.value,
        "quota": t.quota or None,
        "quotaNode": (q.node_name or None) if q is not None else None,
        "node": t.node or None,
        "spot": t.spot or None,
    }
    return {k: v for k, v in row.items() if v is not None}


def diagnose_job(ssn: Session, job: JobInfo, verdict: JobVerdict | None = None) -> dict[str, Any]:
    tasks = sorted(job.alive_tasks(), key=lambda t: (t.index is None, t.index or 0, t.name))
    ladder: list[dict[str, Any]] = []
    stop: dict[str, Any] | None = None

    def add(rung: dict[str, Any]) -> bool:
        nonlocal stop
        ladder.append(rung)
        if not rung["passed"] and stop is None:
            stop = rung
        return bool(rung["passed"])

    valid = ssn.stages.valid(job)
    enq = ssn.stages.enqueueable(job) if valid.ok else valid
    add(_rung(FitStage.JOB_QUEUE, enq))

    quota_tasks = [t for t in tasks if not t.spot]
    missing = [t.name for t in quota_tasks if not t.quota]
    assign = (
        Status.unschedulable(Reason.NO_QUOTA, f"{len(missing)}/{len(quota_tasks)} tasks hold no quota")
        if missing
        else Status.merge([])
    )
    add(_rung(FitStage.QUOTA_ASSIGNMENT, assign, tasksWithoutQuota=missing[:20]))

    gang = ssn.stages.quota_allocate(job)
    add(_rung(FitStage.GANG, gang))

    unbound = []
    for name in dict.fromkeys(t.quota for t in quota_tasks if t.quota):
        q = ssn.quota(name)
        if q is not None and not q.node_name:
            unbound.append(q)
    if job.topology and unbound:
        zone = ssn.stages.zone_candidates(job, unbound[0])
        if isinstance(zone, Status):
            add(_rung(FitStage.ZONE_SELECTION, zone))
        else:
            names = list(zone) if zone is not None else None
            zs = (
                Status.unschedulable(Reason.NO_ZONE_FITS, "no RDMA zone of one GPU model can hold the gang")
                if names is not None and not names
                else Status.merge([])
            )
            add(_rung(FitStage.ZONE_SELECTION, zs, candidates=len(names) if names else None))

    per_node: dict[str, Status] = {}
    node_rung_status = Status.merge([])
    blocked_quota = ""
    for q in unbound:
        result = place_quota(ssn, q, list(ssn.nodes()))
        if result.choice is None:
            per_node = result.failures
            node_rung_status = result.status
            blocked_quota = q.name
            break
    if not blocked_quota:
        for t in quota_tasks:
            q = ssn.quota(t.quota) if t.quota else None
            if q is None or not q.node_name or (t.node and t.status in ON_NODE):
                continue
            node = ssn.node(q.node_name)
            s = (
                ssn.tn.predicate(t, node)
                if node is not None
                else Status.unresolvable(Reason.NODE_NOT_FOUND, q.node_name)
            )
            if not s.ok:
                per_node = {q.node_name: s}
                node_rung_status = s
                blocked_quota = q.name
                break
    add(
        _rung(
            FitStage.NODE_PREDICATES,
            node_rung_status,
            quota=blocked_quota or None,
            nodes=summarize(per_node) if per_node else None,
        )
    )

    waiting = [t.name for t in quota_tasks if not t.node]
    bind_status = (
        Status.unschedulable(Reason.WAITING_FOR_BIND, f"{len(waiting)} pod(s) not bound yet by kube-scheduler")
        if waiting and not stop
        else Status.merge([])
    )
    add(_rung(FitStage.BIND, bind_status, pending=waiting[:20]))

    placed = all(t.node for t in tasks) and bool(tasks)
    doc: dict[str, Any] = {
        "job": job.key,
        "phase": job.phase.value,
        "queue": job.queue,
        "minMember": job.min_member,
        "podGroup": job.has_podgroup,
        "topology": job.topology,
        "strictOrder": job.strict_order or None,
        "stage": "Placed" if placed else (stop["stage"] if stop else "Bind"),
        "ladder": ladder,
        "tasks": [_task_row(ssn, t) for t in tasks],
    }
    if stop is not None:
        try:
            reason = Reason(stop.get("reason"))
            doc["unblock"] = UNBLOCK.get(reason, "")
        except ValueError:
            pass
    if verdict is not None:
        doc["lastCycle"] = {
            "stage": _STAGE_NAMES[verdict.stage],
            "reason": verdict.status.reason.value if verdict.status.reason else None,
            "message": verdict.status.message(),
            "quota": verdict.quota or None,
            "nodes": summarize(verdict.per_node) if verdict.per_node else None,
        }
    return {k: v for k, v in doc.items() if v is not None}


def diagnose_pod(ssn: Session, task: TaskInfo, verdicts: Mapping[str, JobVerdict]) -> dict[str, Any]:
    job = ssn.job(task.job)
    doc: dict[str, Any] = {"pod": task.key, "uid": task.uid, **_task_row(ssn, task)}
    if job is not None:
        doc["jobDiagnosis"] = diagnose_job(ssn, job, verdicts.get(job.key))
    return doc
