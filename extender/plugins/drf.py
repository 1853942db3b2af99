"""``drf``: dominant-resource fairness — between queues (weighted) and between jobs.

A queue's share is the dominant share of what its tasks claim (hop ① is where a queue consumes
its quotas) divided by its weight; the queue with the smallest share goes first. Within a queue,
the job with the smallest dominant share of what it has *placed* goes first: tasks on a node, or
holding a quota bound to one (as Volcano's drf counts allocated tasks, not pending ones). A claim
alone does not count there — else every waiting gang's share would be its whole request and big
gangs would always wait behind small ones. Shares follow the statement's operations and undos as
they happen in the session.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, Final

from extender.framework.plugin import NoArgs
from extender.framework.session import Event, EventKind, Session
from extender.model.job import JobInfo, QueueInfo
from extender.model.resources import Resource
from extender.model.task import ALIVE, TaskInfo

NAME: Final = "drf"
Args = NoArgs


def dominant_share(used: Resource, total: Resource) -> float:
    share = 0.0
    for name, v in used.q.items():
        cap = total.get(name)
        if cap > 0 and v > 0:
            share = max(share, v / cap)
    return share


class Plugin:
    NAME: Final = NAME
    Args = Args
    STAGES: Final = frozenset({"job.order", "job.queue_order", "events"})
    EVENT_KINDS: Final = frozenset(
        {EventKind.CLAIM, EventKind.UNCLAIM, EventKind.BIND_QUOTA, EventKind.RELEASE_QUOTA, EventKind.ALLOCATE}
    )  # the statement events its handler follows

    def __init__(self, args: NoArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        shares = _Shares(ssn)
        return {"job.order": shares.job_order, "job.queue_order": shares.queue_order, "events": shares.on_event}


class _Shares:
    """One session's shares, counted when first read (sessions that never order jobs, like the
    webhook's, pay nothing). A queue's claims are then kept by the claim events (queues are
    ordered after every job while quotas are assigned); a job's placed share is dropped by any
    event that changes what the job has placed and counted again from its tasks when next read
    (a job is ordered once per action, while its binds come one event each)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.total = ssn.snap.cluster_total
        self.queue_used: defaultdict[str, Resource] | None = None  # None: not counted yet
        self.job_used: dict[str, Resource] = {}  # job → what it has placed (only jobs read since their last change)

    def queue_order(self, queue: QueueInfo) -> tuple[Any, ...]:
        used = self._queues()[queue.name]
        return (dominant_share(used, self.total) / max(queue.weight, 1),)

    def job_order(self, job: JobInfo) -> tuple[Any, ...]:
        used = self.job_used.get(job.key)
        if used is None:
            used = self.job_used[job.key] = self._placed_by(self.ssn.job(job.key) or job)
        return (dominant_share(used, self.total),)

    def on_event(self, ev: Event) -> None:
        ssn, kind = self.ssn, ev.kind
        if kind is EventKind.BIND_QUOTA or kind is EventKind.RELEASE_QUOTA:
            q = ssn.quota(ev.quota) if self.job_used else None
            for claim in q.claims.values() if q is not None else ():
                self.job_used.pop(claim.job, None)
            return
        task = ssn.task(ev.task)
        if task is None:
            return
        self.job_used.pop(task.job, None)
        # a queue holds what its tasks claim, and its quota-less (spot) tasks once placed
        holds = kind is EventKind.CLAIM or kind is EventKind.UNCLAIM or (kind is EventKind.ALLOCATE and not task.quota)
        if holds and self.queue_used is not None:
            owner = ssn.job(task.job)
            used = self.queue_used[owner.queue if owner is not None else ""]
            if (kind is not EventKind.UNCLAIM) != ev.undo:
                used.iadd(task.request)
            else:
                used.isub(task.request)

    def _queues(self) -> defaultdict[str, Resource]:
        """What each queue's alive tasks claim or hold (counted on first use)."""
        if self.queue_used is None:
            self.queue_used = defaultdict(Resource.empty)
            for job in self.ssn.jobs():
                for t in job.tasks.values():
                    if (t.quota or t.node) and t.status in ALIVE:
                        self.queue_used[job.queue].iadd(t.request)
        return self.queue_used

    def _placed_by(self, job: JobInfo) -> Resource:
        """What the job's alive tasks have placed: on a node, or holding a quota bound to one."""
        used = Resource.empty()
        for t in job.tasks.values():
            if t.status in ALIVE and self._placed(t):
                used.iadd(t.request)
        return used

    def _placed(self, task: TaskInfo) -> bool:
        if task.node:
            return True
        q = self.ssn.quota(task.quota) if task.quota else None
        return q is not None and bool(q.node_name)
