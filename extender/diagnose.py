"""``/diagnose``: why a job (or a pod) is where it is, as structured JSON (seed 六 6.4, DESIGN §7).

The FitAction ladder is evaluated *now*, on a fresh session over the cache, rung by rung; the
first rung that stops the job is its ``stage``:

1. ``JobQueue`` — back-off over, admitted by its JobQueue and Queue;
2. ``QuotaAssignment`` — every task holds a quota (hop ①);
3. ``Gang`` — at least minMember tasks exist and hold quotas, and the hop-② commit gate
   (``job.quota_allocate``) passes once the unbound quotas are placed;
4. ``ZoneSelection`` — (topology jobs) a zone plan exists for the unbound quotas;
5. ``NodePredicates`` — the unbound quotas can be bound *together* (QN pipeline, in one
   statement that is discarded), and each task fits its bound quota's node (TN);
6. ``Bind`` — nothing blocks: the binder binds the remaining quotas next cycle
   (``QuotaNotBound``), or kube-scheduler still has to bind the pods (``WaitingForBind``).

A placement failure is the job's stage even though the gang gate then fails too — the binder's
rule for its verdicts (``allocate_quota.bind_job_quotas``), so ``stage`` and ``lastCycle`` agree.
Per-node failures are aggregated (``"3 nodes: InsufficientQuotaIdle(nvidia.com/gpu 8 > 7)"``).
The binder's last verdict for the job is included as ``lastCycle``. ``unblock`` says what would
help, per reason. The vocabulary is the one enum shared with the extender and PodGroup
conditions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.actions.allocate_job import queue_not_found
from extender.actions.placement import larger_than_any_node, place_quota
from extender.binder.status import job_phase
from extender.cache.convert import format_time
from extender.framework.session import FitStage, JobVerdict, Session
from extender.framework.statement import StatementError
from extender.framework.status import Reason, Status, summarize
from extender.model.job import JobInfo
from extender.model.node import LedgerError, NodeInfo
from extender.model.quota import QuotaInfo
from extender.model.task import ON_NODE, TaskInfo
from extender.plugins.gang import part_running

__all__ = ["UNBLOCK", "diagnose_job", "diagnose_pod", "unblock"]

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
    Reason.WAITING_FOR_NAMED_QUOTA: "free room on the quota the pod names (annotation required-quota), enlarge it, or "
    "remove the annotation so that any quota of the queue may be assigned",
    Reason.WAITING_FOR_GANG: "wait for the rest of the gang, or free room so that all of it fits at once",
    Reason.NO_ZONE_FITS: "free nodes in one RDMA zone of the GPU model, or add capacity",
    Reason.QUOTA_LARGER_THAN_ANY_NODE: "no node can ever hold the quota: shrink its request to what one node "
    "has (split the task), or add a node that large",
    Reason.HOLDING_NODES: "nothing to do: the gang holds these nodes until enough of them are free (other jobs "
    "keep off them); it runs then, or when the hold ends (hold_seconds)",
    Reason.NODE_HELD_FOR_GANG: "wait for the gang holding the nodes to start, or use nodes of another zone; "
    "reserve_after_cycles: 0 in the topology policy turns holds off",
    Reason.FITS_ONLY_ABOVE_ALLOWED_TIER: "free room in one unit of the job's highestTierAllowed (the message names "
    "the tier and its roomiest unit), raise highestTierAllowed, or make the limit mode: soft",
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
    Reason.SPOT_POOL_INVALID: "fix the node's scheduling.infini-ai.com/spot-shared annotation: a quantity of the "
    "spot resource (e.g. 2) no more than the node has, or remove it; spot pods avoid the node until then",
    Reason.RELEASED_UNSCHEDULABLE: "the job's pods could not be placed; it retries after back-off",
    Reason.CACHE_NOT_SYNCED: "wait for the scheduler to finish starting",
    Reason.QUOTA_NOT_BOUND: "wait for the binder's next cycle; if the quotas stay unbound, check that a replica "
    "holds the binder Lease (/readyz: binderLeader)",
    Reason.STATIC_BIND_NODE_NOT_READY: "repair the node the quota is pinned to (spec.staticBindNode), or unpin it",
    Reason.QUEUE_NOT_FOUND: "create the job's Queue, or name an existing one",
    Reason.QUOTA_BOUND_ELSEWHERE: "nothing: the pod can only run on its quota's node",
    Reason.NODE_NOT_FOUND: "the quota's node is gone: release_quota moves the quota after its back-off",
    Reason.ZONE_MISMATCH: "use nodes of one RDMA zone, or drop the job's topology affinity",
    Reason.UNKNOWN_POD: "wait a moment: the scheduler's cache has not seen the pod yet",
    Reason.INVALID_POD: "fix the pod (the message says which annotation or field): it is not scheduled until then",
    Reason.INTERNAL: "a bug or a failing API server: see the scheduler's log",
    Reason.WAITING_FOR_BIND: "kube-scheduler binds them next; if it does not, see `kubectl describe pod`",
    Reason.BIND_FAILED: "see the pod's events for the bind error",
}


def unblock(reason: str) -> str:
    """What would unblock a job stopped for ``reason`` (a :class:`Reason` value)."""
    try:
        return UNBLOCK[Reason(reason)]
    except (ValueError, KeyError):
        return "see the message, the pods' events (`kubectl describe pod`) and the scheduler's log"


def _rung(stage: FitStage, status: Status, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"stage": stage.label, "passed": status.ok}
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


def _place_unbound(
    ssn: Session, job: JobInfo, unbound: list[QuotaInfo]
) -> tuple[Status | None, Status, dict[str, Status], str, Status]:
    """Try to bind the job's unbound quotas *together*, the way the binder would (zone candidates
    for topology jobs, every node otherwise), in one statement that is discarded afterwards.

    Returns (zone status or None when not a topology job, node-predicate status, per-node
    failures of the quota that could not be placed, that quota's name, the hop-② gang gate
    evaluated with the placements applied)."""
    zone_status: Status | None = Status.merge([]) if job.topology else None
    node_status = Status.merge([])
    per_node: dict[str, Status] = {}
    blocked = ""
    stmt = ssn.statement()
    try:
        for q in unbound:
            current = ssn.quota(q.name)
            if current is None or current.node_name:
                continue
            candidates: list[NodeInfo]
            if job.topology:
                zone = ssn.stages.zone_candidates(job, current)
                if isinstance(zone, Status):
                    zone_status = zone
                    blocked = q.name
                    break
                if zone is None:
                    candidates = list(ssn.nodes())
                else:
                    candidates = [n for n in (ssn.node(x) for x in zone) if n is not None]
                    if not candidates:
                        zone_status = Status.unschedulable(
                            Reason.NO_ZONE_FITS, f"no node left in the job's zones for quota {q.name}"
                        )
                        blocked = q.name
                        break
            else:
                candidates = list(ssn.nodes())
            result = place_quota(ssn, current, candidates, rank_ordered=ssn.qn.rank_ordered)
            if result.choice is None:
                per_node = dict(result.failures)
                node_status = result.status
                blocked = q.name
                break
            try:
                stmt.allocate_quota_to_node(q.name, result.choice.name)
            except (LedgerError, StatementError) as exc:
                node_status = Status.error(str(exc))
                blocked = q.name
                break
        gate = ssn.stages.quota_allocate(job) if not blocked else Status.merge([])
    finally:
        stmt.discard()
    return zone_status, node_status, per_node, blocked, gate


def _larger_than_any_node(ssn: Session, quotas: list[QuotaInfo]) -> tuple[str, Status] | None:
    """The first of ``quotas`` no node could ever hold, and why (:mod:`extender.model.capacity`)."""
    for q in quotas:
        status = larger_than_any_node(ssn, q)
        if status is not None:
            return q.name, status
    return None


def diagnose_job(ssn: Session, job: JobInfo, verdict: JobVerdict | None = None) -> dict[str, Any]:
    """The ladder, rung by rung; ``stage`` is the first rung that stops the job.

    * ``JobQueue``: back-off, JobQueue / Queue admission;
    * ``QuotaAssignment``: every (non-spot) task holds a quota;
    * ``Gang``: at least minMember tasks exist and hold quotas (hop ①), and — once the unbound
      quotas are placed — the hop-② gate (``job.quota_allocate``) passes;
    * ``ZoneSelection`` (topology jobs): a zone plan exists for the unbound quotas;
    * ``NodePredicates``: the unbound quotas can be bound together (QN), and each task fits its
      bound quota's node (TN);
    * ``Bind``: what is left — quotas the binder binds in its next cycle, or pods kube-scheduler
      has still to bind.

    Placement failures are the verdict, not the gang gate failing as their consequence: the same
    rule as the binder's (``allocate_quota.bind_job_quotas``).
    """
    tasks = sorted(job.alive_tasks(), key=lambda t: (t.index is None, t.index or 0, t.name))
    ok = Status.merge([])

    valid = ssn.stages.valid(job)
    backoff = not valid.ok and valid.reason is Reason.BACKOFF
    admission = valid if backoff else ssn.stages.enqueueable(job)
    gang_members = valid if not valid.ok and not backoff else ok

    quota_tasks = [t for t in tasks if not t.spot]
    missing = [t.name for t in quota_tasks if not t.quota]
    assign = ok
    if missing:
        assign = queue_not_found(ssn, job.queue) or Status.unschedulable(
            Reason.NO_QUOTA, f"{len(missing)}/{len(quota_tasks)} tasks hold no quota"
        )
    gang = gang_members if not gang_members.ok else ssn.stages.tq_ready(job)

    unbound = _unbound_quotas(ssn, quota_tasks)
    placing = _placing(ssn, job, quota_tasks, unbound)
    if gang.ok and not placing.gate.ok:
        gang = placing.gate

    ladder: list[dict[str, Any]] = [
        _rung(FitStage.JOB_QUEUE, admission),
        _rung(FitStage.QUOTA_ASSIGNMENT, assign, tasksWithoutQuota=missing[:20]),
        _rung(FitStage.GANG, gang),
        *_placement_rungs(placing, unbound),
    ]
    ladder.append(_bind_rung(ladder, quota_tasks, unbound))
    return _document(ssn, job, tasks, ladder, verdict)


@dataclass(slots=True)
class _Placing:
    """What placing the job's quotas found (see :func:`_place_unbound`): the zone status (None:
    not a topology job), the node-predicate status, the per-node failures and the name of the
    quota that could not be placed ("" when none), and the hop-② gang gate."""

    zone: Status | None
    node: Status
    per_node: dict[str, Status]
    blocked: str
    gate: Status


def _unbound_quotas(ssn: Session, quota_tasks: list[TaskInfo]) -> list[QuotaInfo]:
    """The quotas the tasks hold that are bound to no node yet, each once, in task order."""
    unbound: list[QuotaInfo] = []
    for name in dict.fromkeys(t.quota for t in quota_tasks if t.quota):
        q = ssn.quota(name)
        if q is not None and not q.node_name:
            unbound.append(q)
    return unbound


def _placing(ssn: Session, job: JobInfo, quota_tasks: list[TaskInfo], unbound: list[QuotaInfo]) -> _Placing:
    """The unbound quotas placed together; a quota no node could ever hold said so; then (when
    they all fit) each task not yet on a node checked against its bound quota's node (TN)."""
    zone_status, node_status, per_node, blocked_quota, gate = _place_unbound(ssn, job, unbound)
    too_big = _larger_than_any_node(ssn, unbound) if blocked_quota else None
    if too_big is not None:
        # never placeable, whatever is freed: say so, not "free nodes" (the binder's rule too)
        blocked_quota, status = too_big
        if job.topology and zone_status is not None and not zone_status.ok:
            zone_status = status
        else:
            node_status = status
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
                node_status = s
                blocked_quota = q.name
                break
    if zone_status is not None and not zone_status.ok:  # a job that runs says so first (the binder's rule)
        zone_status = part_running(ssn, job, zone_status)
    elif not node_status.ok:
        node_status = part_running(ssn, job, node_status)
    return _Placing(zone_status, node_status, per_node, blocked_quota, gate)


