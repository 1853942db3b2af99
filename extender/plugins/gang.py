"""``gang``: a job moves only when at least ``minMember`` of its tasks can move together.

* ``job.valid``: at least minMember tasks exist (the rest of the gang may not be created yet).
* ``job.tq_ready``: after hop ①, at least minMember tasks hold a quota (else the new claims are
  discarded, so half a gang never sits on quotas another job could use).
* ``job.quota_allocate``: after hop ②, at least minMember tasks have their quota bound — the
  seed's ``QuotaReady`` half of the commit gate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from extender.framework.plugin import NoArgs
from extender.framework.session import Session
from extender.framework.status import SUCCESS, Prefixed, Reason, Status
from extender.model.job import JobInfo
from extender.model.task import ALIVE, TaskStatus

NAME: Final = "gang"
_SUCCEEDED: Final = TaskStatus.SUCCEEDED  # read per task: a module name (enum reads are slow on 3.11)
Args = NoArgs


def quotas_bound(ssn: Session, job: JobInfo, *, written: bool = False) -> int:
    """Tasks that finished, or whose claimed quota is bound (in this session's view; with
    ``written``, only bindings the API shows, not those whose write is in flight)."""
    n = 0
    for t in job.tasks.values():
        if t.status is _SUCCEEDED:
            n += 1
        elif t.quota and t.status in ALIVE:
            q = ssn.quota(t.quota)
            if q is not None and q.node_name and not (written and q.in_flight):
                n += 1
    return n


def part_running(ssn: Session, job: JobInfo, why: Status) -> Status:
    """``why`` the rest of ``job`` waits, told after how much of it runs when the job runs (at
    least ``minMember`` of its tasks finished or on a bound quota, :func:`quotas_bound`) but not
    whole: ``placed 3 of 4 (minMember 2); 1 waits: NoZoneFits(…)``. A job short of its
    ``minMember`` is told ``why`` alone: it is waiting, not running."""
    placed = quotas_bound(ssn, job)
    size = sum(1 for t in job.tasks.values() if not t.spot and (t.status is _SUCCEEDED or t.status in ALIVE))
    if placed < job.min_member or placed >= size:
        return why
    waiting = size - placed
    verb = "waits" if waiting == 1 else "wait"
    return Prefixed.of(why, f"placed {placed} of {size} (minMember {job.min_member}); {waiting} {verb}")


def quotas_held(job: JobInfo) -> int:
    return sum(1 for t in job.tasks.values() if t.status is _SUCCEEDED or (t.quota and t.status in ALIVE))


def can_allocate_zone(job: JobInfo) -> bool:
    """The seed's ``canAllocateZone``: every task of the gang holds a quota — or, for a gang whose
    ``minMember`` is below its size, at least ``minMember`` of them do (finished tasks count), as
    the gang gate of hop ① lets such a gang through with a quota for only that many."""
    tasks = [t for t in job.alive_tasks() if not t.spot]
    if not job.topology or not tasks:
        return False
    holding = sum(1 for t in tasks if t.quota)
    return holding > 0 and (holding == len(tasks) or quotas_held(job) >= job.min_member)


class Plugin:
    NAME: Final = NAME
    Args = Args
    STAGES: Final = frozenset({"job.valid", "job.tq_ready", "job.quota_allocate"})

    def __init__(self, args: NoArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        def valid(job: JobInfo) -> Status:
            if job.podgroup_missing:
                return Status.unschedulable(Reason.GANG_NOT_READY, f"PodGroup {job.key} not found")
            n = sum(1 for t in job.tasks.values() if t.status in ALIVE or t.status is _SUCCEEDED)
            if n < job.min_member:
                return Status.unschedulable(Reason.GANG_NOT_READY, f"{n}/{job.min_member} pods exist")
            return SUCCESS

        def tq_ready(job: JobInfo) -> Status:
            n = quotas_held(job)
            if n < job.min_member:
                return Status.unschedulable(Reason.WAITING_FOR_GANG, f"{n}/{job.min_member} tasks hold quotas")
            return SUCCESS

        def quota_allocate(job: JobInfo) -> Status:
            n = quotas_bound(ssn, job)
            if n < job.min_member:
                return Status.unschedulable(Reason.WAITING_FOR_GANG, f"{n}/{job.min_member} quotas bound")
            return SUCCESS

        return {"job.valid": valid, "job.tq_ready": tq_ready, "job.quota_allocate": quota_allocate}
