"""Jobs: pods grouped by ``scheduling.k8s.io/group-name`` with their PodGroup's settings, and
the events of the objects jobs are scheduled by (PodGroup, Queue, JobQueue).

A pod without a group is a job of one. A job's attributes (:func:`refresh_job`) come from its
PodGroup when it has one, else from its first pod (a lone pod's queue: its annotation, else the
queue of the quota it names, else the default queue); pods' annotations can still switch
topology on or off and name an affinity key; its phase follows its pods. A job exists while it
has pods or a PodGroup; a job whose PodGroup is deleted keeps no reservation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from extender import wellknown
from extender.cache import convert_crds, reservations
from extender.cache.convert import ConversionError
from extender.cache.meta import Obj, name_of
from extender.cache.tierlimit import TierLimit, job_tier_limit, pod_tier_limit
from extender.model.claimant import Claimant, replaces
from extender.model.job import JobInfo, JobPhase
from extender.model.task import ON_NODE, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from extender.cache.cache import ClusterCache

__all__ = [
    "has_successor",
    "new_job",
    "on_jobqueue_add",
    "on_jobqueue_delete",
    "on_podgroup_add",
    "on_podgroup_delete",
    "on_queue_add",
    "on_queue_delete",
    "refresh_job",
]


def on_podgroup_add(cache: ClusterCache, obj: Obj) -> None:
    what = f"PodGroup/{(obj.get('metadata') or {}).get('namespace')}/{name_of(obj)}"
    try:
        pg = convert_crds.podgroup_from_api(obj, cache.opts)
    except (ConversionError, ValueError) as exc:
        cache._error(what, exc)
        return
    cache._ok(what)
    cache._podgroups[pg.key] = pg
    cache._podgroup_objs[pg.key] = obj
    if pg.recorded_hold is not None:
        cache.recorded_holds[pg.key] = pg.recorded_hold
    else:
        cache.recorded_holds.pop(pg.key, None)
    job = cache.jobs.get(pg.key) or new_job(cache, pg.key, pg.namespace)
    refresh_job(cache, job)
    cache._bump()


def on_podgroup_delete(cache: ClusterCache, obj: Obj) -> None:
    meta = obj.get("metadata") or {}
    key = f"{meta.get('namespace') or 'default'}/{name_of(obj)}"
    cache._podgroups.pop(key, None)
    cache._podgroup_objs.pop(key, None)
    cache.recorded_holds.pop(key, None)
    job = cache.jobs.get(key)
    if job is not None:
        if not job.tasks:
            del cache.jobs[key]
            cache.changed_jobs.add(key)
            cache.pending_jobs.discard(key)
        else:
            refresh_job(cache, job)
    reservations.forget_jobs(cache, {key})
    cache._bump()


def new_job(cache: ClusterCache, key: str, namespace: str) -> JobInfo:
    job = JobInfo(key=key, namespace=namespace, name=key.split("/", 1)[1])
    cache.jobs[key] = job
    return job


def has_successor(job: JobInfo, task: TaskInfo) -> bool:
    """A live pod of ``job`` already replaces ``task`` (recreated before its deletion was seen):
    no place needs keeping for it."""
    old = Claimant(task.namespace, task.name, task.job, task.index)
    for t in job.tasks.values():
        if t.uid == task.uid or not t.is_alive():
            continue
        if replaces(Claimant(t.namespace, t.name, t.job, t.index, t.inherit_from), old):
            return True
    return False


def _pod_tier_limit(cache: ClusterCache, task: TaskInfo) -> TierLimit | None:
    """The tier limit a pod's annotations name (task_from_api checked them already)."""
    try:
        return pod_tier_limit(task.annotations, cache.opts.tier_labels)
    except ValueError:
        return None


