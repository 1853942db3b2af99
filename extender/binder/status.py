"""What every CRD's ``status`` should say, from the cache after a cycle (pure, no I/O).

The binder leader keeps the status of every object true (the seed's controller-manager role);
this module decides *what* true is, :mod:`extender.binder.reconcile` writes it, only where it
differs from what the API holds. The rules:

**PodGroup** (one per job that has a PodGroup):

* ``phase`` — the first that holds:
  ``Completed`` no task is alive and at least one finished (Succeeded or Failed), or the
  job had already been reported Running / Completed (finished pods leave the cache);
  ``Running`` at least minMember tasks run; ``Unknown`` some run, fewer than minMember;
  ``Pending`` this cycle stopped the job at admission (JobQueue, Queue — not a back-off) or
  its gang is not all there (``GangNotReady``); ``Unschedulable`` this cycle stopped it at any
  later rung (quota assignment, gang, zone, node predicates, bind), or it backs off after its
  quotas were released; ``Inqueue`` a task holds a quota or a node (admitted, being placed);
  ``Pending`` otherwise.
* ``running`` tasks in phase Running; ``succeeded`` / ``failed`` finished tasks (never
  lower than what the status already says: the cache forgets finished pods on restart);
  ``boundQuotas`` alive tasks whose quota is bound to a node; ``queue`` the queue the job
  was counted in (spec.queue, else the pods' queue-name annotation, else the default queue).
* condition ``Unschedulable``: True with the cycle's reason and message while the job is
  stopped; False (reason ``Scheduled``) once it is admitted and nothing stops it; its
  ``lastTransitionTime`` changes only when its status does.
* ``hold`` — the nodes the binder holds for the waiting gang and since when
  (``extender/plugins/topology/holds.py``), absent without a hold: what a new leader continues
  and what the other replicas' extender keeps pods off.

**Queue**: ``allocated`` Σ request of the queue's alive tasks on nodes; ``specAllocated`` the
same per GPU spec code of those nodes (nodes without one: ``unknown``); ``running`` jobs of
the queue in phase Running; ``pending`` jobs in phase Pending, Inqueue or Unschedulable;
``state`` Open, Closed, or Closing (closed while some of its jobs still run).

**JobQueue** (a job counts in the JobQueue that governs it: the highest priority whose
selector selects it, ties by name): ``runningJobs`` admitted jobs (a task holds a quota or a
node: what ``maxRunningJobs`` counts); ``blockedJobs`` jobs not admitted while the JobQueue is
closed or full; ``pendingJobs`` the other jobs not admitted yet (let in, waiting for quotas).

**Quota** ``shadowResource`` is ``spec.shadowResource`` (the operator's oversell grant; the
cache reads the grant from the spec, the status reports what is in force).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from extender.cache.convert import format_time
from extender.framework.session import FitStage, JobVerdict
from extender.framework.status import Reason
from extender.model.job import JobInfo, JobPhase, JobQueueInfo, QueueInfo
from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo
from extender.model.resources import Resource, format_quantity
from extender.model.task import ON_NODE, TaskStatus
from extender.model.topology import describe_tier
from extender.plugins.topology.holds import Hold

__all__ = [
    "UNSCHEDULABLE",
    "hold_record",
    "job_phase",
    "jobqueue_status",
    "podgroup_status",
    "queue_status",
    "quota_hold_status",
    "resource_list",
]

UNSCHEDULABLE: Final = "Unschedulable"
"""PodGroup phase of a job the last cycle could not place (Volcano has it as a condition only)."""

_WAITING: Final = frozenset({JobPhase.PENDING.value, JobPhase.INQUEUE.value, UNSCHEDULABLE})
_FINISHED_BEFORE: Final = frozenset({JobPhase.RUNNING.value, JobPhase.COMPLETED.value, JobPhase.UNKNOWN.value})


def resource_list(r: Resource) -> dict[str, str]:
    """A ResourceList of the non-zero entries, names sorted."""
    return {k: format_quantity(k, v) for k, v in sorted(r.q.items()) if v}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def job_phase(job: JobInfo, verdict: JobVerdict | None, stored_phase: str = "") -> str:
    """The PodGroup phase of ``job`` (rules in the module docstring)."""
    alive = job.alive_tasks()
    if not alive and (job.finished or stored_phase in _FINISHED_BEFORE):
        return JobPhase.COMPLETED.value
    running = sum(1 for t in alive if t.status is TaskStatus.RUNNING)
    if running and running >= job.min_member:
        return JobPhase.RUNNING.value
    if running:
        return JobPhase.UNKNOWN.value
    if verdict is not None:
        reason = verdict.status.reason
        if reason is Reason.GANG_NOT_READY or (verdict.stage is FitStage.JOB_QUEUE and reason is not Reason.BACKOFF):
            return JobPhase.PENDING.value
        return UNSCHEDULABLE
    if any(t.quota or t.node for t in alive):
        return JobPhase.INQUEUE.value
    return JobPhase.PENDING.value


def _condition(
    verdict: JobVerdict | None, phase: str, stored: Iterable[Mapping[str, Any]], now: str
) -> dict[str, Any] | None:
    old = next((c for c in stored if c.get("type") == UNSCHEDULABLE), None)
    if verdict is not None:
        cond = {
            "type": UNSCHEDULABLE,
            "status": "True",
            "reason": verdict.status.reason.value if verdict.status.reason else UNSCHEDULABLE,
            "message": f"{verdict.stage.label}: {verdict.status.message()}",
        }
    elif phase in (JobPhase.INQUEUE.value, JobPhase.RUNNING.value, JobPhase.UNKNOWN.value, JobPhase.COMPLETED.value):
        cond = {"type": UNSCHEDULABLE, "status": "False", "reason": "Scheduled", "message": ""}
    else:
        return dict(old) if old is not None else None
    kept = old.get("lastTransitionTime") if old is not None and old.get("status") == cond["status"] else None
    cond["lastTransitionTime"] = kept or now
    return cond


def podgroup_status(
    job: JobInfo,
    quotas: Mapping[str, QuotaInfo],
    verdict: JobVerdict | None,
    stored: Mapping[str, Any],
    now: str,
    *,
    hold: Hold | None = None,
) -> dict[str, Any]:
    """The whole desired ``status`` of the job's PodGroup, given the ``stored`` one (fields this
    module does not own are kept; ``now`` is the RFC 3339 time of a condition's transition;
    ``hold`` the binder's hold for the job, if any)."""
    alive = job.alive_tasks()
    phase = job_phase(job, verdict, str(stored.get("phase") or ""))
    finished = list(job.finished.values())
    bound = 0
    for t in alive:
        q = quotas.get(t.quota) if t.quota else None
        if q is not None and q.node_name:
            bound += 1
    out = dict(stored)
    out.update(
        phase=phase,
        queue=job.queue,
        running=sum(1 for t in alive if t.status is TaskStatus.RUNNING),
        succeeded=max(_count(stored.get("succeeded")), finished.count(TaskStatus.SUCCEEDED)),
        failed=max(_count(stored.get("failed")), finished.count(TaskStatus.FAILED)),
        boundQuotas=bound,
        tierLimit="none" if job.highest_tier is None else f"{describe_tier(job.highest_tier)} ({job.tier_mode})",
    )
    conds = [dict(c) for c in stored.get("conditions") or () if isinstance(c, Mapping)]
    cond = _condition(verdict, phase, conds, now)
    others = [c for c in conds if c.get("type") != UNSCHEDULABLE]
    out["conditions"] = others + ([cond] if cond is not None else [])
    if not out["conditions"]:
        del out["conditions"]
    if hold is not None:
        out["hold"] = hold_record(hold)
    else:
        out.pop("hold", None)
    return out


