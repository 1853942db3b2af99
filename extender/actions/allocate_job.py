"""``allocate_job`` — hop ①, task → quota, in the loop (seed 2.2, 2.4, 五).

The webhook gives most pods their quota at admission; this action makes the claims right:

1. **Re-validate** every claim. A quota whose claims exceed ``request + shadow`` (two webhook
   replicas raced, or the quota shrank) keeps its placed tasks and its earliest claims; later
   pending claims lose (invariant 3). A pending task whose claim no longer passes the TQ filters
   for a reason that will not go away (queue, pod→quota affinity, spec) loses it too. Losers'
   annotations are removed, and they are re-assigned below in the same cycle.
2. **Assign** quotas to pending tasks without one (webhook down, nothing free at admission, a
   job released by its JobQueue), job by job — queues by fair share, jobs by priority — through
   the TQ pipeline (the tiers: reserved > bound/static > free). A gang's new claims are
   committed only if at least ``minMember`` tasks then hold quotas (``job.tq_ready``).
"""

from __future__ import annotations

from typing import Final

from extender.framework.ordering import ordered_jobs
from extender.framework.pipeline import place
from extender.framework.plugin import NoArgs
from extender.framework.session import FitStage, Session
from extender.framework.status import Code, Reason, Status
from extender.model.claimant import Claimant, replaces
from extender.model.job import JobInfo
from extender.model.quota import QuotaClaim, QuotaInfo
from extender.model.task import TaskInfo, TaskStatus

NAME: Final = "allocate_job"
Args = NoArgs

_PLACED: Final = frozenset({TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.RELEASING})


def queue_not_found(ssn: Session, queue: str) -> Status | None:
    """``QueueNotFound`` when nothing of ``queue`` exists — no Queue object and no quota serving
    it (a typo in the PodGroup's queue, a queue deleted); None when it exists, so that a task of
    it finding no quota is told ``NoQuota`` (its quotas are all taken)."""
    if queue in ssn.snap.queues or next(ssn.quotas_of_queue(queue), None) is not None:
        return None
    return Status.unschedulable(
        Reason.QUEUE_NOT_FOUND, f"queue {queue or '(none)'} does not exist: no Queue, no quota of it"
    )


def _to_revalidate(ssn: Session) -> list[QuotaInfo]:
    """Every quota on the first cycle; afterwards those that changed since the previous cycle and
    those claimed by tasks still pending (the only claims that can move)."""
    changed = ssn.snap.changed_quotas
    if changed is None:
        return list(ssn.quotas())
    names = set(changed)
    for job in ssn.pending_jobs():
        names.update(t.quota for t in job.tasks.values() if t.quota and not t.node)
    return [q for q in (ssn.quota(n) for n in sorted(names)) if q is not None]


def has_room(quota: QuotaInfo) -> bool:
    """Cheap pre-filter: something is left of ``request + shadow`` (the TQ predicate decides)."""
    cap = quota.capacity
    return any(v > quota.allocated.get(k) for k, v in cap.q.items())


def wants_quota(task: TaskInfo) -> bool:
    return task.status is TaskStatus.PENDING and not task.quota and not task.node and not task.spot


def _superseded(ssn: Session, claim: QuotaClaim) -> bool:
    """The claim's pod has a newer pod of its job that replaces it (same task index or name,
    recreated before the old pod's deletion was seen): the two hold one place, not two."""
    job = ssn.job(claim.job)
    if job is None:
        return False
    old = Claimant(claim.namespace, claim.name, claim.job, claim.index)
    for t in job.tasks.values():
        if t.uid == claim.uid or not t.is_alive() or t.created < claim.created:
            continue
        if replaces(Claimant(t.namespace, t.name, t.job, t.index, t.inherit_from), old):
            return True
    return False


