"""``topology``: RDMA-zone-aware placement of a job's quotas, a gang at a time (seed 三 3.3–3.5, 2.6).

On for a job when it requests an ``rdma/*`` resource, or when its PodGroup / pod annotation says
so (``enable-topology-scheduling: "true"`` also demands strict rank order; ``"false"`` turns it
off). For such a job:

* ``job.zone_candidates`` — the node the gang plan gives the quota, first. The plan is made once
  for all of the job's unbound quotas (``planner.py``; rules in ``gangplan.py``): the QN
  ``select``/``predicate`` stages decide which nodes can take a quota of the gang (once per node
  per quota shape, ``fitmemo.py``), ``node_order``/``batch_node_order`` score them, and the gang
  goes to the lowest-cost zone(s) that hold it — best fit in one zone, else the fewest zones —
  with consecutive ranks sharing a node only when needed (``pack_workers`` packs instead). Zones
  are computed per GPU spec, so A100 and H100 nodes never share one even on the same switch.
* ``qn.node_order`` — ``namedzone_weight · 1/zone size + continuity_weight · neighbour score +
  affinity`` (zones holding quotas of jobs with the same ``topology-affinity-key`` score higher;
  not for a quota shape's stand-in: the planner weighs affinity where it chooses zones).
* ``qn.best_n`` — the planned node when the pipeline offers it (the allocate_zone action reads
  candidates in order and stops at the first feasible one, ``RANK_ORDERED_BEST_N``).
* ``qn.select`` — for other jobs: a node held for a waiting gang (``holds.py``) is refused.
* ``job.quota_allocate`` — a topology job commits only within one GPU spec, and a strict-order
  job only if its node indices never descend as its task indices ascend.
* ``tn.predicate`` — spot gangs that request RDMA (the TN path, no quotas) stay in one zone too:
  once a pod of the job runs, its siblings go only to that zone; the first pod goes only to the
  best-fit zone: the one with the least room (``idle``, within what the pod's spot pool lends, on
  the nodes the pod's other TN predicates pass) that holds every unplaced pod of the job — or,
  while it holds them, the zone the extender already let a pod of the job into (its bind is
  asynchronous: ``Snapshot.spot_zones``).

Non-topology jobs are left alone (every stage but the hold check abstains).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any, Final

from pydantic import Field

from extender.framework.pipeline import Prejudged
from extender.framework.plugin import ArgsModel
from extender.framework.session import Event, EventKind, Session
from extender.framework.status import SKIP, SUCCESS, Reason, Status
from extender.model.job import JobInfo
from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo
from extender.model.selectors import map_key
from extender.model.task import TaskInfo
from extender.plugins import sylas
from extender.plugins.topology import holds
from extender.plugins.topology.fitmemo import FitMemo, capacity_for
from extender.plugins.topology.gangplan import ZoneId
from extender.plugins.topology.keeper import HoldKeeper, waiting
from extender.plugins.topology.planner import GangPlan, GangPlanner

NAME: Final = "topology"


class TopologyArgs(ArgsModel):
    namedzone_weight: float = Field(100.0, ge=0, description="weight of the namedzone algorithm")
    continuity_weight: float = Field(0.0, ge=0, description="weight of the continuity algorithm")
    affinity_weight: float = Field(
        10.0,
        ge=0,
        description="cross-job zone affinity: a gang goes to its affinity key's zones before best fit, "
        "and this weighs the key's share of a zone in node scores (0: no cross-job affinity at all)",
    )
    pack_workers: bool = Field(
        False, description="pack a gang's ranks onto as few nodes as possible instead of distinct nodes"
    )
    reserve_after_cycles: int = Field(
        100, ge=0, description="cycles a gang waits before it holds the nodes it needs (0: never hold)"
    )
    max_holds: int = Field(1, ge=0, description="gangs holding nodes at once")
    hold_seconds: float = Field(600.0, gt=0, description="how long a hold lasts at most")


Args = TopologyArgs


class _Topology:
    """The plugin's state for one session; its methods are the stages."""

    def __init__(self, ssn: Session, args: TopologyArgs) -> None:
        self.ssn, self.args = ssn, args
        self._memo: FitMemo | None = None
        self._planner: GangPlanner | None = None
        self.plans: dict[str, GangPlan | Status] = {}
        self._affinity: defaultdict[str, Counter[ZoneId]] | None = None
        # (zone, spot pod kind) → how many such spot pods the zone's idle room takes
        self._spot_room: dict[tuple[ZoneId, SpotKind], int] = {}
        self._judging_spot: set[str] = set()  # spot pods whose zone room is being counted
        # (spot pod kind, pods) → the zone the first such spot pod may start in
        self._spot_targets: dict[tuple[SpotKind, int], ZoneId | None] = {}
        self.keeper = HoldKeeper(ssn, args.reserve_after_cycles, args.max_holds, args.hold_seconds, self.plans)
        self.holds = self.keeper.book

    # --- lazily built session state ----------------------------------------------------------
    @property
    def memo(self) -> FitMemo:
        if self._memo is None:
            self._memo = FitMemo(self.ssn, neighbour_scores=self.args.continuity_weight > 0)
        return self._memo

    @property
    def planner(self) -> GangPlanner:
        if self._planner is None:
            args = self.args
            self._planner = GangPlanner(
                self.ssn,
                self.memo,
                pack=args.pack_workers,
                continuity=args.continuity_weight > args.namedzone_weight,
                affinity=self.affinity if args.affinity_weight > 0 else None,
                holds=self.holds,
            )
        return self._planner

    def affinity(self, key: str) -> Counter[ZoneId]:
        """Quotas per zone of the jobs sharing ``key`` (built on first use)."""
        if self._affinity is None:
            self._affinity = defaultdict(Counter)
            ssn, zone_of = self.ssn, self.memo.zone_of
            for job in ssn.jobs():
                if job.affinity_key:
                    for q in ssn.job_quotas(job):
                        if q.node_name in zone_of:
                            self._affinity[job.affinity_key][zone_of[q.node_name]] += 1
        return self._affinity[key]

    # --- stages ------------------------------------------------------------------------------
    def zone_candidates(self, job: JobInfo, quota: QuotaInfo) -> Iterable[str] | Status | None:
        """The planned node of the quota, then (unless strict order) the plan's other nodes."""
        if not job.topology:
            return None
        plan = self.plans.get(job.key)
        if plan is None:
            plan = self.plans[job.key] = self._plan(job)
        if isinstance(plan, Status):
            return plan
        first = plan.nodes.get(quota.name)
        if not first and plan.rest is not None:
            return plan.rest  # beyond what fits now of a gang whose minMember the plan reaches
        others: Callable[[], list[str]] = list if job.strict_order else partial(plan.others, first)
        if not first:
            return others()
        if plan.judged:
            # the planner judged the node for this quota's shape; the others matter only if it refuses
            return Prejudged(first, others)
        return [first, *others()]

    def _plan(self, job: JobInfo) -> GangPlan | Status:
        if self.keeper.settled != len(self.ssn.intents):  # a job committed since: a holder's?
            self.keeper.settle()
        quotas = self.ssn.job_quotas(job)
        if not any(not q.node_name for q in quotas):
            return GangPlan({}, [])
        plan = self.planner.plan(job, quotas)
        if not isinstance(plan, Status) or not waiting(self.ssn, job):
            # a gang short of minMember waits (and may earn a hold); one that runs only lacks room
            # for more members, which no hold is for
            return plan
        if self.keeper.overrule(job, quotas, plan, self.memo, self.planner):
            plan = self.planner.plan(job, quotas)  # the holds after it in hold order that kept it off ended
            if not isinstance(plan, Status):
                return plan
        self.ssn.notes.setdefault(holds.FAILED_NOTE, set()).add(job.key)
        return self.keeper.refuse(job, quotas, plan, self.memo, self.planner)

    def quota_allocate(self, job: JobInfo) -> Status:
        if not job.topology:
            return SKIP
        ssn = self.ssn
        specs = set()
        ranked: list[tuple[int, int]] = []
        for q in ssn.job_quotas(job):
            node = ssn.node(q.node_name) if q.node_name else None
            if node is None:
                continue
            specs.add(node.spec)
            if q.rank is not None:
                ranked.append((q.rank, node.index))
        if len(specs) > 1:
            return Status.unresolvable(Reason.SPEC_MISMATCH, "quotas on GPU models " + ", ".join(sorted(specs)))
        if job.strict_order:
            last = -(1 << 62)
            for idx, node_index in sorted(ranked):
                if node_index < last:
                    return Status.unschedulable(
                        Reason.TOPOLOGY_ORDER, f"task {idx} would land on node index {node_index} < {last}"
                    )
                last = node_index
        plan = self.plans.get(job.key)
        if isinstance(plan, Status) and any(not q.node_name for q in ssn.job_quotas(job)):
            return plan
        return SUCCESS

    def node_order(self, quota: QuotaInfo, node: NodeInfo) -> float:
        job = _job_of_quota(self.ssn, quota)
        if job is None or not job.topology:
            return 0.0
        args, memo = self.args, self.memo
        zid = memo.zone_of.get(node.name)
        score = 0.0
        if zid is not None and args.namedzone_weight:
            score += args.namedzone_weight / max(1, len(memo.zone_nodes[zid]))
        if args.continuity_weight:
            sid = memo.shape_of(quota)
            sides = (self.ssn.node_by_index(node.index - 1), self.ssn.node_by_index(node.index + 1))
            free = sum(1 for n in sides if n is not None and memo.node_capacity(quota, sid, n) > 0)
            score += args.continuity_weight * (1.0, 0.5, 0.0)[free]
        # cross-job affinity is a zone's: the planner weighs it where it chooses zones, so a
        # shape's stand-in (scored for every job of the shape) is scored without it
        if job.affinity_key and zid is not None and args.affinity_weight and not memo.is_stand_in(quota):
            tracked = self.affinity(job.affinity_key)
            total = sum(tracked.values())
            if total:
                score += args.affinity_weight * tracked[zid] / total
        return score

    def best_n(self, quota: QuotaInfo, ranked: list[tuple[NodeInfo, float]]) -> NodeInfo | None:
        job = _job_of_quota(self.ssn, quota)
        plan = self.plans.get(job.key) if job is not None else None
        if not isinstance(plan, GangPlan):
            return None
        want = plan.nodes.get(quota.name)
        return next((n for n, _ in ranked if n.name == want), None)

    def select(self, quota: QuotaInfo, node: NodeInfo) -> Status:
        """Other jobs' quotas keep off nodes held for a waiting gang (topology jobs are kept off
        by their planner, which knows the job when it judges a shape)."""
        if not self.holds.any():
            return SKIP
        if quota.static_bind_node:  # the operator named its node: a hold does not overrule that
            return SKIP
        job = _job_of_quota(self.ssn, quota)  # None: not claimed yet (a pod the extender places inline)
        if job is not None and job.topology:
            return SKIP
        if self.keeper.settled != len(self.ssn.intents):
            self.keeper.settle()
        holders = self.holds.holders(node.name)
        if holders and (job is None or job.key not in holders):
            gangs = f"gang {holders[0]}" if len(holders) == 1 else "gangs " + ", ".join(sorted(holders))
            return Status.unschedulable(Reason.NODE_HELD_FOR_GANG, f"held for {gangs}")
        return SKIP

    def spot_zone(self, task: TaskInfo, node: NodeInfo) -> Status:
        """The zone rule for a spot pod of a topology job (see the module docstring)."""
        if not task.spot or task.uid in self._judging_spot:
            return SKIP
        ssn = self.ssn
        job = ssn.job(task.job)
        if job is None or not job.topology:
            return SKIP
        memo = self.memo
        zid = memo.zone_of.get(node.name)
        siblings = [t for t in job.alive_tasks() if t.spot and t.uid != task.uid]
        placed = {memo.zone_of.get(t.node) for t in siblings if t.node}
        if placed:
            if zid in placed:
                return SUCCESS
            zones = ", ".join(sorted(z[1] for z in placed if z is not None))
            return Status.unschedulable(Reason.ZONE_MISMATCH, f"the job's spot pods run in zone {zones}")
        need = 1 + sum(1 for t in siblings if not t.node)
        kind = _spot_kind(task)
        room = self._zone_spot_room(zid, task, kind) if zid is not None else 0
        if room < need:
            return Status.unschedulable(
                Reason.NO_ZONE_FITS, f"zone {zid[1] if zid else node.name} has room for {room} of {need} spot pods"
            )
        remembered = self._remembered_zone(job, task, kind, need)
        target = remembered or self._spot_target(task, kind, need)
        if zid == target:
            return SUCCESS
        assert target is not None  # zid holds the job, so some zone does
        why = "where its first pod was sent" if remembered else "the fullest that holds them"
        return Status.unschedulable(Reason.ZONE_MISMATCH, f"the job's {need} spot pods go to zone {target[1]}, {why}")

    def _remembered_zone(self, job: JobInfo, task: TaskInfo, kind: SpotKind, need: int) -> ZoneId | None:
        """The zone the extender let a pod of the job into before any was seen bound
        (``Snapshot.spot_zones``), while it still holds the job's ``need`` unplaced pods: the best
        fit may have moved since (another pod bound elsewhere), but the first pod's bind is on its
        way there, and its siblings must follow it."""
        node = self.ssn.snap.spot_zones.get(job.key)
        zid = self.memo.zone_of.get(node) if node else None
        if zid is None or self._zone_spot_room(zid, task, kind) < need:
            return None
        return zid

    def _spot_target(self, task: TaskInfo, kind: SpotKind, need: int) -> ZoneId | None:
        """The one zone the first spot pod of a topology job may start in: best fit, as for a gang's
        quotas — the zone with the least room that holds ``need`` pods like ``task`` (ties: fewer
        nodes, then zone order). One zone, not every zone that holds the job: kube-scheduler binds
        asynchronously, so a sibling may be filtered before the extender hears the first pod's bind;
        with the cache unchanged it is sent to the same zone."""
        key = (kind, need)
        if key in self._spot_targets:  # one filter call asks for every node: find the zone once
            return self._spot_targets[key]
        best: tuple[int, int, ZoneId] | None = None
        for zid, nodes in self.memo.zone_nodes.items():
            room = self._zone_spot_room(zid, task, kind)
            if room >= need and (best is None or (room, len(nodes), zid) < best):
                best = (room, len(nodes), zid)
        target = self._spot_targets[key] = best[2] if best is not None else None
        return target

    def _zone_spot_room(self, zid: ZoneId, task: TaskInfo, kind: SpotKind) -> int:
        """How many pods like ``task`` the zone takes: on the nodes whose other TN predicates
        (readiness, taints, selectors, spot pools, storage …) take such a pod, their ``idle`` room
        within what the pod's spot pool lends there (:func:`_spot_capacity`); a node that refuses
        it holds none of the job. Kept per request and placement key until a pod is
        placed or evicted in the session (``kind``: :func:`_spot_kind` of ``task``)."""
        key = (zid, kind)
        room = self._spot_room.get(key)
        if room is None:
            ssn = self.ssn
            nodes = [n for n in map(ssn.node, self.memo.zone_nodes[zid]) if n is not None]
            self._judging_spot.add(task.uid)  # the zone rule abstains while the others judge
            try:
                room = sum(_spot_capacity(task, n, ssn.spot_resource) for n in nodes if ssn.tn.predicate(task, n).ok)
            finally:
                self._judging_spot.discard(task.uid)
            self._spot_room[key] = room
        return room

    def on_event(self, ev: Event) -> None:
        kind = ev.kind
        if kind is EventKind.ALLOCATE or kind is EventKind.EVICT:
            # a pod placed or evicted (TN path): the zones' spot room changed, and so may the
            # node's room for quotas (its stray pods) and its scores (eviction cost)
            self._spot_room.clear()
            self._spot_targets.clear()
            if self._memo is not None:
                self._memo.on_ledger_change(ev.node)
            return
        if kind is EventKind.CLAIM or kind is EventKind.UNCLAIM:
            if self._memo is not None:
                self._memo.forget_quota(ev.quota)
            task = self.ssn.task(ev.task)
            if task is not None:
                self.plans.pop(task.job, None)
                self._claim_moved(task.job, ev.quota)
            return
        if self._memo is None:
            return
        self._memo.on_ledger_change(ev.node)
        if kind is EventKind.BIND_QUOTA and not ev.undo and self._affinity is None:
            return  # a bind: the plan stands, and no affinity is tracked
        quota = self.ssn.quota(ev.quota)
        added = (kind is EventKind.BIND_QUOTA) != ev.undo
        zid = self._memo.zone_of.get(ev.node)
        for job in self._claimant_jobs(quota) if quota is not None else ():
            if ev.undo or not added:
                self.plans.pop(job.key, None)  # discarded or released: plan again when next asked
            if job.affinity_key and zid is not None and self._affinity is not None:
                self._affinity[job.affinity_key][zid] += 1 if added else -1

    def _claimant_jobs(self, quota: QuotaInfo) -> list[JobInfo]:
        """The jobs whose tasks claim ``quota``, each once (mostly one)."""
        keys = dict.fromkeys(c.job for c in quota.claims.values())
        return [j for j in map(self.ssn.job, keys) if j is not None]

    def _claim_moved(self, job_key: str, quota_name: str) -> None:
        """A task of ``job_key`` claimed or gave up ``quota_name``: if the quota is bound, where the
        job holds quotas changed, and with it its affinity key's counts (counted again when next
        read)."""
        if self._affinity is None:
            return
        job, quota = self.ssn.job(job_key), self.ssn.quota(quota_name)
        if job is not None and job.affinity_key and quota is not None and quota.node_name:
            self._affinity = None


