"""Holds: nodes kept for a gang that has waited too long, so smaller jobs cannot starve it.

Rules (policy: the topology plugin's ``reserve_after_cycles``, ``max_holds``, ``hold_seconds``):

* A gang whose plan has failed ``reserve_after_cycles`` cycles in a row gets a hold, while
  fewer than ``max_holds`` holds exist (gangs are planned in job order — queue share, then
  priority — so the first in that order get them).
* **Hold order** (:func:`rank`): queue priority (the priority of the JobQueue that governs the
  gang), then the gang's own priority, then its age (older first). When ``max_holds`` holds exist,
  or no free place could ever hold it (the zones that could are held), a gang that qualifies takes
  the places of holders strictly after it in that order — the fewest of the last such whose nodes
  together let it hold (:meth:`HoldBook.after`; two lower holds sharing the only leaf it fits are
  both taken): those whose nodes it takes end as an expired hold does (their gangs' count of
  failed cycles starts over) — and, where it holds a free place while ``max_holds`` holds exist,
  the last of them in hold order, so that no more than ``max_holds`` remain — and the newcomer
  holds, its choice made as if those nodes were free. A
  gang never displaces one of the same place in the order (same priorities, same age): between
  equals, the first to hold keeps it, so no two gangs take a hold from each other in turn.
* **Kept off by a hold after it** (:meth:`keeper.HoldKeeper.overrule`): a gang that qualifies (or
  holds already) and is kept off only by holds of gangs strictly after it in hold order
  (``NodeHeldForGang``: the holders of nodes in the zones it would take were nothing held — of
  the one NVLink domain it would take, when held hard to one; none when it would not run were
  nothing held either, its hard tier limit exceeded: ``verdicts.py``) takes
  the places of as many as it needs — the fewest of the last in hold order whose holds lifted let
  it be planned — whether or not the book is full: those holds end as displaced ones do (the
  others stay), it holds (its choice made as if their nodes were free) unless it does already,
  and it is planned again at once — it runs in that cycle where it would were those nodes not
  held. A gang kept off by a hold
  of a gang before it or of its equal waits for that one (a hold may delay others, never scatter
  them). No thrash: a hold only ever passes to a gang strictly before its holder, and a displaced
  gang waits anew before it holds again.
* **What it holds** (:func:`choose_hold`): the zone that would fit it *soonest* — among the zones
  whose nodes could hold the whole gang once empty, the one with the most room for it now; within
  it, as many nodes as the gang needs when they are empty. Room is counted in the gang's quotas
  (``holdroom.py``): a gang whose quotas differ in size is not measured in copies of its
  largest, and a node too small for its largest quota is held when it would take a smaller one
  (a 4-GPU node its launcher needs). A gang of one kind holds the nodes with the most room now
  until their room when empty covers it. A gang of several kinds holds the *fewest* nodes that
  hold all of it once empty (an exact packing, :func:`holdroom.take`), then of those sets the one
  where a packing of it places the most quotas on room free now, then the lowest indices (a
  2-GPU launcher and a 4-GPU worker, on a busy 4-GPU n0 and a busy 8-GPU n1: n1 alone, not
  both). Fewest nodes come before room now: a held node's free GPUs sit idle for as long as the
  hold lasts, for certain, while how much sooner its room would let the gang start depends on
  which running jobs end first, which is not known (and the hold moves when another set gets
  more room). A small node with room now for the launcher is held only when no set of as few
  nodes without it holds the gang. Exact for gangs of at most ``holdroom.MAX_QUOTAS`` unbound
  quotas on at most ``holdroom.MAX_NODES`` candidate nodes of a zone; beyond, greedily, as a
  gang of one kind, each node taking what still fits it, largest first. When no
  single zone could ever hold it, the fewest zones by that measure, roomiest first. Only zones of
  a GPU model the gang may use (its bound quotas' model, if some are bound: ``GangPlanner.specs``),
  and "empty" is empty of other jobs: the room the gang's own bound quotas take stays taken. A
  gang with a hard tier limit holds within one unit of that tier (one NVLink domain, one leaf, …):
  its bound quotas' unit, if some are bound.
* **A hold follows the room** (:func:`better_hold`): every cycle the gang still waits, the choice
  is made again (its own held nodes count as candidates); when the new set has more room for the
  gang now than the held one, the hold moves there, keeping its start time (so ``hold_seconds``
  bounds the whole wait on holds). Which running jobs end first is not known in advance: a big job
  ending elsewhere can leave another set closer to holding the gang than the one being drained.
* While a hold lasts, no other job's quota is bound to a held node (jobs that fit elsewhere still
  run, as long as they need no more zones there than they would without the hold: else they wait,
  or take the hold's place as the rule above says); the holder may use them like any node.
* A hold ends when the gang is placed (no unbound quota left, or ``minMember`` of them bound) —
  at once, in the cycle that places it: the next gang planned in that cycle may take its place —,
  when its job is deleted, or ``hold_seconds`` after it began; when its gang could not run were
  the nodes free (backing off, a pod missing, a task without a quota: ``keeper.could_run``) — it
  keeps its count, and holds again once it could run and its plan fails —; and at once when the
  policy turns holds off (``reserve_after_cycles: 0`` or ``max_holds: 0``; a lower
  ``max_holds``, or more holds than it allows, ends those last in hold order: their gangs keep
  their count, and hold again in hold order when a place is free). A hold that expired or was
  displaced is not taken again at once: the gang's count of failed cycles starts over (so others
  may use the nodes for ``reserve_after_cycles`` cycles).
* A gang is placed once the binder has written its binds: when a write fails, the gang keeps the
  hold and the count its placement ended (:meth:`extender.scheduler.Scheduler.writes_failed`). A
  cycle in which its plan found room but the binds were not committed (a later check refused
  them) neither counts nor starts the count over: the gang still waits, and its count goes on
  from there when its plan fails again.

Holds live between cycles in the scheduler's memory; a session sees them in ``Snapshot.holds``,
keeps them as the rules above say (``keeper.py``) and reports the set it leaves under
:data:`NOTE`. The binder records each in its PodGroup's ``status.hold``
(``extender/binder/status.py``): a replica that starts leading continues the holds recorded there
(:meth:`extender.scheduler.Scheduler.take_over`), and the replicas that do not lead keep inline
binds off them too (``extender/state.py``). A job without a PodGroup (one pod) has its hold
recorded in the ``status.hold`` of the quota its pod claims (``extender/binder/reconcile.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from extender.model.job import JobInfo, JobQueueInfo, governing_jobqueue
from extender.model.quota import QuotaInfo
from extender.model.resources import Resource
from extender.plugins.topology.gangparts import quota_size
from extender.plugins.topology.gangplan import ZoneId, domain_unit
from extender.plugins.topology.holdroom import Left, Row, bound_room, need_of, take

if TYPE_CHECKING:
    from extender.plugins.topology.fitmemo import FitMemo
    from extender.plugins.topology.planner import GangPlanner

__all__ = [
    "EXPIRED_NOTE",
    "FAILED_NOTE",
    "LAST",
    "NOTE",
    "PLACED_NOTE",
    "Hold",
    "HoldBook",
    "Rank",
    "better_hold",
    "choose_hold",
    "describe_nodes",
    "rank",
    "recorded",
]

NOTE: Final = "topology.holds"  # Session.notes key: the holds the session leaves
FAILED_NOTE: Final = "topology.unplaced"  # Session.notes key: the gangs whose plan failed this cycle
EXPIRED_NOTE: Final = "topology.expired"  # Session.notes key: the gangs whose hold expired this cycle
PLACED_NOTE: Final = "topology.placed"  # Session.notes key: job → the hold that ended as the session placed it


@dataclass(frozen=True, slots=True)
class Hold:
    nodes: tuple[str, ...]  # in node-index order
    since: float  # when it began (epoch seconds)


def recorded(holds: Mapping[str, tuple[tuple[str, ...], float]]) -> dict[str, Hold]:
    """The holds as the PodGroups' ``status.hold`` record them (job → (nodes, since))."""
    return {job: Hold(nodes, since) for job, (nodes, since) in holds.items()}