def _placement_rungs(placing: _Placing, unbound: list[QuotaInfo]) -> list[dict[str, Any]]:
    """``ZoneSelection`` (topology jobs with quotas to place, or a zone failure) and
    ``NodePredicates``."""
    rungs: list[dict[str, Any]] = []
    zone_status, node_status = placing.zone, placing.node
    if zone_status is not None and (unbound or not zone_status.ok):
        rungs.append(_rung(FitStage.ZONE_SELECTION, zone_status, quota=placing.blocked if not zone_status.ok else None))
    rungs.append(
        _rung(
            FitStage.NODE_PREDICATES,
            node_status,
            quota=(placing.blocked or None) if not node_status.ok else None,
            nodes=summarize(placing.per_node) if placing.per_node else None,
        )
    )
    return rungs


def _bind_rung(ladder: list[dict[str, Any]], quota_tasks: list[TaskInfo], unbound: list[QuotaInfo]) -> dict[str, Any]:
    """``Bind``: passed when an earlier rung stops the job or every pod is on a node; else
    waiting for the binder (quotas to bind) or for kube-scheduler (pods to bind)."""
    stopped = any(not r["passed"] for r in ladder)
    waiting = [t.name for t in quota_tasks if not t.node]
    if stopped or not waiting:
        bind_status = Status.merge([])
    elif unbound:
        bind_status = Status.unschedulable(
            Reason.QUOTA_NOT_BOUND,
            f"{len(unbound)} quota(s) fit their nodes and are bound by the binder's next cycle",
        )
    else:
        bind_status = Status.unschedulable(
            Reason.WAITING_FOR_BIND, f"{len(waiting)} pod(s) not bound yet by kube-scheduler"
        )
    return _rung(FitStage.BIND, bind_status, pending=waiting[:20])


