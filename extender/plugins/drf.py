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
    """One session's shares: what each queue claims and each job has placed. Counted on first use
    (sessions that never order jobs, like the webhook's, pay nothing), then kept by the events."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.total = ssn.snap.cluster_total
        self.queue_used: defaultdict[str, Resource] = defaultdict(Resource.empty)
        self.job_used: defaultdict[str, Resource] = defaultdict(Resource.empty)
        self.ready = False

    def queue_order(self, queue: QueueInfo) -> tuple[Any, ...]:
        self._ensure()
        return (dominant_share(self.queue_used[queue.name], self.total) / max(queue.weight, 1),)

    def job_order(self, job: JobInfo) -> tuple[Any, ...]:
        self._ensure()
        return (dominant_share(self.job_used[job.key], self.total),)

    def on_event(self, ev: Event) -> None:
        if not self.ready:
            return
        ssn, kind = self.ssn, ev.kind
        gained = (kind in (EventKind.CLAIM, EventKind.BIND_QUOTA, EventKind.ALLOCATE)) != ev.undo
        if kind is EventKind.CLAIM or kind is EventKind.UNCLAIM:
            task = ssn.task(ev.task)
            if task is not None:
                q = ssn.quota(ev.quota)
                self._follow(task, gained, queue=True, job=q is not None and bool(q.node_name) and not task.node)
        elif kind is EventKind.BIND_QUOTA or kind is EventKind.RELEASE_QUOTA:
            q = ssn.quota(ev.quota)
            for uid in q.claims if q is not None else ():
                task = ssn.task(uid)
                if task is not None and not task.node:
                    self._follow(task, gained, queue=False, job=True)
        elif kind is EventKind.ALLOCATE:
            task = ssn.task(ev.task)
            if task is not None and not task.quota:  # a quota-less (spot) task: now placed
                self._follow(task, gained, queue=False, job=True)

    def _ensure(self) -> None:
        if self.ready:
            return
        self.ready = True
        for job in self.ssn.jobs():
            claimed: Resource | None = None
            for t in job.tasks.values():
                if (t.quota or t.node) and t.status in ALIVE:
                    if claimed is None:
                        claimed = self.queue_used[job.queue]
                    claimed.iadd(t.request)
                    if self._placed(t):
                        self.job_used[job.key].iadd(t.request)

    def _placed(self, task: TaskInfo) -> bool:
        if task.node:
            return True
        q = self.ssn.quota(task.quota) if task.quota else None
        return q is not None and bool(q.node_name)

    def _follow(self, task: TaskInfo, gained: bool, *, queue: bool, job: bool) -> None:
        if queue:
            owner = self.ssn.job(task.job)
            used = self.queue_used[owner.queue if owner is not None else ""]
            (used.iadd if gained else used.isub)(task.request)
        if job:
            used = self.job_used[task.job]
            (used.iadd if gained else used.isub)(task.request)