def refresh_job(cache: ClusterCache, job: JobInfo) -> None:
    """Job attributes from its PodGroup (if any) and its pods."""
    cache.changed_jobs.add(job.key)
    pg = cache._podgroups.get(job.key)
    tasks = list(job.tasks.values())
    if pg is not None:
        job.has_podgroup = True
        job.min_member = pg.min_member
        job.queue = pg.queue
        job.priority_class = pg.priority_class
        job.labels = pg.labels
        job.created = pg.created
        job.topology_override = pg.topology_enabled
        job.strict_order = pg.strict_order
        job.affinity_key = pg.affinity_key
        job.resource_version = pg.resource_version
        pg_limit = pg.tier_limit
    else:
        job.has_podgroup = False
        job.min_member = 1
        first = tasks[0] if tasks else None
        # a lone pod's queue: its annotation, else the queue of the quota it names, else default
        named = first.annotations.get(wellknown.ANNO_QUOTA_NAME, "") if first else ""
        claimed = cache.quotas.get(named) if named else None
        job.queue = (
            (first.annotations.get(wellknown.ANNO_QUEUE_NAME) if first else None)
            or (claimed.queue if claimed is not None else None)
            or cache.opts.default_queue
        )
        job.labels = first.labels if first else {}
        job.created = min((t.created for t in tasks), default=0.0)
        job.topology_override = None
        job.strict_order = False
        job.affinity_key = ""
        pg_limit = None
    limit = job_tier_limit(pg_limit, (_pod_tier_limit(cache, t) for t in tasks if t.is_alive()))
    job.highest_tier = limit.level if limit is not None else None
    job.tier_mode = limit.mode if limit is not None else "soft"
    # pod annotations can switch topology on/off and name an affinity key
    for t in tasks:
        flag = t.annotations.get(wellknown.ANNO_ENABLE_TOPOLOGY)
        if flag in ("true", "false"):
            job.topology_override = flag == "true"
            job.strict_order = job.strict_order or flag == "true"
        key = t.annotations.get(wellknown.ANNO_TOPOLOGY_AFFINITY_KEY)
        if key:
            job.affinity_key = key
    job.podgroup_missing = pg is None and any(t.names_group for t in tasks)
    if any(t.is_alive() and not t.spot and not (t.node and t.status in ON_NODE) for t in tasks):
        cache.pending_jobs.add(job.key)
    else:
        cache.pending_jobs.discard(job.key)
    job.priority = max((t.priority for t in tasks), default=0)
    alive = [t for t in tasks if t.is_alive()]
    if tasks and all(t.status is TaskStatus.SUCCEEDED for t in tasks):
        job.phase = JobPhase.COMPLETED
    elif alive and sum(1 for t in alive if t.status is TaskStatus.RUNNING) >= job.min_member:
        job.phase = JobPhase.RUNNING
    elif any(t.quota for t in alive):
        job.phase = JobPhase.INQUEUE
    else:
        job.phase = JobPhase.PENDING


def on_queue_add(cache: ClusterCache, obj: Obj) -> None:
    try:
        q = convert_crds.queue_from_api(obj, cache.opts)
    except (ConversionError, ValueError) as exc:
        cache._error(f"Queue/{name_of(obj)}", exc)
        return
    cache.queues[q.name] = q
    cache._queue_objs[q.name] = obj
    cache._bump()


def on_queue_delete(cache: ClusterCache, obj: Obj) -> None:
    cache.queues.pop(name_of(obj), None)
    cache._queue_objs.pop(name_of(obj), None)
    cache._bump()


def on_jobqueue_add(cache: ClusterCache, obj: Obj) -> None:
    try:
        q = convert_crds.jobqueue_from_api(obj, cache.opts)
    except (ConversionError, ValueError) as exc:
        cache._error(f"JobQueue/{name_of(obj)}", exc)
        return
    cache.jobqueues[q.name] = q
    cache._jobqueue_objs[q.name] = obj
    cache._bump()


def on_jobqueue_delete(cache: ClusterCache, obj: Obj) -> None:
    cache.jobqueues.pop(name_of(obj), None)
    cache._jobqueue_objs.pop(name_of(obj), None)
    cache._bump()
