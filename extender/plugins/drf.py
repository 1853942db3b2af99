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
        total = ssn.snap.cluster_total
        # computed on first use (sessions that never order jobs, like the webhook's, pay nothing)
        queue_used: defaultdict[str, Resource] = defaultdict(Resource.empty)
        job_used: defaultdict[str, Resource] = defaultdict(Resource.empty)
        ready = False

        def placed(task: TaskInfo) -> bool:
            if task.node:
                return True
            q = ssn.quota(task.quota) if task.quota else None
            return q is not None and bool(q.node_name)

        def ensure() -> None:
            nonlocal ready
            if ready:
                return
            ready = True
            for job in ssn.jobs():
                claimed: Resource | None = None
                for t in job.tasks.values():
                    if (t.quota or t.node) and t.status in ALIVE:
                        if claimed is None:
                            claimed = queue_used[job.queue]
                        claimed.iadd(t.request)
                        if placed(t):
                            job_used[job.key].iadd(t.request)

        def queue_order(queue: QueueInfo) -> tuple[Any, ...]:
            ensure()
            return (dominant_share(queue_used[queue.name], total) / max(queue.weight, 1),)

        def order(job: JobInfo) -> tuple[Any, ...]:
            ensure()
            return (dominant_share(job_used[job.key], total),)

        def follow(task: TaskInfo, gained: bool, *, queue: bool, job: bool) -> None:
            owner = ssn.job(task.job)
            if queue:
                used = queue_used[owner.queue if owner is not None else ""]
                (used.iadd if gained else used.isub)(task.request)
            if job:
                used = job_used[task.job]
                (used.iadd if gained else used.isub)(task.request)

        def on_event(ev: Event) -> None:
            if not ready:
                return
            kind = ev.kind
            gained = kind in (EventKind.CLAIM, EventKind.BIND_QUOTA, EventKind.ALLOCATE)
            gained = gained != ev.undo
            if kind is EventKind.CLAIM or kind is EventKind.UNCLAIM:
                task = ssn.task(ev.task)
                if task is not None:
                    q = ssn.quota(ev.quota)
                    follow(task, gained, queue=True, job=q is not None and bool(q.node_name) and not task.node)
            elif kind is EventKind.BIND_QUOTA or kind is EventKind.RELEASE_QUOTA:
                q = ssn.quota(ev.quota)
                for uid in q.claims if q is not None else ():
                    task = ssn.task(uid)
                    if task is not None and not task.node:
                        follow(task, gained, queue=False, job=True)
            elif kind is EventKind.ALLOCATE:
                task = ssn.task(ev.task)
                if task is not None and not task.quota:  # a quota-less (spot) task: now placed
                    follow(task, gained, queue=False, job=True)

        return {"job.order": order, "job.queue_order": queue_order, "events": on_event}
