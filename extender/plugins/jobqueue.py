"""``jobqueue``: admission through JobQueues (priority sub-queues) and Queue state.

A job is matched by the highest-priority JobQueue whose selector selects it. A job not yet
admitted (no task holds a quota) may enter only if that JobQueue is Open and below its
``maxRunningJobs``; otherwise it is blocked with ``JobBlockedByJobQueue``. Jobs of a closed
Queue wait with ``QueueClosed``. Admitted jobs are never blocked again. Jobs are ordered by their
JobQueue's priority.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from extender.framework.plugin import NoArgs
from extender.framework.session import Event, EventKind, Session
from extender.framework.status import SUCCESS, Reason, Status
from extender.model.job import JobInfo, JobQueueInfo

NAME: Final = "jobqueue"
Args = NoArgs


def admitted(job: JobInfo) -> bool:
    return any(t.quota or t.node for t in job.alive_tasks())


class Plugin:
    NAME: Final = NAME
    Args = Args
    STAGES: Final = frozenset({"job.enqueueable", "job.order", "events"})
    EVENT_KINDS: Final = frozenset(
        {EventKind.CLAIM, EventKind.UNCLAIM, EventKind.ALLOCATE}
    )  # the statement events its handler follows

    def __init__(self, args: NoArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        jqs = sorted(ssn.snap.jobqueues.values(), key=lambda q: (-q.priority, q.name))
        match: dict[str, JobQueueInfo | None] = {}

        def governing(job: JobInfo) -> JobQueueInfo | None:
            if job.key not in match:
                match[job.key] = next((q for q in jqs if q.selects(job)), None)
            return match[job.key]

        running: dict[str, set[str]] = {q.name: set() for q in jqs}
        ready = False

        def ensure() -> None:  # counted on first use only
            nonlocal ready
            if ready:
                return
            ready = True
            for job in ssn.jobs():
                q = governing(job)
                if q is not None and admitted(job):
                    running[q.name].add(job.key)

        def enqueueable(job: JobInfo) -> Status:
            queue = ssn.snap.queues.get(job.queue)
            if queue is not None and not queue.open and not admitted(job):
                return Status.unschedulable(Reason.QUEUE_CLOSED, f"queue {job.queue} is closed")
            q = governing(job)
            if q is None or admitted(job):
                return SUCCESS
            if not q.open:
                return Status.unschedulable(Reason.JOB_BLOCKED_BY_JOB_QUEUE, f"jobqueue {q.name} is closed")
            ensure()
            if q.max_running is not None and len(running[q.name]) >= q.max_running:
                return Status.unschedulable(
                    Reason.JOB_BLOCKED_BY_JOB_QUEUE,
                    f"jobqueue {q.name} is full ({len(running[q.name])}/{q.max_running} jobs running)",
                )
            return SUCCESS

        def order(job: JobInfo) -> tuple[Any, ...]:
            q = governing(job)
            return (-(q.priority if q is not None else 0),)

        def on_event(ev: Event) -> None:
            # admission depends on claims and on placements (admitted(): a task with a quota or a node)
            if not ready or ev.kind not in (EventKind.CLAIM, EventKind.UNCLAIM, EventKind.ALLOCATE):
                return
            task = ssn.task(ev.task)
            job = ssn.job(task.job) if task is not None else None
            if job is None:
                return
            q = governing(job)
            if q is None:
                return
            if admitted(job):
                running[q.name].add(job.key)
            else:
                running[q.name].discard(job.key)

        return {"job.enqueueable": enqueueable, "job.order": order, "events": on_event}