Rank = tuple[int, int, float]  # a gang's place in the hold order: (-queue priority, -priority, created)
LAST: Final[Rank] = (1 << 62, 1 << 62, float("inf"))  # a job the session does not know: after every other


def rank(job: JobInfo | None, ordered: Iterable[JobQueueInfo]) -> Rank:
    """The gang's place in the hold order, lowest first: its queue priority (that of the JobQueue
    governing it, :func:`~extender.model.job.governing_jobqueue` of ``ordered``, as the
    ``jobqueue`` plugin orders jobs; 0 for none), then its own priority, then its age (older
    first)."""
    if job is None:
        return LAST
    queue = governing_jobqueue(job, ordered)
    return (-(queue.priority if queue is not None else 0), -job.priority, job.created)


class HoldBook:
    """The holds of one session: those it was handed that have not expired, at most ``limit`` of
    them (the first in hold order, ``rank``: a policy may have lowered ``max_holds``, or turned
    holds off), plus new ones; a hold may end in the session (displaced, or its gang placed)."""

    def __init__(
        self,
        holds: Mapping[str, Hold],
        now: float,
        hold_seconds: float,
        limit: int,
        rank: Callable[[str], Rank] = lambda _: LAST,
    ) -> None:
        self._now = now
        self._rank = rank
        alive = [job for job, h in holds.items() if now - h.since < hold_seconds]
        self._holds = {job: holds[job] for job in alive}
        if len(alive) > limit:  # which to keep: the first in hold order (ties: the older hold)
            self._holds = {job: holds[job] for job in sorted(alive, key=self._order)[: max(0, limit)]}
        # ended by time (or, in the session, displaced): their gangs wait anew before holding; one
        # ended because the book is full (max_holds lowered, holds off) keeps its gang's count
        self.expired = {job for job, h in holds.items() if now - h.since >= hold_seconds}
        self._holders = _holders_of(self._holds)

    @classmethod
    def none(cls) -> HoldBook:
        """A book that holds nothing."""
        return cls({}, 0.0, 1.0, 0)

    def any(self) -> bool:
        return bool(self._holds)

    def count(self) -> int:
        return len(self._holds)

    def of(self, job: str) -> tuple[str, ...] | None:
        h = self._holds.get(job)
        return h.nodes if h is not None else None

    def holders(self, node: str) -> tuple[str, ...]:
        """Every gang holding ``node`` (most often one; two holds may overlap — a gang whose binds
        the binder could not write gets its hold back beside the one that took its place)."""
        return self._holders.get(node, ())

    def held_for_other(self, node: str, job: str) -> bool:
        """``node`` is held, and not for ``job``: ``job`` is kept off it (a holder may use it)."""
        holders = self._holders.get(node)
        return holders is not None and job not in holders

    def add(self, job: str, nodes: tuple[str, ...]) -> None:
        self._holds[job] = Hold(nodes, self._now)
        self._holders = _holders_of(self._holds)

    def after(self, job: str) -> list[str]:
        """The holders ``job`` may take the place of: those strictly after it in hold order, the
        last first (ties: the younger hold first)."""
        mine = self._rank(job)
        return sorted((h for h in self._holds if mine < self._rank(h)), key=self._order, reverse=True)

    def _order(self, job: str) -> tuple[Rank, float, str]:
        """Where a held job stands among the holders: hold order, then the older hold first."""
        return self._rank(job), self._holds[job].since, job

    def end(self, job: str, *, displaced: bool = False) -> Hold | None:
        """The job's hold ends now (``displaced``: its gang waits anew before holding again)."""
        h = self._holds.pop(job, None)
        if h is not None:
            self._holders = _holders_of(self._holds)
        if displaced:
            self.expired.add(job)
        return h

    def move(self, job: str, nodes: tuple[str, ...]) -> None:
        """The job's hold now covers ``nodes`` instead; it keeps its start time."""
        self._holds[job] = Hold(nodes, self._holds[job].since)
        self._holders = _holders_of(self._holds)

    def current(self) -> dict[str, Hold]:
        return dict(self._holds)

    @contextmanager
    def lifted(self, jobs: Collection[str]) -> Iterator[None]:
        """Inside, the holds of ``jobs`` count as absent (a trial plan); after, all are as before."""
        holds, holders = self._holds, self._holders
        self._holds = {job: h for job, h in holds.items() if job not in jobs}
        self._holders = _holders_of(self._holds)
        try:
            yield
        finally:
            self._holds, self._holders = holds, holders


