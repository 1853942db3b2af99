"""One scheduling cycle: snapshot → session → actions in order → what to write (Volcano runOnce).

:meth:`Scheduler.run_once` is synchronous and performs no I/O: it returns a :class:`CycleResult`
(the committed intents, the desired state of every quota the cycle touched, the per-job
verdicts for /diagnose and PodGroup conditions, and per-action timings). The binder loop turns
that into API writes. Between cycles the scheduler remembers what actions asked it to:
back-offs, stuck-cycle counters, when fix_quota_binding last ran.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.actions import fix_quota_binding, release_quota
from extender.framework.intents import Intent
from extender.framework.policy import Policy
from extender.framework.session import JobVerdict, Session, Snapshot
from extender.model.job import JobInfo
from extender.model.quota import QuotaInfo
from extender.plugins.topology import holds, keeper
from extender.plugins.topology.holds import Hold

__all__ = ["CycleResult", "Scheduler", "SchedulerMemory"]


@dataclass(slots=True)
class SchedulerMemory:
    backoff: dict[str, float] = field(default_factory=dict)
    stuck_cycles: dict[str, int] = field(default_factory=dict)
    release_count: dict[str, int] = field(default_factory=dict)
    last_fix: float = 0.0
    holds: dict[str, Hold] = field(default_factory=dict)  # job key → its hold
    gang_waits: dict[str, int] = field(default_factory=dict)  # job key → cycles its gang plan failed in a row
    # the gangs the last cycle placed: job key → (its hold, if any; its count of failed cycles; its quotas)
    placed: dict[str, tuple[Hold | None, int, frozenset[str]]] = field(default_factory=dict)
    last_generation: int = -1  # cache generation the previous cycle saw (-1: none yet)


@dataclass(slots=True)
class CycleResult:
    now: float
    generation: int
    intents: list[Intent]
    quotas: dict[str, QuotaInfo]  # final state of every quota the cycle changed
    jobs: dict[str, JobInfo]  # final state of every job the cycle changed
    verdicts: dict[str, JobVerdict]
    timings: dict[str, float]  # action → seconds
    notes: dict[str, Any]
    session: Session  # for callers that need more (tests, the simulator); do not keep it

    @property
    def changed(self) -> bool:
        return bool(self.intents)


class Scheduler:
    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.memory = SchedulerMemory()

    def take_over(self, recorded: Mapping[str, Hold]) -> None:
        """This process starts leading (a start, a leader change): what an earlier leadership of
        it remembered may be stale and is forgotten, and the holds are the ``recorded`` ones (the
        ``status.hold`` the last leader wrote in PodGroups and, for jobs of one pod, in Quotas),
        so a waiting job keeps its hold — and its start time — across a leader change."""
        self.memory = SchedulerMemory(holds=dict(recorded))

    def swap_policy(self, policy: Policy) -> None:
        """Replace the policy between cycles (a reload). The memory (back-offs, stuck-cycle
        counters, releases, the last fix) is kept; the next cycle looks at every quota again, as
        the first one does, rather than only at those changed since a cycle of the old policy."""
        self.policy = policy
        self.memory.last_generation = -1

    def writes_failed(self, quotas: Collection[str]) -> None:
        """The binder could not write these quotas' statuses after the last cycle: a gang that
        cycle placed with one of them is not placed after all. It keeps the hold and the count of
        failed cycles the placement ended (the next cycle plans it again, on its held nodes), as
        if the cycle had not placed it."""
        mem = self.memory
        for job, (hold, waited, names) in mem.placed.items():
            if names.isdisjoint(quotas):
                continue
            if hold is not None:
                mem.holds[job] = hold
            if waited:
                mem.gang_waits[job] = waited

    def run_once(self, snap: Snapshot) -> CycleResult:
        mem = self.memory
        now = snap.now
        snap.backoff = {k: v for k, v in mem.backoff.items() if v > now}
        snap.stuck_cycles = mem.stuck_cycles
        snap.release_count = mem.release_count
        snap.last_fix = mem.last_fix
        snap.holds = mem.holds
        snap.gang_waits = mem.gang_waits
        if mem.last_generation >= 0 and snap.quota_touched:
            since = mem.last_generation
            snap.changed_quotas = [q for q, g in snap.quota_touched.items() if g > since]
        policy = self.policy  # read once: the whole cycle runs one policy
        ssn = Session(snap, policy)
        # a hold lasts while its gang could run were the nodes free (before the topology plugin,
        # which reads snap.holds, opens: job.valid and job.enqueueable are other plugins' stages)
        snap.holds = mem.holds = {k: h for k, h in mem.holds.items() if keeper.could_run(ssn, k)}
        timings: dict[str, float] = {}
        for action in policy.actions:
            t0 = time.perf_counter()
            action.execute(ssn)
            timings[action.NAME] = time.perf_counter() - t0
        self._remember(ssn)
        return CycleResult(
            now=now,
            generation=snap.generation,
            intents=list(ssn.intents),
            quotas=dict(ssn.touched_quotas()),
            jobs=dict(ssn.touched_jobs()),
            verdicts=dict(ssn.verdicts),
            timings=timings,
            notes=dict(ssn.notes),
            session=ssn,
        )

    def _remember(self, ssn: Session) -> None:
        mem = self.memory
        now = ssn.now
        mem.last_generation = ssn.snap.generation
        fix = ssn.notes.get(fix_quota_binding.NAME)
        if isinstance(fix, Mapping) and fix.get("ran"):
            mem.last_fix = now
        rel = ssn.notes.get(release_quota.NAME)
        if isinstance(rel, release_quota.ReleaseNotes):
            mem.stuck_cycles = rel.stuck_cycles
            mem.backoff.update(rel.backoff)
            mem.release_count.update(rel.releases)
        mem.backoff = {k: v for k, v in mem.backoff.items() if v > now}
        self._remember_holds(ssn)
        alive = ssn.snap.jobs
        for key in [k for k in mem.release_count if k not in alive]:
            del mem.release_count[key]

    def _remember_holds(self, ssn: Session) -> None:
        """The holds and counts of failed cycles the session leaves; those of the gangs it placed
        are kept aside (:attr:`SchedulerMemory.placed`) until the binder has written the binds."""
        mem = self.memory
        held = ssn.notes.get(holds.NOTE)
        ended = dict(ssn.notes.get(holds.PLACED_NOTE, {}))  # ended in the session: their gangs placed
        if isinstance(held, Mapping):
            ended.update((k, h) for k, h in mem.holds.items() if k not in held and k not in ended)
            mem.holds = dict(held)
        waiting = {k for k in (*mem.holds, *mem.gang_waits, *ended) if _still_waiting(ssn, k)}
        placed = {k for k in (*mem.holds, *mem.gang_waits, *ended) if k not in waiting and ssn.job(k) is not None}
        expired = ssn.notes.get(holds.EXPIRED_NOTE, ())
        mem.placed = {
            k: (mem.holds.get(k) or ended.get(k), mem.gang_waits.get(k, 0), _quota_names(ssn, k))
            for k in placed
            if k not in expired
        }
        mem.holds = {k: h for k, h in mem.holds.items() if k in waiting}
        waits = {k: n for k, n in mem.gang_waits.items() if k in waiting and k not in expired}
        for key in ssn.notes.get(holds.FAILED_NOTE, ()):
            waits[key] = waits.get(key, 0) + 1
        mem.gang_waits = waits


def _quota_names(ssn: Session, job_key: str) -> frozenset[str]:
    job = ssn.job(job_key)
    return frozenset(q.name for q in ssn.job_quotas(job)) if job is not None else frozenset()


def _still_waiting(ssn: Session, job_key: str) -> bool:
    """A hold lasts while its job exists and waits (:func:`extender.plugins.topology.keeper.waiting`)."""
    job = ssn.job(job_key)
    return job is not None and keeper.waiting(ssn, job)