def hold_record(hold: Hold, job: str = "") -> dict[str, Any]:
    """``status.hold`` of a PodGroup (the gang's hold), or with ``job`` of the Quota a job of
    one pod claims (that job's hold)."""
    record: dict[str, Any] = {"job": job} if job else {}
    record.update(nodes=list(hold.nodes), since=format_time(hold.since))
    return record


def quota_hold_status(stored: Mapping[str, Any], job: str, hold: Hold | None) -> dict[str, Any]:
    """A Quota's ``status`` with ``job``'s hold recorded in ``hold`` (None: its record removed;
    a record of another job is kept)."""
    out = dict(stored)
    if hold is not None:
        out["hold"] = hold_record(hold, job)
    elif isinstance(out.get("hold"), Mapping) and out["hold"].get("job") == job:
        del out["hold"]
    return out


def queue_status(
    queue: QueueInfo,
    jobs: Iterable[JobInfo],
    phases: Mapping[str, str],
    nodes: Mapping[str, NodeInfo],
    stored: Mapping[str, Any],
    *,
    pools: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The desired ``status`` of ``queue`` from the jobs of that queue and their ``phases``
    (job key → PodGroup phase, :func:`job_phase`), with ``pools`` as ``quotaPools`` (the
    entries :func:`extender.binder.pools.plan_pool` reports); fields not owned here are kept."""
    allocated = Resource.empty()
    by_spec: dict[str, Resource] = {}
    running = pending = 0
    for job in jobs:
        phase = phases.get(job.key, "")
        if phase == JobPhase.RUNNING.value:
            running += 1
        elif phase in _WAITING:
            pending += 1
        for t in job.alive_tasks():
            if not t.node or t.status not in ON_NODE:
                continue
            allocated.iadd(t.request)
            node = nodes.get(t.node)
            spec = (node.spec if node is not None else "") or "unknown"
            by_spec.setdefault(spec, Resource.empty()).iadd(t.request)
    if queue.open:
        state = "Open"
    else:
        state = "Closing" if running else "Closed"
    out = dict(stored)
    out.update(
        allocated=resource_list(allocated),
        specAllocated={s: resource_list(r) for s, r in sorted(by_spec.items())},
        running=running,
        pending=pending,
        state=state,
    )
    if pools:
        out["quotaPools"] = [dict(p) for p in pools]
    else:
        out.pop("quotaPools", None)
    return out


def jobqueue_status(jq: JobQueueInfo, jobs: Iterable[JobInfo], stored: Mapping[str, Any]) -> dict[str, Any]:
    """The desired ``status`` of ``jq`` from the jobs it governs (rules in the module docstring)."""
    admitted = waiting = 0
    for job in jobs:
        if any(t.quota or t.node for t in job.alive_tasks()):
            admitted += 1
        elif job.alive_tasks():
            waiting += 1
    full = jq.max_running is not None and admitted >= jq.max_running
    blocked = waiting if (not jq.open or full) else 0
    out = dict(stored)
    out.update(runningJobs=admitted, pendingJobs=waiting - blocked, blockedJobs=blocked)
    return out


def quota_reason(quota: QuotaInfo, now: float, verdict: str = "") -> str:
    """``status.reason`` of a quota: one CamelCase word that is never empty.

    Unbound: the reason its job's last verdict gives (``InsufficientQuotaIdle``, …), else
    ``QuotaNotBound`` when tasks claim it (the binder places it next), else ``Unclaimed``.
    Bound: what holds it on its node — ``Claimed`` (tasks claim it), ``Reserved`` (only
    reservations of departed tasks), ``StaticBind`` (pinned by spec.staticBindNode), else
    ``Idle`` (nothing holds it; release_quota frees it)."""
    if not quota.node_name:
        if verdict:
            return verdict.split("(", 1)[0]
        return Reason.QUOTA_NOT_BOUND.value if quota.claims else "Unclaimed"
    if quota.claims:
        return "Claimed"
    if any(not r.expired(now) for r in quota.reserved):
        return "Reserved"
    if quota.static_bind_node:
        return "StaticBind"
    return "Idle"