def _holders_of(holds: Mapping[str, Hold]) -> dict[str, tuple[str, ...]]:
    """Node → the gangs holding it, in the order of ``holds``."""
    out: dict[str, tuple[str, ...]] = {}
    for job, h in holds.items():
        for n in h.nodes:
            out[n] = (*out.get(n, ()), job)
    return out


def _head(memo: FitMemo, quotas: Sequence[QuotaInfo]) -> QuotaInfo | None:
    """The gang's largest unbound quota, as its plan counts it (``gangparts.quota_size``: GPUs
    first; ties: the last name) — the quota whose spec and shape judge the nodes a hold takes."""
    gpus = memo.ssn.gpu_resources
    unbound = [q for q in quotas if not q.node_name]
    return max(unbound, key=lambda q: (quota_size(q, gpus), q.name)) if unbound else None


def room_now(memo: FitMemo, quotas: Sequence[QuotaInfo], nodes: Sequence[str]) -> int:
    """How many of the gang's unbound quotas ``nodes`` take now (:meth:`Left.now`: copies of its
    one kind, else its quotas, largest first, in each node's room in turn)."""
    head = _head(memo, quotas)
    if head is None:
        return 0
    sid = memo.shape_of(head)
    rows = [(memo.node_capacity(head, sid, n), 0, n.index, n.name) for n in map(memo.ssn.node, nodes) if n]
    return need_of(memo, quotas, bound_room(quotas)).now(rows)


