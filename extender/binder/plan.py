"""From a cycle's result to the writes that make the API match it (pure, no I/O).

The binder reconciles rather than replays: for each quota it computes the *desired* status from
the session's final state and the cache's derived claims, and writes only what differs from what
the API holds. Intents that only concern pods (claims moved by allocate_job) become annotation
patches, coalesced per pod (the last one wins). Quota statuses come first, then pod annotations
(``quota-node`` makes kube-scheduler re-queue a pending pod at once). Each quota write says which
node it frees and which it takes, so that the loop can write the releases before the binds that
use their room (invariant 1 at every instant on the API objects).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extender import wellknown
from extender.binder.status import quota_reason
from extender.cache.cache import ClusterCache
from extender.cache.claims import entries_of
from extender.cache.convert import format_time
from extender.cache.convert_crds import reserved_to_api
from extender.framework.intents import ClaimQuota, ReleaseClaim
from extender.framework.session import JobVerdict
from extender.model.quota import QuotaInfo, QuotaPhase, claimant_order
from extender.model.resources import Resource, format_quantity, gpu_summary
from extender.model.task import TaskStatus
from extender.scheduler import CycleResult

__all__ = [
    "PodPatch",
    "QuotaStatusWrite",
    "WritePlan",
    "after_freeing",
    "desired_quota_status",
    "gpu_summary",
    "in_order",
    "merge_inflight",
    "plan_writes",
]

# fields of Quota.status that the binder owns; anything else in status is left alone
OWNED_STATUS_FIELDS = (
    "phase",
    "nodeName",
    "allocated",
    "tasks",
    "reservedTasks",
    "staticBindStatus",
    "boundBy",
    "reason",
    "message",
    "shadowResource",
    "gpus",
)


@dataclass(frozen=True, slots=True)
class QuotaStatusWrite:
    name: str
    status: dict[str, Any]  # desired values of OWNED_STATUS_FIELDS
    phase_changed: bool
    frees: str = ""  # the node this write takes the quota off (a release, a move), else ""
    takes: str = ""  # the node this write puts the quota on (a bind, a move), else ""
    gang: str = ""  # with ``takes``: the job whose tasks claim the quota (its gang binds together)
    seen: Mapping[str, Any] | None = field(default=None, compare=False)  # the object it was planned on


@dataclass(frozen=True, slots=True)
class PodPatch:
    namespace: str
    name: str
    uid: str
    annotations: dict[str, str | None]


@dataclass(slots=True)
class WritePlan:
    quotas: list[QuotaStatusWrite] = field(default_factory=list)
    pods: list[PodPatch] = field(default_factory=list)

    def empty(self) -> bool:
        return not self.quotas and not self.pods


def _resource_list(q: Mapping[str, int]) -> dict[str, str]:
    return {k: format_quantity(k, v) for k, v in sorted(q.items()) if v}


def desired_quota_status(cache: ClusterCache, quota: QuotaInfo, now: float, verdict: str = "") -> dict[str, Any]:
    """What ``status`` should say (the binder-owned fields only)."""
    tasks = []
    for claim in sorted(quota.claims.values(), key=claimant_order):
        uid = claim.uid
        inflight = cache.inflight_entry(quota.name, uid)
        if inflight is not None:
            tasks.append(inflight.to_api())  # recorded at admission; the pod is not seen yet
            continue
        task = cache.task(uid)
        entry: dict[str, Any] = {
            "uid": uid,
            "namespace": claim.namespace,
            "name": claim.name,
            "job": claim.job,
            "request": _resource_list(claim.request.q),
            "phase": (task.status if task is not None else TaskStatus.PENDING).value,
        }
        if claim.index is not None:
            entry["taskIndex"] = claim.index
        tasks.append(entry)
    reserved = [reserved_to_api(r) for r in quota.reserved if not r.expired(now)]
    reserved.sort(key=lambda r: (r["job"], r.get("taskIndex", -1), r["podName"]))
    persisted = (cache.quota_object(quota.name) or {}).get("status") or {}
    if not quota.node_name:
        bound_by = ""
    elif quota.node_name == persisted.get("nodeName"):
        bound_by = str(persisted.get("boundBy") or "")  # as it was: ours, or another controller's
    else:
        bound_by = wellknown.COMPONENT  # this cycle bound (or moved) it
    status: dict[str, Any] = {
        "phase": QuotaPhase.BOUND.value if quota.node_name else QuotaPhase.EMPTY.value,
        "boundBy": bound_by,
        "nodeName": quota.node_name,
        "allocated": _resource_list(quota.allocated.q),
        "tasks": tasks,
        "reservedTasks": reserved,
        "reason": quota_reason(quota, now, verdict),
        "message": "" if quota.node_name else verdict,
        "shadowResource": _resource_list(quota.shadow.q),  # in force: spec.shadowResource
        "gpus": gpu_summary(quota.request, cache.opts.gpu_resources),
    }
    if quota.static_bind_node:
        status["staticBindStatus"] = {
            "nodeName": quota.static_bind_node,
            "bound": quota.node_name == quota.static_bind_node,
        }
    return status


def merge_inflight(
    obj: Mapping[str, Any], tasks: list[dict[str, Any]], now: float, arrived: Callable[[str], bool]
) -> list[dict[str, Any]] | None:
    """``status.tasks`` to write over ``obj`` as just read: the planned ``tasks`` plus the live
    in-flight entries a webhook recorded since the cycle was planned (their pods not seen yet) —
    or None when those no longer fit beside the planned claims (the cycle planned on room that a
    webhook took first: nothing is written, the next cycle re-plans)."""
    planned = {str(t.get("uid")) for t in tasks}
    extra = [e for e in entries_of(obj).values() if e.uid not in planned and not e.expired(now) and not arrived(e.uid)]
    if not extra:
        return tasks
    spec = obj.get("spec") or {}
    cap = Resource.from_list(spec.get("request")) + Resource.from_list((obj.get("status") or {}).get("shadowResource"))
    total = Resource.total(Resource.from_list(t.get("request")) for t in tasks)
    for e in extra:
        total.iadd(e.request)
    if not Resource({k: v for k, v in total.q.items() if k in cap.q}).less_equal(cap):
        return None
    return [*tasks, *(e.to_api() for e in extra)]


def _persisted(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    status = (obj or {}).get("status") or {}
    out: dict[str, Any] = {}
    for k in OWNED_STATUS_FIELDS:
        v = status.get(k)
        if v in (None, "", [], {}):
            continue
        out[k] = v
    return out


def _normalized(status: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in status.items() if v not in (None, "", [], {})}


def quota_messages(verdicts: Mapping[str, JobVerdict]) -> dict[str, str]:
    """quota → why it is not bound, from the verdicts that name a quota (or all of a job's quotas)."""
    out: dict[str, str] = {}
    for v in verdicts.values():
        if v.quota:
            out[v.quota] = v.status.message()
    return out


def plan_writes(cache: ClusterCache, result: CycleResult, *, extra_quotas: Iterable[str] = ()) -> WritePlan:
    plan = WritePlan()
    now = result.now
    msgs = quota_messages(result.verdicts)
    # quotas whose unbound reason should be shown: those of jobs with a verdict
    for key, v in result.verdicts.items():
        job = result.jobs.get(key) or cache.jobs.get(key)
        if job is None:
            continue
        for t in job.alive_tasks():
            if t.quota and t.quota not in msgs:
                msgs[t.quota] = v.status.message()
    names = set(result.quotas) | set(extra_quotas)
    for name in sorted(names):
        quota = result.quotas.get(name) or cache.quotas.get(name)
        if quota is None:
            continue
        if name in cache.bindings:  # the extender's write binding it is in flight: its answer comes first
            cache.dirty_quotas.add(name)
            continue
        desired = desired_quota_status(cache, quota, now, msgs.get(name, ""))
        seen = cache.quota_object(name)
        current = _persisted(seen)
        if _normalized(desired) != current:
            phase_changed = current.get("phase", QuotaPhase.EMPTY.value) != desired["phase"]
            was, will = current.get("nodeName") or "", desired.get("nodeName") or ""
            frees, takes = (was, will) if was != will else ("", "")
            gang = _claimants_job(quota) if takes else ""
            plan.quotas.append(QuotaStatusWrite(name, desired, phase_changed, frees, takes, gang, seen))

    # pod annotations: claims moved this cycle, then quota-node on pending pods
    patches: dict[str, PodPatch] = {}
    for intent in result.intents:
        if isinstance(intent, ClaimQuota):
            # the webhook's "no quota at admission" note is answered now
            patches[intent.task] = PodPatch(
                intent.namespace,
                intent.name,
                intent.task,
                {wellknown.ANNO_QUOTA_NAME: intent.quota, wellknown.ANNO_SCHEDULING_REASON: None},
            )
        elif isinstance(intent, ReleaseClaim):
            # the loser of a race (or a claim that no longer fits) says why it lost its quota,
            # as the webhook's "no quota at admission" note does; a re-assignment later in the
            # cycle replaces this patch (ClaimQuota removes the reason again)
            changes: dict[str, str | None] = {
                wellknown.ANNO_QUOTA_NAME: None,
                wellknown.ANNO_QUOTA_NODE: None,
                wellknown.ANNO_SCHEDULING_REASON: intent.reason or None,
            }
            queue = _queue_to_keep(cache, result, intent.task)
            if queue:
                changes[wellknown.ANNO_QUEUE_NAME] = queue
            patches[intent.task] = PodPatch(intent.namespace, intent.name, intent.task, changes)
    final_quotas = dict(cache.quotas)
    final_quotas.update(result.quotas)
    # only tasks not yet on a node carry a quota-node annotation to keep current
    keys = set(cache.pending_jobs) | set(result.jobs)
    jobs = [j for j in (result.jobs.get(k) or cache.jobs.get(k) for k in sorted(keys)) if j is not None]
    for job in jobs:
        for t in job.alive_tasks():
            if t.node or t.status is not TaskStatus.ALLOCATED_TO_QUOTA or not t.quota:
                continue
            q = final_quotas.get(t.quota)
            want = q.node_name if q is not None else ""
            obj = cache.pod(t.uid)
            have = ((obj or {}).get("metadata") or {}).get("annotations", {}).get(wellknown.ANNO_QUOTA_NODE, "")
            claimed = ((obj or {}).get("metadata") or {}).get("annotations", {}).get(wellknown.ANNO_QUOTA_NAME, "")
            patch = patches.get(t.uid)
            if patch is None and claimed != t.quota:
                patch = PodPatch(t.namespace, t.name, t.uid, {wellknown.ANNO_QUOTA_NAME: t.quota})
            if (want or None) != (have or None):
                base = patch.annotations if patch is not None else {}
                patch = PodPatch(t.namespace, t.name, t.uid, {**base, wellknown.ANNO_QUOTA_NODE: want or None})
            if patch is not None:
                patches[t.uid] = patch
    plan.pods = sorted(patches.values(), key=lambda p: (p.namespace, p.name))
    return plan


def in_order(writes: Iterable[QuotaStatusWrite]) -> tuple[list[QuotaStatusWrite], list[QuotaStatusWrite]]:
    """(the writes that take a quota off a node, the others): written in that order, no instant on
    the API counts a released quota and a bind that uses its room on one node (invariant 1)."""
    freeing: list[QuotaStatusWrite] = []
    rest: list[QuotaStatusWrite] = []
    for w in writes:
        (freeing if w.frees else rest).append(w)
    return freeing, rest


def after_freeing(
    rest: Iterable[QuotaStatusWrite], freeing: Iterable[QuotaStatusWrite], failed: Collection[str]
) -> tuple[list[QuotaStatusWrite], list[QuotaStatusWrite]]:
    """(the writes of ``rest`` that may go now, those that wait for the next cycle): a write that
    puts a quota on a node a ``failed`` freeing write was to free waits, and so do the other binds
    of its gang, and of a gang whose own move failed — so a failed release never leaves part of a
    gang bound by this cycle while the rest waits (that part would hold its nodes' room for a gang
    that cannot start: hop ③'s gang gate lets no pod through below minMember bound quotas)."""
    rest = list(rest)
    blocked = {w.frees for w in freeing if w.name in failed}
    held = {w.gang for w in rest if w.takes in blocked and w.gang}
    held |= {w.gang for w in freeing if w.name in failed and w.takes and w.gang}
    ready: list[QuotaStatusWrite] = []
    waiting: list[QuotaStatusWrite] = []
    for w in rest:
        wait = w.takes in blocked or bool(w.takes and w.gang in held)
        (waiting if wait else ready).append(w)
    return ready, waiting


def _claimants_job(quota: QuotaInfo) -> str:
    """The job whose tasks claim ``quota``, or "" when none or several jobs do."""
    jobs = {c.job for c in quota.claims.values()}
    return jobs.pop() if len(jobs) == 1 else ""


def _queue_to_keep(cache: ClusterCache, result: CycleResult, uid: str) -> str:
    """The queue to write down on a pod losing its claim, or "".

    A pod without a PodGroup and without a ``queue-name`` annotation belongs to the queue of the
    quota it names; once its claim is taken away it would fall into the default queue, where
    no quota of its own queue is ever offered to it again. So the queue it was in is written
    down with the removal (a PodGroup's job keeps its queue anyway)."""
    key = cache.task_job.get(uid)
    job = (result.jobs.get(key) or cache.jobs.get(key)) if key else None
    if job is None or job.has_podgroup or not job.queue:
        return ""
    obj = cache.pod(uid) or {}
    if ((obj.get("metadata") or {}).get("annotations") or {}).get(wellknown.ANNO_QUEUE_NAME):
        return ""
    return job.queue


def stamp(status: dict[str, Any], now: float, phase_changed: bool) -> dict[str, Any]:
    out = dict(status)
    if phase_changed:
        out["lastTransitionTime"] = format_time(now)
    return out
