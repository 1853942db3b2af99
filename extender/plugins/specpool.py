"""``specpool``: multi-spec resource pools (seed 六 6.3).

A GPU model ("spec code", from node labels by the configured key list, longest key first) splits
quotas into pools that never mix: a task asking for a spec (through its nodeSelector) only claims
quotas of that spec, and a quota of a spec only lands on nodes of that spec (its nodeSelector
already says so; the select stage states it for quotas whose spec came from elsewhere). A queue's
``capability`` caps what its tasks claim in total. :func:`queue_usage` gives the per-queue,
per-spec usage the binder writes to ``Queue.status.specAllocated``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, Final

from extender.framework.plugin import NoArgs
from extender.framework.session import Event, EventKind, Session
from extender.framework.status import SUCCESS, Reason, Status
from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo
from extender.model.resources import Resource
from extender.model.task import TaskInfo

NAME: Final = "specpool"
Args = NoArgs


def quota_spec(ssn: Session, quota: QuotaInfo) -> str:
    if quota.node_name:
        node = ssn.node(quota.node_name)
        if node is not None:
            return node.spec
    return quota.spec


def queue_usage(ssn: Session) -> dict[str, dict[str, Resource]]:
    """queue → spec → Σ claims, from the session's current state."""
    out: defaultdict[str, defaultdict[str, Resource]] = defaultdict(lambda: defaultdict(Resource.empty))
    for q in ssn.quotas():
        if q.claims:
            out[q.queue][quota_spec(ssn, q)].iadd(q.allocated)
    return {k: dict(v) for k, v in out.items()}


class Plugin:
    NAME: Final = NAME
    Args = Args
    STAGES: Final = frozenset({"tq.predicate", "qn.select", "events"})
    EVENT_KINDS: Final = frozenset({EventKind.CLAIM, EventKind.UNCLAIM})  # the statement events its handler follows

    def __init__(self, args: NoArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        claims = _QueueClaims(ssn)
        return {"tq.predicate": claims.predicate_tq, "qn.select": select_qn, "events": claims.on_event}


def select_qn(quota: QuotaInfo, node: NodeInfo) -> Status:
    """A quota of a spec lands only on nodes of that spec."""
    if quota.spec and node.spec != quota.spec:
        have = node.spec or "no GPU model"
        return Status.unresolvable(Reason.SPEC_MISMATCH, f"node is {have}, quota is {quota.spec}")
    return SUCCESS


class _QueueClaims:
    """One session's claims per queue, for the capability check: counted on first use (most
    sessions never check a queue's capability), then kept by the claim events."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.claimed: defaultdict[str, Resource] = defaultdict(Resource.empty)
        self.ready = False

    def predicate_tq(self, task: TaskInfo, quota: QuotaInfo) -> Status:
        ssn = self.ssn
        if task.spec:
            have = quota_spec(ssn, quota)
            if have and have != task.spec:
                return Status.unresolvable(
                    Reason.QUOTA_SPEC_MISMATCH, f"quota {quota.name} is {have}, the pod asks for {task.spec}"
                )
        job = ssn.job(task.job)
        queue = ssn.snap.queues.get(job.queue) if job is not None else None
        if queue is not None and queue.capability is not None and task.uid not in quota.claims:
            self._ensure()
            after = self.claimed[queue.name] + task.request
            over = [n for n in queue.capability.q if after.get(n) > queue.capability.get(n)]
            if over:
                detail = ", ".join(f"{n} {after.get(n)} > {queue.capability.get(n)}" for n in sorted(over))
                return Status.unschedulable(Reason.INSUFFICIENT_QUOTA, f"queue {queue.name} capability: {detail}")
        return SUCCESS

    def on_event(self, ev: Event) -> None:
        if not self.ready or ev.kind not in (EventKind.CLAIM, EventKind.UNCLAIM):
            return
        task = self.ssn.task(ev.task)
        job = self.ssn.job(task.job) if task is not None else None
        if task is None or job is None:
            return
        if (ev.kind is EventKind.CLAIM) != ev.undo:
            self.claimed[job.queue].iadd(task.request)
        else:
            self.claimed[job.queue].isub(task.request)

    def _ensure(self) -> None:
        if self.ready:
            return
        self.ready = True
        for job in self.ssn.jobs():
            for t in job.alive_tasks():
                if t.quota:
                    self.claimed[job.queue].iadd(t.request)