def better_hold(
    memo: FitMemo, planner: GangPlanner, job: JobInfo, quotas: Sequence[QuotaInfo], held: tuple[str, ...]
) -> tuple[str, ...] | None:
    """The set the gang's hold should move to, or None: it stays (rule "a hold follows the room")."""
    new = choose_hold(memo, planner, job, quotas)
    if not new or new == held or room_now(memo, quotas, new) <= room_now(memo, quotas, held):
        return None
    return new


Key = tuple[int, int, int]  # what ranks held sets (lowest first): zones, less room now, nodes


def choose_hold(
    memo: FitMemo, planner: GangPlanner, job: JobInfo, quotas: Sequence[QuotaInfo], *, ignoring: Collection[str] = ()
) -> tuple[str, ...]:
    """The nodes to hold for the job's unbound quotas (empty: no set of zones could ever hold them);
    the nodes held for the jobs ``ignoring`` (holds the job would displace) count as free."""
    head = _head(memo, quotas)
    if head is None:
        return ()
    sid = memo.shape_of(head)
    specs, _ = planner.specs(quotas, head)  # the GPU models the gang may use: its bound quotas' one
    kept = bound_room(quotas)
    book = planner.holds
    need = need_of(memo, quotas, kept)

    def held(n: str) -> bool:  # kept for another gang, one whose place the job does not take
        holders = book.holders(n)
        return job.key not in holders and any(h not in ignoring for h in holders)

    best: tuple[Key, tuple[str, ...]] | None = None
    for spec in specs:
        # per zone: the nodes that could take some of the gang
        zones = memo.spec_zones.get(spec, [])
        rows = {z: _rows(memo, need, z, head=head, sid=sid, held=held, kept=kept) for z in zones}
        for unit in _units(memo, job, rows, kept):
            found = _hold_in(unit, need)
            if found is not None and (best is None or found[0] < best[0]):
                best = found
    if best is None:
        return ()
    # in node-index order (what Hold.nodes promises, and /diagnose prints as ``n4–n7``)
    index = {n: node.index for n in best[1] if (node := memo.ssn.node(n)) is not None}
    return tuple(sorted(best[1], key=lambda n: (index.get(n, 0), n)))


