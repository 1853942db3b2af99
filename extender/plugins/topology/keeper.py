"""The topology plugin's holds in one session (rules: ``holds.py``): which gang takes a hold when
its plan fails, which hold it displaces (when the book is full, or when only holds after it in
hold order keep it off), and which holds end because their gang was placed.

The :class:`~extender.plugins.topology.holds.HoldBook` is the state; :class:`HoldKeeper` applies
the rules to it as the session goes, and keeps what the session reports in step: the holds it
leaves (``holds.NOTE``), the gangs whose hold ended early (``holds.EXPIRED_NOTE``: they wait anew),
and — for a hold displaced after its gang was refused in the same session — the refusal, which
then no longer names the nodes it held.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from extender.framework.session import Session
from extender.framework.status import Failure, Reason, Refused, Status
from extender.model.job import JobInfo, JobQueueInfo, by_precedence
from extender.model.quota import QuotaInfo
from extender.plugins.gang import can_allocate_zone, quotas_bound
from extender.plugins.topology import holds

if TYPE_CHECKING:
    from extender.plugins.topology.fitmemo import FitMemo
    from extender.plugins.topology.planner import GangPlanner

__all__ = ["HoldKeeper", "could_run", "led_by", "waiting"]


def waiting(ssn: Session, job: JobInfo) -> bool:
    """The gang waits — what a hold is for: it has a quota left to bind and lacks members to run
    (once ``minMember`` of them are bound, the rest is room it would use, not a gang waiting)."""
    return any(not q.node_name for q in ssn.job_quotas(job)) and quotas_bound(ssn, job) < job.min_member


def could_run(ssn: Session, job_key: str) -> bool:
    """The gang could run now were the nodes free — what a hold is kept for: it exists, every task
    (or ``minMember`` of them) holds a quota, and it is admitted (``job.valid``: not backing off,
    its pods all there; ``job.enqueueable``: its JobQueue and Queue let it in). The binder ends
    the hold of a gang that could not before its cycle (:meth:`extender.scheduler.Scheduler.run_once`),
    keeping the gang's count of failed cycles: once it could run and its plan fails, it holds
    again at once (else its held nodes would idle until ``hold_seconds`` for a gang that could
    not use them)."""
    job = ssn.job(job_key)
    if job is None or not can_allocate_zone(job):
        return False
    return ssn.stages.valid(job).ok and ssn.stages.enqueueable(job).ok


def led_by(first: Failure, status: Status) -> Status:
    """``status`` with ``first`` before its failures: the reason /diagnose, the PodGroup condition
    and the extender (which tells a pod its job's first reason) give is ``first``, the rest says
    why. A :class:`Refused` keeps each refusing node's own reason; what the other nodes wait for
    leads with ``first`` too."""
    lead = Status(status.code, (first, *status.failures))
    if not isinstance(status, Refused):
        return lead
    elsewhere = status.elsewhere
    if elsewhere is not None:
        elsewhere = Status(elsewhere.code, (first, *elsewhere.failures))
    return Refused(lead.code, lead.failures, status.per_node, elsewhere)


class HoldKeeper:
    """One session's holds (``reserve_after_cycles``, ``max_holds``, ``hold_seconds``: the
    plugin's arguments); ``plans`` is the plugin's job → plan map (a displaced gang's refusal is
    replaced there)."""

    def __init__(
        self,
        ssn: Session,
        reserve_after_cycles: int,
        max_holds: int,
        hold_seconds: float,
        plans: MutableMapping[str, Any],
    ) -> None:
        self.ssn, self.reserve_after_cycles, self.max_holds = ssn, reserve_after_cycles, max_holds
        self._plans = plans
        self._ranks: dict[str, holds.Rank] = {}
        self._jobqueues: list[JobQueueInfo] | None = None  # in precedence order, sorted on first use
        self.settled = 0  # how many intents the session had when the holds were last settled
        self._refusals: dict[str, tuple[Status, Status]] = {}  # job → its refusal naming held nodes, and without
        limit = max_holds if reserve_after_cycles > 0 else 0  # 0: holds are off, old ones end
        self.book = holds.HoldBook(ssn.snap.holds, ssn.now, hold_seconds, limit, self.rank)
        ssn.notes[holds.NOTE] = self.book.current()  # expired holds end with this session
        ssn.notes[holds.EXPIRED_NOTE] = self.book.expired  # and those displaced in it

    def rank(self, job_key: str) -> holds.Rank:
        """The job's place in the hold order (:func:`holds.rank`), worked out once a session."""
        r = self._ranks.get(job_key)
        if r is None:
            if self._jobqueues is None:
                self._jobqueues = by_precedence(self.ssn.snap.jobqueues.values())
            r = self._ranks[job_key] = holds.rank(self.ssn.job(job_key), self._jobqueues)
        return r

    def _index(self, node: str) -> int | None:
        info = self.ssn.node(node)
        return info.index if info is not None else None

    def refuse(
        self, job: JobInfo, quotas: list[QuotaInfo], failure: Status, memo: FitMemo, planner: GangPlanner
    ) -> Status:
        """The refusal of a waiting gang whose plan failed (``failure``): once it has waited long
        enough, it holds the nodes that would fit it soonest, and the refusal leads with that —
        ``HoldingNodes(n4–n7 (4 nodes) for default/big); NoZoneFits(…)`` (:func:`led_by`)."""
        book = self.book
        held = book.of(job.key)
        if held is None:
            held = self._take(
                job, failure, lambda ignoring: holds.choose_hold(memo, planner, job, quotas, ignoring=ignoring)
            )
        else:
            moved = holds.better_hold(memo, planner, job, quotas, held)
            if moved is not None:
                book.move(job.key, moved)
                self.ssn.notes[holds.NOTE] = book.current()
                held = moved
        if not held:
            return failure
        hold = Failure(Reason.HOLDING_NODES, f"{holds.describe_nodes(held, self._index)} for {job.key}")
        refusal = led_by(hold, failure)
        self._refusals[job.key] = (refusal, failure)
        return refusal

    def overrule(
        self, job: JobInfo, quotas: list[QuotaInfo], failure: Status, memo: FitMemo, planner: GangPlanner
    ) -> bool:
        """A waiting gang kept off nodes (``failure`` is ``NodeHeldForGang``) only by the holds of
        gangs after it in hold order, once it holds or may hold (:meth:`_may_hold`), takes the
        places of those it needs (:meth:`_needed`): they end as displaced holds do, and it holds —
        its choice made as if they were free — unless it holds already. True: its way is clear,
        plan it again."""
        holders = planner.holders_keeping_off(failure)
        mine = self.rank(job.key)
        if not holders or any(self.rank(h) <= mine for h in holders):
            return False  # kept off by a gang before it in hold order, or its equal: it waits
        book = self.book
        held = book.of(job.key)
        if held is None and not self._may_hold(job):
            return False
        holders = self._needed(job, quotas, holders, planner)
        if held is None:
            held = holds.choose_hold(memo, planner, job, quotas, ignoring=holders)
            if not held:
                return False
        for holder in holders:
            self._displace(holder)
        if book.of(job.key) is None:
            book.add(job.key, held)
        self.ssn.notes[holds.NOTE] = book.current()
        return True

    def _needed(
        self, job: JobInfo, quotas: list[QuotaInfo], holders: tuple[str, ...], planner: GangPlanner
    ) -> tuple[str, ...]:
        """Of the ``holders`` keeping the gang off (all after it in hold order), the fewest of the
        last whose holds lifted let it be planned: two lower holds in the leaf it would take, one
        of which leaves it room enough, end one, not both (all: none fewer does)."""
        last_first = [h for h in self.book.after(job.key) if h in holders]
        for k in range(1, len(last_first)):
            with self.book.lifted(last_first[:k]):
                plan = planner.plan(job, quotas)
            if not isinstance(plan, Status):
                return tuple(last_first[:k])
        return holders

    def _may_hold(self, job: JobInfo) -> bool:
        """The gang has waited long enough to hold: ``reserve_after_cycles`` failed cycles in a
        row, and no hold of it expired or was displaced since."""
        return (
            self.reserve_after_cycles > 0
            and job.key not in self.book.expired
            and self.ssn.snap.gang_waits.get(job.key, 0) >= self.reserve_after_cycles
        )

    def _take(
        self, job: JobInfo, failure: Status, choose: Callable[[tuple[str, ...]], tuple[str, ...]]
    ) -> tuple[str, ...]:
        """The nodes a gang without a hold starts holding (empty: none), once it may hold: a free
        place, while fewer than ``max_holds`` holds exist and one could ever hold it; else the
        places of holds after it in hold order: the fewest of the last such whose nodes together
        let it hold (``choose(ignoring)``: the nodes to hold, those held for the gangs ``ignoring``
        counting as free), of which those whose nodes it takes end — two lower holds sharing the
        only leaf it fits end both, rather than neither — and, while the book would hold more than
        ``max_holds``, the last of the others in hold order too (a full book and a free place: an
        urgent 1-GPU gang holding the one free node ends the hold of a gang after it, rather than
        make two holds where one is allowed)."""
        # a gang kept off nodes held for another waits for that one (unless :meth:`overrule` let
        # it take that one's place): it holds nothing itself
        if failure.reason is Reason.NODE_HELD_FOR_GANG or not self._may_hold(job):
            return ()
        book = self.book
        held = choose(()) if book.count() < self.max_holds else ()
        after = book.after(job.key)
        for k in range(1, len(after) + 1) if not held else ():
            held = choose(tuple(after[:k]))
            if held:  # the holds it takes nodes of end (a free place in a full book ends none: see below)
                taken = set(held)
                for victim in after[:k]:
                    if taken.intersection(book.of(victim) or ()):
                        self._displace(victim)
                break
        if held:
            # a full book: it takes the places of as many more holds after it as keep the count
            # within max_holds, the last first (its hold may be on a free place: nodes no one held)
            for victim in after:
                if book.count() < self.max_holds:
                    break
                if book.of(victim) is not None:
                    self._displace(victim)
            book.add(job.key, held)
            self.ssn.notes[holds.NOTE] = book.current()
        return held

    def _displace(self, job_key: str) -> None:
        """Another gang takes the job's place: its hold ends as displaced (its gang waits anew
        before it holds again), and what it was told no longer names the nodes it held."""
        self.book.end(job_key, displaced=True)
        self._unheld(job_key)

    def _unheld(self, job_key: str) -> None:
        """The job's hold ended in this session: if it was refused already, the refusal (its plan,
        its verdict) no longer names the nodes it held."""
        refusals = self._refusals.pop(job_key, None)
        if refusals is None:
            return
        refusal, failure = refusals
        if self._plans.get(job_key) is refusal:
            self._plans[job_key] = failure
        verdict = self.ssn.verdicts.get(job_key)
        if verdict is not None and verdict.status is refusal:
            self.ssn.verdict(job_key, verdict.stage, failure, per_node=verdict.per_node, quota=verdict.quota)

    def settle(self) -> None:
        """End the holds of gangs placed in this session (``minMember`` of them bound, or all):
        from then on they neither count against ``max_holds`` nor keep others off their nodes.
        Called between jobs, once a job has committed since the last call (the session has more
        intents) — when a job is first planned, when another job's quota is selected — never
        inside a holder's own statement, whose binds may still be discarded."""
        ssn, book = self.ssn, self.book
        self.settled = len(ssn.intents)
        for key in list(book.current()) if book.any() else ():
            job = ssn.job(key)
            if job is None or not waiting(ssn, job):
                ssn.notes.setdefault(holds.PLACED_NOTE, {})[key] = book.end(key)
                ssn.notes[holds.NOTE] = book.current()
