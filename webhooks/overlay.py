"""The session's view of one admission (hop ①): the cache snapshot overlaid with the admitted
task, its job, and the in-flight claims other admissions made that the cache has not seen yet
(:func:`overlay_snapshot`). Nothing of the cache is copied but what the admission changes:
:class:`Overlay` reads a base mapping through a small dict of replacements.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from extender import wellknown
from extender.cache.convert import ConvertOptions
from extender.framework.session import Snapshot
from extender.model.claimant import Claimant, replaces
from extender.model.job import JobInfo
from extender.model.quota import QuotaInfo, ReservedTask
from extender.model.task import TaskInfo, TaskStatus
from webhooks.inflight import InFlight

__all__ = ["Overlay", "overlay_snapshot"]

K = TypeVar("K")
V = TypeVar("V")


class Overlay(Mapping[K, V]):
    """``extra`` over ``base`` (the cache's dicts, never copied or mutated)."""

    __slots__ = ("base", "extra")

    def __init__(self, base: Mapping[K, V], extra: Mapping[K, V]) -> None:
        self.base = base
        self.extra = extra

    def __getitem__(self, key: K) -> V:
        v = self.extra.get(key)
        if v is not None:
            return v
        return self.base[key]

    def get(self, key: K, default: Any = None) -> Any:
        v = self.extra.get(key)
        if v is not None:
            return v
        return self.base.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.extra or key in self.base

    def __iter__(self) -> Iterator[K]:
        extra = self.extra
        yield from self.base
        for k in extra:
            if k not in self.base:
                yield k

    def __len__(self) -> int:
        return len(self.base) + sum(1 for k in self.extra if k not in self.base)


def _copy_job(job: JobInfo) -> JobInfo:
    """A shallow copy whose task dict may be extended (tasks themselves are shared, never mutated)."""
    return dataclasses.replace(job, tasks=dict(job.tasks))


def _job_of_one(key: str, namespace: str, queue: str, task: TaskInfo | None) -> JobInfo:
    """A job the cache does not know yet: a lone pod, or pods naming a PodGroup that does not exist
    (the cache's rule for such jobs: queue from the pod's ``queue-name`` annotation, else the default)."""
    return JobInfo(
        key=key,
        namespace=namespace,
        name=key.split("/", 1)[1],
        queue=queue,
        min_member=1,
        priority=task.priority if task is not None else 0,
        priority_class=task.priority_class if task is not None else "",
        has_podgroup=False,
        podgroup_missing=task is not None and task.names_group,
        labels=task.labels if task is not None else {},
        created=task.created if task is not None else 0.0,
    )


def overlay_snapshot(
    snap: Snapshot,
    task: TaskInfo,
    live: list[InFlight],
    exclude: tuple[str, str] | None,
    opts: ConvertOptions,
) -> Snapshot:
    """The snapshot with the admitted task in its job and the in-flight entries as claims."""
    jobs: dict[str, JobInfo] = {}
    task_job: dict[str, str] = {task.uid: task.job}
    base = snap.jobs.get(task.job)
    if base is not None:
        job = _copy_job(base)
    else:
        queue = task.annotations.get(wellknown.ANNO_QUEUE_NAME) or opts.default_queue
        job = _job_of_one(task.job, task.namespace, queue, task)
    job.tasks[task.uid] = task
    jobs[job.key] = job
    quotas: dict[str, QuotaInfo] = {}
    _replace_predecessors(snap, task, job, quotas)
    for e in live:
        if exclude is not None and e.quota == exclude[0] and e.fingerprint == exclude[1]:
            continue  # this very pod, admitted before (a re-invocation): not a competitor
        q = quotas.get(e.quota)
        if q is None:
            cached = snap.quotas.get(e.quota)
            if cached is None:
                continue
            q = quotas[e.quota] = cached.clone()
        claim = e.claim(q)
        q.restore_claim(claim)  # through the quota: its claims are shared with the cache's copy
        j = jobs.get(e.job)
        if j is None:
            cached_job = snap.jobs.get(e.job)
            j = _copy_job(cached_job) if cached_job is not None else _job_of_one(e.job, e.namespace, e.queue, None)
            jobs[e.job] = j
        j.tasks[claim.uid] = TaskInfo(
            uid=claim.uid,
            namespace=e.namespace,
            name=e.name,
            job=e.job,
            request=e.request,
            status=TaskStatus.ALLOCATED_TO_QUOTA,
            index=e.index,
            quota=e.quota,
            created=e.created,
        )
        task_job[claim.uid] = e.job
    return dataclasses.replace(
        snap,
        quotas=Overlay(snap.quotas, quotas) if quotas else snap.quotas,
        jobs=Overlay(snap.jobs, jobs),
        task_job=Overlay(snap.task_job, task_job),
        # the cache's change indices do not know the overlay: "unknown, look at everything"
        pending_jobs=None,
        changed_quotas=None,
        release_candidates=None,
    )


def _replace_predecessors(snap: Snapshot, task: TaskInfo, job: JobInfo, quotas: dict[str, QuotaInfo]) -> None:
    """Pods of the job that ``task`` replaces (same task index or name: recreated before the old
    pod's deletion reached the cache) leave the overlay's job, and their claims become
    reservations for ``task``: the reserved tier then offers it the old pod's quota, whose room
    the old claim no longer takes away (extender.cache.claims.replaces)."""
    me = Claimant(task.namespace, task.name, task.job, task.index, task.inherit_from)
    for t in list(job.tasks.values()):
        if t.uid == task.uid or not t.quota or not replaces(me, Claimant(t.namespace, t.name, t.job, t.index)):
            continue
        del job.tasks[t.uid]
        q = quotas.get(t.quota)
        if q is None:
            cached = snap.quotas.get(t.quota)
            if cached is None or t.uid not in cached.claims:
                continue
            q = quotas[t.quota] = cached.clone()
        if t.uid not in q.claims:
            continue
        claim = q.remove_claim(t.uid)
        q.reserved = (
            *q.reserved,
            ReservedTask(
                job=t.job,
                index=t.index,
                namespace=t.namespace,
                pod_name=t.name,
                pod_uid=t.uid,
                reason="Deleted",
                expires_at=snap.now + 3600.0,
                request=claim.request,
            ),
        )