def _rows(
    memo: FitMemo,
    need: Left,
    zid: ZoneId,
    *,
    head: QuotaInfo,
    sid: int | None,
    held: Callable[[str], bool],
    kept: Mapping[str, Resource],
) -> list[Row]:
    """The zone's nodes a hold may take (not ``held`` for another gang): those that take a quota
    of the gang once empty — of a gang of one kind, its one (``FitMemo.hold_rows``); of several
    kinds, any one of them (:meth:`Left.row`: a node too small for its largest quota may take
    its launcher)."""
    if not need.mixed:
        return memo.hold_rows(head, sid, zid, held, kept)
    out = []
    for name in memo.zone_nodes[zid]:
        node = memo.ssn.node(name)
        if node is not None and not held(name) and (row := need.row(name, node.index)) is not None:
            out.append(row)
    return out


def _units(
    memo: FitMemo, job: JobInfo, rows: Mapping[ZoneId, list[Row]], bound: Collection[str]
) -> list[dict[ZoneId, list[Row]]]:
    """The parts of the zones' ``rows`` one hold may span: all of them, unless the job's hard tier
    limit (``highestTierAllowed``, mode hard) keeps it in one unit of that tier — one NVLink
    domain (a node naming none is a domain of its own), one leaf, one spine, … — and, when some
    of its quotas are bound (on the nodes ``bound``), in theirs: a hold the gang could never be
    placed across would only keep others off its nodes."""
    limit = job.hard_tier
    if limit is None or limit > memo.levels:
        return [dict(rows)]
    units: dict[object, dict[ZoneId, list[Row]]] = {}
    for z, zone_rows in rows.items():
        for row in zone_rows:
            units.setdefault(_unit(memo, limit, z, row[3]), {}).setdefault(z, []).append(row)
    homes = {_unit(memo, limit, memo.zone_of[n], n) for n in bound if n in memo.zone_of}
    if homes:  # the siblings' one unit (none when they span several: the gang can never run)
        return [units[u] for u in homes if u in units] if len(homes) == 1 else []
    return list(units.values())


def _unit(memo: FitMemo, limit: int, zone: ZoneId, node: str) -> object:
    """The unit of tier ``limit`` that ``node`` (of ``zone``) is in."""
    if limit == 0:
        return domain_unit(node, memo.domain_of)
    return (memo.zone_tiers[zone].get(limit) if limit >= 2 else None) or zone


def _hold_in(rows: Mapping[ZoneId, Sequence[Row]], need: Left) -> tuple[Key, tuple[str, ...]] | None:
    """The nodes of these zones to hold for ``need``, and the key that ranks the set: the zone
    with the most room now of those that could hold the gang once empty; else the fewest zones by
    that measure, roomiest first (None: these zones could never hold it)."""
    taken = {z: take(r, need) for z, r in rows.items()}
    whole = [z for z, (_, left) in taken.items() if left.count <= 0]
    if whole:
        zone = max(whole, key=lambda z: (need.now(rows[z]), -len(rows[z]), z))
        picked = taken[zone][0]
        key = (1, -need.now(rows[zone]), 0)
    else:
        order = sorted(rows, key=lambda z: (-need.now(rows[z]), -sum(x[1] for x in rows[z]), z))
        picked, left, count = [], need, 0
        for z in order:
            if left.count <= 0:
                break
            nodes, left = take(rows[z], left)
            picked += nodes
            count += 1
        if left.count > 0:
            return None
        key = (count, 0, len(picked))
    return (key, tuple(picked)) if picked else None


MAX_RUNS: Final = 4  # runs of consecutive nodes a held set names before it is cut short (``…``)


def describe_nodes(nodes: Sequence[str], index: Callable[[str], int | None]) -> str:
    """A held set (in node-index order) as /diagnose prints it: its runs of consecutive node
    indices (``index``: a node's index, None if unknown), first–last, then the count —
    ``n4–n7 (4 nodes)``, ``n1, n4–n6 (4 nodes)`` —, at most :data:`MAX_RUNS` runs before ``…``.
    Never a range over a node the hold does not cover."""
    runs: list[list[str]] = []
    last: int | None = None
    for n in nodes:
        i = index(n)
        if runs and i is not None and last is not None and i == last + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
        last = i
    parts = [run[0] if len(run) == 1 else f"{run[0]}–{run[-1]}" for run in runs[:MAX_RUNS]]
    if len(runs) > MAX_RUNS:
        parts.append("…")
    listed = ", ".join(parts)
    return listed if len(nodes) == 1 else f"{listed} ({len(nodes)} nodes)"
