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
from extender.model.job import JobInfo, JobQueueInfo, by_precedence, governing_jobqueue

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
        jq = _JobQueues(ssn)
        return {"job.enqueueable": jq.enqueueable, "job.order": jq.order, "events": jq.on_event}


class _JobQueues:
    """One session's JobQueues: which governs each job (matched on first ask) and which admitted
    jobs each runs (counted on first use, then kept by the events)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.jqs = by_precedence(ssn.snap.jobqueues.values())
        self.match: dict[str, JobQueueInfo | None] = {}
        self.running: dict[str, set[str]] = {q.name: set() for q in self.jqs}
        self.ready = False

    def governing(self, job: JobInfo) -> JobQueueInfo | None:
        if job.key not in self.match:
            self.match[job.key] = governing_jobqueue(job, self.jqs)
        return self.match[job.key]

    def enqueueable(self, job: JobInfo) -> Status:
        queue = self.ssn.snap.queues.get(job.queue)
        if queue is not None and not queue.open and not admitted(job):
            return Status.unschedulable(Reason.QUEUE_CLOSED, f"queue {job.queue} is closed")
        q = self.governing(job)
        if q is None or admitted(job):
            return SUCCESS
        if not q.open:
            return Status.unschedulable(Reason.JOB_BLOCKED_BY_JOB_QUEUE, f"jobqueue {q.name} is closed")
        self._ensure()
        running = self.running[q.name]
        if q.max_running is not None and len(running) >= q.max_running:
            full = f"jobqueue {q.name} is full ({len(running)}/{q.max_running} jobs running)"
            return Status.unschedulable(Reason.JOB_BLOCKED_BY_JOB_QUEUE, full)
        return SUCCESS

    def order(self, job: JobInfo) -> tuple[Any, ...]:
        q = self.governing(job)
        return (-(q.priority if q is not None else 0),)

    def on_event(self, ev: Event) -> None:
        # admission depends on claims and on placements (admitted(): a task with a quota or a node)
        if not self.ready or ev.kind not in (EventKind.CLAIM, EventKind.UNCLAIM, EventKind.ALLOCATE):
            return
        task = self.ssn.task(ev.task)
        job = self.ssn.job(task.job) if task is not None else None
        q = self.governing(job) if job is not None else None
        if job is None or q is None:
            return
        if admitted(job):
            self.running[q.name].add(job.key)
        else:
            self.running[q.name].discard(job.key)

    def _ensure(self) -> None:  # counted on first use only
        if self.ready:
            return
        self.ready = True
        for job in self.ssn.jobs():
            q = self.governing(job)
            if q is not None and admitted(job):
                self.running[q.name].add(job.key)