def _stop(ladder: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first rung that failed; the rungs after it are marked not reached (they neither passed
    nor failed)."""
    stop = next((r for r in ladder if not r["passed"]), None)
    if stop is not None:
        at = ladder.index(stop)
        ladder[at + 1 :] = [{"stage": r["stage"], "passed": None, "reached": False} for r in ladder[at + 1 :]]
    return stop


def _document(
    ssn: Session,
    job: JobInfo,
    tasks: list[TaskInfo],
    ladder: list[dict[str, Any]],
    verdict: JobVerdict | None,
) -> dict[str, Any]:
    """The diagnosis as served: the job, its stage (the ladder's first failed rung; ``Placed``
    when every task is on a node), the ladder, the tasks, what would unblock it, its back-off and
    the binder's last verdict; None fields left out."""
    stop = _stop(ladder)
    placed = all(t.node for t in tasks) and bool(tasks)
    doc: dict[str, Any] = {
        "job": job.key,
        "phase": job_phase(job, verdict),  # the PodGroup's phase, as the binder writes it
        "queue": job.queue,
        "minMember": job.min_member,
        "podGroup": job.has_podgroup,
        "topology": job.topology,
        "strictOrder": job.strict_order or None,
        "highestTierAllowed": job.highest_tier,
        "tierMode": job.tier_mode if job.highest_tier is not None else None,
        "stage": "Placed" if placed else (stop["stage"] if stop else "Bind"),
        "reason": stop.get("reason") if stop is not None and not placed else None,
        "message": stop.get("message") if stop is not None and not placed else None,
        "ladder": ladder,
        "tasks": [_task_row(ssn, t) for t in tasks],
    }
    if stop is not None and not placed:
        doc["unblock"] = unblock(str(stop.get("reason") or ""))
    doc["backoff"] = _backoff(ssn, job)
    doc["lastCycle"] = _last_cycle(verdict)
    return {k: v for k, v in doc.items() if v is not None}


def _backoff(ssn: Session, job: JobInfo) -> dict[str, Any] | None:
    """The job's back-off while it lasts: until when, the seconds left, its releases so far."""
    until = ssn.snap.backoff.get(job.key)
    if until is not None and until > ssn.now:
        # the time left is here, not in the message (a message that counts down makes a new
        # Event every second instead of one whose count grows)
        return {
            "until": format_time(until),
            "remainingSeconds": math.ceil(until - ssn.now),
            "releases": ssn.snap.release_count.get(job.key, 0),
        }
    return None


def _last_cycle(verdict: JobVerdict | None) -> dict[str, Any] | None:
    """The binder's last verdict for the job, if it has one."""
    if verdict is None:
        return None
    return {
        "stage": verdict.stage.label,
        "reason": verdict.status.reason.value if verdict.status.reason else None,
        "message": verdict.status.message(),
        "quota": verdict.quota or None,
        "nodes": summarize(verdict.per_node) if verdict.per_node else None,
    }


def diagnose_pod(ssn: Session, task: TaskInfo, verdicts: Mapping[str, JobVerdict]) -> dict[str, Any]:
    job = ssn.job(task.job)
    doc: dict[str, Any] = {"pod": task.key, "uid": task.uid, **_task_row(ssn, task)}
    if job is not None:
        doc["jobDiagnosis"] = diagnose_job(ssn, job, verdicts.get(job.key))
    return doc
