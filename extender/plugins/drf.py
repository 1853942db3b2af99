"""``drf``: dominant-resource fairness — between queues (weighted) and between jobs.

A queue's share is the dominant share of what its tasks claim (hop ① is where a queue consumes
its quotas) divided by its weight; the queue with the smallest share goes first. Within a queue,
the job with the smallest dominant share goes first. Shares follow the statement's claims and
undos as they happen in the session.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, Final

from extender.framework.plugin import NoArgs
from extender.framework.session import Event, EventKind, Session
from extender.model.job import JobInfo, QueueInfo
from extender.model.resources import Resource
from extender.model.task import ALIVE

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
    EVENT_KINDS: Final = frozenset({EventKind.CLAIM, EventKind.UNCLAIM})  # the statement events its handler follows

    def __init__(self, args: NoArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        total = ssn.snap.cluster_total
        # computed on first use (sessions that never order jobs, like the webhook's, pay nothing)
        queue_used: defaultdict[str, Resource] = defaultdict(Resource.empty)
        job_used: defaultdict[str, Resource] = defaultdict(Resource.empty)
        ready = False

        def ensure() -> None:
            nonlocal ready
            if ready:
                return
            ready = True
            for job in ssn.jobs():
                used: Resource | None = None
                for t in job.tasks.values():
                    if (t.quota or t.node) and t.status in ALIVE:
                        if used is None:
                            used = job_used[job.key]
                        used.iadd(t.request)
                if used is not None:
                    queue_used[job.queue].iadd(used)

        def queue_order(queue: QueueInfo) -> tuple[Any, ...]:
            ensure()
            return (dominant_share(queue_used[queue.name], total) / max(queue.weight, 1),)

        def order(job: JobInfo) -> tuple[Any, ...]:
            ensure()
            return (dominant_share(job_used[job.key], total),)

        def on_event(ev: Event) -> None:
            if not ready or ev.kind not in (EventKind.CLAIM, EventKind.UNCLAIM):
                return
            task = ssn.task(ev.task)
            if task is None:
                return
            job = ssn.job(task.job)
            queue = job.queue if job is not None else ""
            gained = (ev.kind is EventKind.CLAIM) != ev.undo
            if gained:
                job_used[task.job].iadd(task.request)
                queue_used[queue].iadd(task.request)
            else:
                job_used[task.job].isub(task.request)
                queue_used[queue].isub(task.request)

        return {"job.order": order, "job.queue_order": queue_order, "events": on_event}