class Action:
    NAME: Final = NAME
    Args = NoArgs

    def __init__(self, args: NoArgs) -> None:
        self.args = args

    def execute(self, ssn: Session) -> None:
        self.revalidate(ssn)
        jobs = [j for j in ssn.pending_jobs() if any(map(wants_quota, j.tasks.values()))]
        for job in ordered_jobs(ssn, jobs):
            self.allocate(ssn, job)

    # --- 1. re-validation ------------------------------------------------------------------
    def revalidate(self, ssn: Session) -> None:
        losers: list[tuple[str, str]] = []
        select, predicate = ssn.tq.select, ssn.tq.predicate
        for quota in _to_revalidate(ssn):
            if not quota.claims:
                continue
            excess = quota.over_claimed()
            if excess:
                why = Status.unschedulable(
                    Reason.INSUFFICIENT_QUOTA,
                    f"quota {quota.name} is over-claimed ({', '.join(map(str, excess))}); a later claim lost it",
                ).message()
                losers.extend((uid, why) for uid in self._over_claim_losers(ssn, quota))
            for uid in quota.claims:
                task = ssn.task(uid)
                if task is None or task.status is not TaskStatus.ALLOCATED_TO_QUOTA or task.node:
                    continue
                status = select(task, quota)
                if status.ok:
                    status = predicate(task, quota)
                if status.code >= Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    losers.append((uid, status.message()))
        if not losers:
            return
        stmt = ssn.statement()
        seen: set[str] = set()
        for uid, why in losers:
            if uid in seen:
                continue
            seen.add(uid)
            stmt.unclaim(uid, why)
        stmt.commit()

    @staticmethod
    def _over_claim_losers(ssn: Session, quota: QuotaInfo) -> list[str]:
        """Pending claims to drop, latest first, until the rest fit ``request + shadow``."""
        claims = list(quota.claims.values())

        def keep_rank(c: QuotaClaim) -> tuple[int, int, float, str]:
            t = ssn.task(c.uid)
            placed = t is not None and (t.status in _PLACED or bool(t.node))
            named = t is not None and t.required_quota == quota.name  # the creator's choice: lost last
            return (0 if placed else 1, 0 if named else 1, c.created, c.name)

        claims.sort(key=keep_rank)
        capacity = quota.capacity
        total = quota.allocated.clone()
        for c in claims:
            if _superseded(ssn, c):
                total.isub(c.request)  # its pod was recreated: the new pod's claim takes its room
        losers: list[str] = []
        for c in reversed(claims):
            if total.less_equal(capacity):
                break
            t = ssn.task(c.uid)
            if t is None or t.status is not TaskStatus.ALLOCATED_TO_QUOTA or t.node:
                continue  # placed tasks are facts, never moved
            total.isub(c.request)
            losers.append(c.uid)
        return losers

    # --- 2. assignment ---------------------------------------------------------------------
    def allocate(self, ssn: Session, job: JobInfo) -> None:
        status = ssn.stages.valid(job)
        if not status.ok:
            ssn.verdict(job.key, FitStage.JOB_QUEUE if status.reason is Reason.BACKOFF else FitStage.GANG, status)
            return
        status = ssn.stages.enqueueable(job)
        if not status.ok:
            ssn.verdict(job.key, FitStage.JOB_QUEUE, status)
            return
        order = ssn.stages.task_order
        tasks = sorted((t for t in job.tasks.values() if wants_quota(t)), key=lambda t: (order(t), t.name))
        stmt = ssn.statement()
        first_failure: tuple[TaskInfo, Status, dict[str, Status]] | None = None
        for task in tasks:
            named = task.required_quota
            if named:
                # the required tier: the quota the pod's creator named, or none (never another)
                q = ssn.quota(named)
                candidates = [q] if q is not None and has_room(q) else []
            else:
                candidates = [q for q in ssn.quotas_of_queue(job.queue) if has_room(q)]
            result = place(ssn.tq, task, candidates)
            if result.choice is None:
                if named and not candidates:
                    lack = "it does not exist yet" if ssn.quota(named) is None else "no room left on it"
                    result.status = Status.unschedulable(
                        Reason.WAITING_FOR_NAMED_QUOTA, f"pod names quota {named}; waiting for room on it: {lack}"
                    )
                elif not candidates:
                    result.status = queue_not_found(ssn, job.queue) or Status.unschedulable(
                        Reason.NO_QUOTA, f"queue {job.queue or '(none)'} has no quota with room left"
                    )
                if first_failure is None:
                    first_failure = (task, result.status, result.failures)
                continue
            stmt.allocate_task_to_quota(task.uid, result.choice.name)
        # the statement works on the session's copy of the job: judge that one, not ``job``
        gate = ssn.stages.tq_ready(ssn.job(job.key) or job)
        if gate.ok:
            stmt.commit()
            if first_failure is not None:
                task, why, per_quota = first_failure
                ssn.verdict(job.key, FitStage.QUOTA_ASSIGNMENT, why, per_node=per_quota)
            return
        stmt.discard()
        if first_failure is not None:
            task, why, per_quota = first_failure
            ssn.verdict(job.key, FitStage.QUOTA_ASSIGNMENT, why, per_node=per_quota)
        else:
            ssn.verdict(job.key, FitStage.GANG, gate)