def _spot_capacity(task: TaskInfo, node: NodeInfo, resource: str) -> int:
    """How many spot pods like ``task`` the node takes: its ``idle`` room, and no more than the
    node's spot pool of theirs lends (a node with 8 idle GPUs whose exclusive pool has 2 left
    takes one exclusive 2-GPU pod, not four)."""
    room = capacity_for(task.request, node.idle)
    pool = sylas.pool_capacity(node, task, resource)
    return room if pool is None else min(room, pool)


SpotKind = tuple[tuple[tuple[str, object], ...], tuple[object, ...], str]


def _spot_kind(task: TaskInfo) -> SpotKind:
    """What the zone rule's counts of a spot pod depend on: its request, what node filters read
    of it (``placement_key``) and its spot pool. Pods of one kind fit the same zones alike."""
    return (map_key(task.request.q), task.placement_key(), task.spot_pool)


class Plugin:
    NAME: Final = NAME
    Args = TopologyArgs
    STAGES: Final = frozenset(
        {
            "job.zone_candidates",
            "job.quota_allocate",
            "qn.select",
            "qn.node_order",
            "qn.best_n",
            "tn.predicate",
            "events",
        }
    )
    EVENT_KINDS: Final = frozenset(
        {
            EventKind.CLAIM,
            EventKind.UNCLAIM,
            EventKind.BIND_QUOTA,
            EventKind.RELEASE_QUOTA,
            EventKind.ALLOCATE,
            EventKind.EVICT,
        }
    )  # the statement events its handler follows
    RANK_ORDERED_BEST_N: Final = True

    def __init__(self, args: TopologyArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> Mapping[str, Callable[..., Any]]:
        t = _Topology(ssn, self.args)
        return {
            "job.zone_candidates": t.zone_candidates,
            "job.quota_allocate": t.quota_allocate,
            "qn.select": t.select,
            "qn.node_order": t.node_order,
            "qn.best_n": t.best_n,
            "tn.predicate": t.spot_zone,
            "events": t.on_event,
        }


def _job_of_quota(ssn: Session, quota: QuotaInfo) -> JobInfo | None:
    for claim in quota.claims.values():
        return ssn.job(claim.job)
    return None
