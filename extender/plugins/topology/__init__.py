"""``topology``: RDMA-zone-aware placement of a job's quotas (seed 三 3.3–3.5, 2.6).

On for a job when it requests an ``rdma/*`` resource, or when its PodGroup / pod annotation says
so (``enable-topology-scheduling: "true"`` also demands strict rank order; ``"false"`` turns it
off). For such a job:

* ``job.zone_candidates`` — the nodes the job's next quota may use: the zones of its bound
  siblings; for the first quota, the zones planned for the whole gang by the algorithm with the
  highest weight that gives an answer (namedzone, continuity — see ``zones.py``). Zones are
  computed per GPU spec, so A100 and H100 nodes never share one even on the same switch.
* ``qn.node_order`` — ``namedzone_weight · 1/zone size + continuity_weight · neighbour score +
  affinity`` (zones holding quotas of jobs with the same ``topology-affinity-key`` score higher).
* ``qn.best_n`` — rank order: the smallest node index strictly between the nodes of the quota's
  neighbouring task indices. The allocate_zone action evaluates candidates in this order and
  stops at the first feasible one (``RANK_ORDERED``), which gives the same answer as scoring all.
* ``job.quota_allocate`` — ``force_node_order``: a strict-order job commits only if its node
  indices ascend with its task indices; every topology job commits only within one GPU spec.

Non-topology jobs are left alone (every stage abstains).

Within a session the plugin remembers, per quota *shape* (request and every constraint that
filters identically on all nodes; quotas with quota affinity or a static node, or that another
quota's anti-affinity repels, have none), which nodes take such a quota. A bind or release on
a node marks it *stale* where it could have changed the answer; nothing else can. With that
memo:

* candidates skip nodes known not to fit; a stale node is offered as it is, and the pipeline's
  rejections come back (``framework.pipeline.Rejectable``) instead of the plugin re-checking it —
  except that a stale node whose quota ledger has no room left for the request is skipped (and
  memoized) at once: ``NodeInfo.add_quota`` would refuse the bind whatever the predicates say;
* planning reads only ``min(zone capacity, gang size)``, so a zone is scanned only that far, and
  stale nodes are looked at again only when the fresh ones do not suffice;
* zone views are kept per gang class and rebuilt only for the zones a bind or release touched;
* a walk over a zone starts past its prefix of nodes known not to fit.

These are shortcuts only: ``tests/core/test_topology_memo.py`` schedules random clusters with and
without the memo and requires identical bindings.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import Field

from extender import wellknown
from extender.framework.plugin import ArgsModel
from extender.framework.session import Event, EventKind, Session
from extender.framework.status import SKIP, SUCCESS, Reason, Status
from extender.model.job import JobInfo
from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo, QuotaPhase
from extender.model.resources import format_quantity
from extender.plugins.topology.siblings import BoundSiblings
from extender.plugins.topology.zones import (
    ZoneView,
    best_in_range,
    continuity_block,
    continuity_score,
    plan_by_spec,
)

NAME: Final = "topology"
# event kinds as module names: the handler runs for every bind (Python 3.11 reads enum members
# through EnumType.__getattr__'s slot, several times slower than a global)
_CLAIM: Final = EventKind.CLAIM
_UNCLAIM: Final = EventKind.UNCLAIM
_BIND_QUOTA: Final = EventKind.BIND_QUOTA
_RELEASE_QUOTA: Final = EventKind.RELEASE_QUOTA


class TopologyArgs(ArgsModel):
    namedzone_weight: float = Field(100.0, ge=0, description="weight of the namedzone algorithm")
    continuity_weight: float = Field(0.0, ge=0, description="weight of the continuity algorithm")
    affinity_weight: float = Field(10.0, ge=0, description="weight of cross-job zone affinity in scores")


Args = TopologyArgs


ZoneId = tuple[str, str]


@dataclass(slots=True)
class _Plan:
    zones: list[ZoneId]
    indexed: list[tuple[int, str]]  # the plan's nodes as (node index, name), ascending


@dataclass(slots=True)
class _ClassViews:
    by_zone: dict[ZoneId, ZoneView]
    seen: int  # how much of _State.zone_log they reflect


@dataclass(slots=True)
class _State:
    """Per-session memory. Everything derived from node state is kept per zone and dropped for
    a zone as soon as a quota is bound to or released from one of its nodes (events)."""

    zone_of: dict[str, ZoneId] = field(default_factory=dict)
    zone_nodes: dict[ZoneId, list[tuple[int, str]]] = field(default_factory=dict)  # ascending index
    spec_zones: dict[str, list[ZoneId]] = field(default_factory=dict)  # GPU spec → its zones
    plans: dict[str, _Plan] = field(default_factory=dict)
    shape_ids: dict[object, int] = field(default_factory=dict)
    shape_rep: dict[int, QuotaInfo] = field(default_factory=dict)  # a quota of each shape
    node_fit: dict[int, dict[str, bool]] = field(default_factory=dict)  # shape → node → fits
    stale: dict[int, set[str]] = field(default_factory=dict)  # shape → nodes whose fit may have changed
    stale_in: dict[int, dict[ZoneId, set[str]]] = field(default_factory=dict)  # the same, by zone
    quota_shape: dict[str, int | None] = field(default_factory=dict)  # quota → its shape id (until its claims change)
    zone_pos: dict[str, int] = field(default_factory=dict)  # node → its position in its zone's list
    # zone → shape → [n, fit]: the zone's first n nodes were looked at for the shape, and fit of
    # them are memoized as fitting. Planning needs only min(capacity, gang size), so a zone is
    # scanned only as far as that takes.
    zone_cap: dict[ZoneId, dict[int, list[int]]] = field(default_factory=dict)
    # shape → zone → how many of the scanned nodes are stale but memoized as fitting (a bind made
    # them stale: they may fit no more), so that fit minus this is a lower bound without a look
    stale_fit: dict[int, dict[ZoneId, int]] = field(default_factory=dict)
    zone_room: dict[ZoneId, dict[tuple[str, ...], int]] = field(default_factory=dict)
    # (spec, shape, resource names, gang size) → the zone views of such gangs, kept for gangs
    # without zone affinity and made again for the zones in zone_log past what they have seen
    class_views: dict[tuple[str, int, tuple[str, ...], int], _ClassViews] = field(default_factory=dict)
    zone_log: list[ZoneId] = field(default_factory=list)  # the zone of every bind and release, in order
    # node → the shapes with a node_fit entry for it (a bind or release looks at those only)
    node_shapes: dict[str, list[int]] = field(default_factory=dict)
    affinity: defaultdict[str, Counter[ZoneId]] = field(default_factory=lambda: defaultdict(Counter))
    failures: dict[str, Status] = field(default_factory=dict)  # job → why no zone fits
    # (shape, zone) → p: the zone's first p nodes are all known not to take a quota of the shape
    # (memoized False, untouched since): a walk over the zone starts at p. Lowered by any bind or
    # release that touches one of them.
    closed: dict[tuple[int, ZoneId], int] = field(default_factory=dict)
    # job → its bound quotas (siblings.py); kept up to date by the statement's binds, dropped on
    # anything else (rank ranges and "taken" nodes are read from it for every quota)
    bound: dict[str, BoundSiblings] = field(default_factory=dict)


def _shape(ssn: Session, quota: QuotaInfo) -> object | None:
    """A key under which quotas filter identically on every node, or None (do not memoize).

    Quota affinity reads a quota's name and labels: a quota that has affinity or anti-affinity
    of its own, or that another's anti-affinity repels, gets none. Other quotas are judged by
    their spec and their claimants' placement keys only."""
    if quota.quota_affinity or quota.quota_anti_affinity or quota.static_bind_node:
        return None
    for name in ssn.anti_affinity_holders():
        holder = ssn.quota(name)
        if holder is not None and any(t.matches(quota.name, quota.labels) for t in holder.quota_anti_affinity):
            return None
    return ssn.filter_key(quota)


def _describe_gang(quotas: Sequence[QuotaInfo]) -> str:
    """``4×1 GPU`` — what the gang asks of a zone, as an operator would say it."""
    first = quotas[0].request
    if not all(q.request == first for q in quotas):
        return f"{len(quotas)} quotas"
    gpu = first.get(wellknown.RESOURCE_GPU)
    what = f"{format_quantity(wellknown.RESOURCE_GPU, gpu)} GPU" if gpu else str(first)
    return f"{len(quotas)}×{what}"


class Plugin:
    NAME: Final = NAME
    Args = TopologyArgs
    STAGES: Final = frozenset({"job.zone_candidates", "job.quota_allocate", "qn.node_order", "qn.best_n", "events"})
    EVENT_KINDS: Final = frozenset(
        {EventKind.CLAIM, EventKind.UNCLAIM, EventKind.BIND_QUOTA, EventKind.RELEASE_QUOTA}
    )  # the statement events its handler follows
    RANK_ORDERED_BEST_N: Final = True

    def __init__(self, args: TopologyArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        st = _State()
        ready = False
        args = self.args
        # the planning algorithms that take part, highest weight first
        weighted = ((args.namedzone_weight, "namedzone"), (args.continuity_weight, "continuity"))
        algos = [algo for weight, algo in sorted(weighted, key=lambda x: -x[0]) if weight > 0]

        def ensure() -> None:
            """Zones and the zone-affinity tracker, built on first use (non-topology sessions skip it)."""
            nonlocal ready
            if ready:
                return
            ready = True
            for node in ssn.nodes():  # rank order: zone lists come out ascending
                zid = (node.spec, node.zone or f"node#{node.name}")
                st.zone_of[node.name] = zid
                members = st.zone_nodes.get(zid)
                if members is None:
                    members = st.zone_nodes[zid] = []
                    st.spec_zones.setdefault(zid[0], []).append(zid)
                st.zone_pos[node.name] = len(members)
                members.append((node.index, node.name))
            for job in ssn.jobs():
                if job.affinity_key:
                    for q in ssn.job_quotas(job):
                        if q.node_name:
                            st.affinity[job.affinity_key][st.zone_of.get(q.node_name, ("", ""))] += 1

        def shape_id(quota: QuotaInfo) -> int | None:
            known = st.quota_shape.get(quota.name, -2)  # -2: not known yet (a miss is common)
            if known != -2:
                return known
            key = _shape(ssn, quota)
            if key is None:
                st.quota_shape[quota.name] = None
                return None
            sid = st.shape_ids.get(key)
            if sid is None:
                sid = st.shape_ids[key] = len(st.shape_ids)
                # a detached, unbound stand-in of the shape: re-checking a node with a quota that
                # is itself bound there would find room that is not there (has_quota shortcut)
                rep = quota.clone()
                rep.name = f"{quota.name}#shape{sid}"
                rep.node_name = ""
                rep.phase = QuotaPhase.EMPTY
                st.shape_rep[sid] = rep
                st.node_fit[sid] = {}
                st.stale[sid] = set()
                st.stale_in[sid] = {}
                st.stale_fit[sid] = {}
            st.quota_shape[quota.name] = sid
            return sid

        def evaluate(quota: QuotaInfo, node: NodeInfo) -> bool:
            if not node.takes_quota(quota.name, quota.request):  # the bind would be refused anyway
                return False
            return ssn.qn.select(quota, node).ok and ssn.qn.predicate(quota, node).ok

        def scanned(sid: int, zid: ZoneId, name: str) -> list[int] | None:
            """The zone's [scanned, fit] counts for the shape if they cover the node, else None."""
            per_zone = st.zone_cap.get(zid)
            counts = per_zone.get(sid) if per_zone is not None else None
            return counts if counts is not None and st.zone_pos[name] < counts[0] else None

        def refresh(sid: int, name: str) -> bool:
            """Re-evaluate a node for a shape."""
            node = ssn.node(name)
            new = node is not None and evaluate(st.shape_rep[sid], node)
            record(sid, name, new)
            return new

        def record(sid: int, name: str, new: bool) -> None:
            """What the node's predicates now say for the shape, keeping the zone counts consistent."""
            stale = st.stale[sid]
            was_stale = name in stale
            stale.discard(name)
            zid = st.zone_of.get(name)
            old = st.node_fit[sid].get(name)
            st.node_fit[sid][name] = new
            if old is None:
                st.node_shapes.setdefault(name, []).append(sid)
            if zid is not None:
                if was_stale:
                    in_zone = st.stale_in[sid].get(zid)
                    if in_zone is not None:
                        in_zone.discard(name)
                counts = scanned(sid, zid, name)
                if counts is not None:
                    if was_stale and old:
                        st.stale_fit[sid][zid] -= 1
                    if old is not None and old != new:
                        counts[1] += 1 if new else -1

        def fits(quota: QuotaInfo, node: NodeInfo, sid: int | None) -> bool:
            if sid is None:
                return evaluate(quota, node)
            if node.name in st.stale[sid]:
                return refresh(sid, node.name)
            hit = st.node_fit[sid].get(node.name)
            if hit is None:
                hit = st.node_fit[sid][node.name] = evaluate(quota, node)
                st.node_shapes.setdefault(node.name, []).append(sid)
            return hit

        def zone_candidates(job: JobInfo, quota: QuotaInfo) -> Iterable[str] | Status | None:
            """The plan's nodes in the order to try them, lazily: inside the quota's rank range
            first (ascending node index), then — unless the job demands strict order — the rest."""
            plan = st.plans.get(job.key)  # only topology jobs have one
            if plan is None:
                if not job.topology:
                    return None
                ensure()
                quotas = ssn.job_quotas(job)
                info = bound_info(job, quotas)
                if info.quotas:
                    plan = sibling_plan(job, [q for q in quotas if q.name in info.quotas])
                else:
                    plan = make_plan(job, [q for q in quotas if not q.node_name])
                    if plan is None:
                        return st.failures.get(job.key) or Status.unschedulable(Reason.NO_ZONE_FITS, "no zone fits")
                st.plans[job.key] = plan
            info = bound_info(job)
            low, high = neighbour_range(info, quota)
            taken = info.taken  # read as candidates are drawn: before this quota binds
            # nodes known not to take a quota of this shape are skipped: they would fail the same
            # predicates again
            sid = shape_id(quota)
            if sid is None:
                return _ordered(plan.indexed, low, high, taken.__contains__, strict=job.strict_order)
            known, stale = st.node_fit[sid], st.stale[sid]

            def skip(name: str) -> bool:
                if name in taken:
                    return True
                if name not in stale:
                    return known.get(name) is False
                # A node a bind or release touched since it was memoized is offered as it is (the
                # pipeline looks at it anyway, and tells us when it does not fit: rejected) —
                # unless its quota ledger has no room left for the request: the bind would be
                # refused whatever the predicates say (NodeInfo.add_quota), so it does not fit.
                node = ssn.node(name)
                if node is not None and not node.takes_quota(quota.name, quota.request):
                    record(sid, name, False)
                    return True
                return False

            def rejected(names: Iterable[str]) -> None:
                for name in names:
                    if name in st.zone_of:
                        record(sid, name, False)

            closed = closed_prefix(sid, plan.zones[0]) if len(plan.zones) == 1 else 0
            names = _ordered(plan.indexed, low, high, skip, strict=job.strict_order, closed=closed)
            return _Candidates(names, rejected)

        def closed_prefix(sid: int, zid: ZoneId) -> int:
            """How many of the zone's first nodes are known not to take the shape (see _State.closed)."""
            key = (sid, zid)
            p = st.closed.get(key, 0)
            members = st.zone_nodes[zid]
            known, stale = st.node_fit[sid], st.stale[sid]
            while p < len(members) and known.get(members[p][1]) is False and members[p][1] not in stale:
                p += 1
            st.closed[key] = p
            return p

        def bound_info(job: JobInfo, quotas: list[QuotaInfo] | None = None) -> BoundSiblings:
            """The job's bound quotas (``quotas``: the job's, when the caller has them at hand)."""
            info = st.bound.get(job.key)
            if info is None:
                if quotas is None:
                    quotas = ssn.job_quotas(job)
                ranked = [(q.name, q.rank) for q in quotas]
                info = st.bound[job.key] = BoundSiblings(ranked)
                for q, (name, idx) in zip(quotas, ranked, strict=True):
                    node = ssn.node(q.node_name) if q.node_name else None
                    if node is not None:
                        info.add(name, idx, node.index, node.name)
            return info

        def unbound_quotas(job: JobInfo) -> list[QuotaInfo]:
            return [q for q in ssn.job_quotas(job) if not q.node_name]

        def sibling_plan(job: JobInfo, siblings: list[QuotaInfo]) -> _Plan:
            """The zones of the bound siblings — widened by the fewest further zones of the same
            GPU model when the rest of the gang no longer fits there (a sibling's node failed,
            a quota was released)."""
            zones = sorted({st.zone_of[q.node_name] for q in siblings if q.node_name in st.zone_of})
            pending = unbound_quotas(job)
            if pending:
                head = pending[0]
                sid = shape_id(head)
                taken = {q.node_name for q in siblings}
                free = 0
                for z in zones:
                    for _, name in st.zone_nodes[z]:
                        n = ssn.node(name)
                        if name not in taken and n is not None and fits(head, n, sid):
                            free += 1
                if free < len(pending):
                    spec = zones[0][0] if zones else head.spec
                    more = plan_namedzone(
                        job, pending, len(pending) - free, head, sid, spec=spec, exclude=frozenset(zones)
                    )
                    if more is not None:
                        zones += more.zones
            return plan_of(zones)

        def plan_of(zones: list[ZoneId]) -> _Plan:
            if len(zones) == 1:  # a zone's list is already in index order (and never mutated)
                return _Plan(zones, st.zone_nodes[zones[0]])
            return _Plan(zones, sorted(x for z in zones for x in st.zone_nodes[z]))

        def make_plan(job: JobInfo, pending: list[QuotaInfo]) -> _Plan | None:
            if not pending:
                return None
            need = len(pending)
            head = pending[0]
            sid = shape_id(head)
            uniform = sid is not None and all(shape_id(q) == sid for q in pending[1:])
            for algo in algos:
                if algo == "namedzone":
                    plan = plan_namedzone(job, pending, need, head, sid if uniform else None)
                else:
                    plan = plan_continuity(pending, need, head, sid if uniform else None)
                if plan is not None:
                    return plan
            st.failures[job.key] = Status.unschedulable(Reason.NO_ZONE_FITS, f"no zone holds {_describe_gang(pending)}")
            return None

        def zone_capacity(
            zid: ZoneId, pending: Sequence[QuotaInfo], head: QuotaInfo, sid: int | None, need: int
        ) -> int:
            """How many of the gang's quotas the zone can take now, one per node: exact when below
            ``need``, else any number ≥ ``need`` (all that planning reads is min(capacity, need))."""
            if sid is not None:
                per_zone = st.zone_cap.get(zid)
                if per_zone is None:
                    per_zone = st.zone_cap[zid] = {}
                counts = per_zone.get(sid)
                if counts is None:
                    counts = per_zone[sid] = [0, 0]
                # Enough scanned nodes memoized as fitting that no bind touched since: the touched
                # ones need no second look. Else scan further first (what a scan learns holds until
                # a bind on that node), and look at the touched ones again only when the whole
                # zone is scanned.
                stale_fit = st.stale_fit[sid]
                members = st.zone_nodes[zid]
                while counts[1] - stale_fit.get(zid, 0) < need and counts[0] < len(members):
                    name = members[counts[0]][1]
                    n = ssn.node(name)
                    ok = n is not None and fits(head, n, sid)  # before counting: not yet scanned
                    counts[0] += 1
                    if ok:
                        counts[1] += 1
                if counts[1] - stale_fit.get(zid, 0) < need:
                    in_zone = st.stale_in[sid].get(zid)
                    for name in list(in_zone or ()):  # exact now (refresh adjusts the counts)
                        refresh(sid, name)
                return counts[1]
            # Heterogeneous gang: place greedily in index order, one quota per node.
            i = 0
            for _, name in st.zone_nodes[zid]:
                n = ssn.node(name)
                if n is not None and i < len(pending) and fits(pending[i], n, None):
                    i += 1
            return i

        def zone_room(zid: ZoneId, names: tuple[str, ...]) -> int:
            per_zone = st.zone_room.setdefault(zid, {})
            room = per_zone.get(names)
            if room is None:
                room = 0
                for _, name in st.zone_nodes[zid]:
                    n = ssn.node(name)
                    if n is not None:
                        room += sum(n.quota_idle.get(r) for r in names)
                per_zone[names] = room
            return room

        def plan_namedzone(
            job: JobInfo,
            pending: Sequence[QuotaInfo],
            need: int,
            head: QuotaInfo,
            sid: int | None,
            *,
            spec: str | None = None,
            exclude: frozenset[ZoneId] = frozenset(),
        ) -> _Plan | None:
            spec = head.spec if spec is None else spec
            tracked = st.affinity.get(job.affinity_key) if job.affinity_key else None
            names = tuple(sorted(head.request.q))
            zones = st.spec_zones.get(spec, ()) if spec else st.zone_nodes

            def view(zid: ZoneId) -> ZoneView | None:
                cap = min(zone_capacity(zid, pending, head, sid, need), need)
                if cap <= 0:
                    return None
                members = st.zone_nodes[zid]
                affinity = tracked[zid] if tracked else 0
                return ZoneView(zid, len(members), cap, zone_room(zid, names), members[0][0], affinity)

            views: Iterable[ZoneView]
            if sid is not None and not exclude and not tracked:
                # the gangs of one class (shape, size) see the same views: kept, and made again
                # only for the zones a bind or release touched since
                key = (spec, sid, names, need)
                known = st.class_views.get(key)
                todo: Iterable[ZoneId]
                if known is None:
                    known = st.class_views[key] = _ClassViews({}, 0)
                    todo = zones
                else:  # a zone of another GPU model holds nothing for this class
                    todo = {z for z in st.zone_log[known.seen :] if not spec or z[0] == spec}
                known.seen = len(st.zone_log)
                by_zone = known.by_zone
                for zid in todo:
                    v = view(zid)
                    if v is None:
                        by_zone.pop(zid, None)
                    else:
                        by_zone[zid] = v
                views = by_zone.values()
            else:
                views = [v for v in map(view, (z for z in zones if z not in exclude)) if v is not None]
            chosen = plan_by_spec(views, need)
            if chosen is None:
                return None
            zones = [z.id for z in chosen]
            return plan_of(zones)

        def plan_continuity(pending: Sequence[QuotaInfo], need: int, head: QuotaInfo, sid: int | None) -> _Plan | None:
            best: list[str] | None = None
            by_spec: dict[str, list[tuple[str, int, bool]]] = {}
            for n in ssn.nodes():
                if head.spec and n.spec != head.spec:
                    continue
                by_spec.setdefault(n.spec, []).append((n.name, n.index, fits(head, n, sid)))
            for rows in by_spec.values():
                block = continuity_block(rows, need)
                if block is not None and (best is None or len(block) < len(best)):
                    best = block
            if best is None:
                return None
            zones = sorted({st.zone_of[n] for n in best})
            indexed = sorted((node.index, node.name) for node in (ssn.node(n) for n in best) if node is not None)
            return _Plan(zones, indexed)

        def node_order(quota: QuotaInfo, node: NodeInfo) -> float:
            job = _job_of_quota(ssn, quota)
            if job is None or not job.topology:
                return 0.0
            ensure()
            zid = st.zone_of.get(node.name)
            score = 0.0
            if zid is not None and args.namedzone_weight:
                score += args.namedzone_weight / max(1, len(st.zone_nodes[zid]))
            if args.continuity_weight:
                left = ssn.node_by_index(node.index - 1)
                right = ssn.node_by_index(node.index + 1)
                sid = shape_id(quota)
                score += args.continuity_weight * continuity_score(
                    left is not None and fits(quota, left, sid), right is not None and fits(quota, right, sid)
                )
            if job.affinity_key and zid is not None and args.affinity_weight:
                tracked = st.affinity.get(job.affinity_key)
                if tracked:
                    total = sum(tracked.values())
                    score += args.affinity_weight * tracked[zid] / max(1, total)
            return score

        def best_n(quota: QuotaInfo, ranked: Sequence[tuple[NodeInfo, float]]) -> NodeInfo | None:
            job = _job_of_quota(ssn, quota)
            if job is None or not job.topology or not ranked:
                return None
            low, high = neighbour_range(bound_info(job), quota)
            by_name = {n.name: n for n, _ in ranked}
            choice = best_in_range([(n.index, n.name) for n, _ in ranked], low, high)
            return by_name.get(choice) if choice is not None else None

        def neighbour_range(info: BoundSiblings, quota: QuotaInfo) -> tuple[int | None, int | None]:
            """(node index of the nearest bound sibling of a smaller task index, … of a larger)."""
            me = quota.rank
            return (None, None) if me is None else info.neighbours(me)

        def quota_allocate(job: JobInfo) -> Status:
            if not job.topology:
                return SKIP
            bound = bound_info(job).quotas  # quota → (quota index, node index, node name)
            specs = set()
            for _, _, name in bound.values():
                node = ssn.node(name)
                if node is not None:
                    specs.add(node.spec)
            if len(specs) > 1:
                return Status.unresolvable(Reason.SPEC_MISMATCH, "quotas on GPU models " + ", ".join(sorted(specs)))
            if job.strict_order:
                ranked = sorted(((idx, ni) for idx, ni, _ in bound.values() if idx is not None), key=lambda x: x[0])
                last = -(1 << 62)
                for idx, node_index in ranked:
                    if node_index <= last:
                        return Status.unschedulable(
                            Reason.TOPOLOGY_ORDER, f"task {idx} would land on node index {node_index} ≤ {last}"
                        )
                    last = node_index
            failure = st.failures.get(job.key)
            if failure is not None and unbound_quotas(job):
                return failure
            return SUCCESS

        def on_event(ev: Event) -> None:
            kind = ev.kind
            if kind is _CLAIM or kind is _UNCLAIM:
                task = ssn.task(ev.task)
                if task is not None:
                    st.quota_shape.pop(ev.quota, None)  # its claimants are part of its shape
                    st.bound.pop(task.job, None)
                return
            if not ready or (kind is not _BIND_QUOTA and kind is not _RELEASE_QUOTA):
                return
            name = ev.node
            added = (kind is _BIND_QUOTA) != ev.undo  # the quota is now on the node
            zid = st.zone_of.get(name)
            if zid is not None:
                st.zone_log.append(zid)  # the class views of this zone are to be made again
            # A bind only takes room (and adds a quota that others' anti-affinity may reject):
            # a node that did not fit a shape still does not. A release only gives room back: a
            # node that fitted still does. Only the other memo entries need a second look.
            could_fit = not added
            for sid in st.node_shapes.get(name, ()):
                fit = st.node_fit[sid][name]
                if fit == could_fit:
                    continue
                stale = st.stale[sid]
                if name in stale:
                    continue
                stale.add(name)
                if zid is None:
                    continue
                st.stale_in[sid].setdefault(zid, set()).add(name)
                pos = st.zone_pos[name]
                p = st.closed.get((sid, zid))
                if p is not None and pos < p:
                    st.closed[(sid, zid)] = pos
                if fit and scanned(sid, zid, name) is not None:  # counted as fitting
                    stale_fit = st.stale_fit[sid]
                    stale_fit[zid] = stale_fit.get(zid, 0) + 1
            quota = ssn.quota(ev.quota)
            if quota is None:
                return
            if zid is not None:
                rooms = st.zone_room.get(zid)
                if rooms:
                    q = quota.request.q
                    for names, room in rooms.items():  # values change, keys do not
                        delta = 0
                        for r in names:
                            delta += q.get(r, 0)
                        rooms[names] = room - delta if added else room + delta
            job = _job_of_quota(ssn, quota)
            if job is None:
                return
            bound = st.bound.get(job.key)
            if bound is not None:
                node = ssn.node(name) if added else None
                # an unbinding (a discarded gang, a release: rare), or a bind it cannot account
                # for: build it again when next read
                if node is None or not bound.add(ev.quota, quota.rank, node.index, node.name):
                    del st.bound[job.key]
            if ev.undo and kind is _BIND_QUOTA:
                st.plans.pop(job.key, None)  # discarded: plan again next time
            if job.affinity_key and zid is not None:
                st.affinity[job.affinity_key][zid] += 1 if added else -1

        return {
            "job.zone_candidates": zone_candidates,
            "job.quota_allocate": quota_allocate,
            "qn.node_order": node_order,
            "qn.best_n": best_n,
            "events": on_event,
        }


class _Candidates:
    """A quota's candidate nodes, lazily in the order to try them, that learns from the pipeline
    which of them did not fit (:class:`extender.framework.pipeline.Rejectable`): a quota of the
    same shape would fail there too until a bind or release on the node."""

    __slots__ = ("_names", "rejected")

    def __init__(self, names: Iterator[str], rejected: Callable[[Iterable[str]], None]) -> None:
        self._names = names
        self.rejected = rejected

    def __iter__(self) -> Iterator[str]:
        return self._names


def _ordered(
    indexed: list[tuple[int, str]],
    low: int | None,
    high: int | None,
    skip: Callable[[str], bool],
    *,
    strict: bool,
    closed: int = 0,
) -> Iterator[str]:
    """Nodes with ``low < index < high`` ascending, then (unless ``strict``) the others ascending;
    the first ``closed`` positions are known to be skipped and are not looked at."""
    n = len(indexed)
    start = 0 if low is None else bisect.bisect_right(indexed, (low, "\U0010ffff"))
    stop = n if high is None else bisect.bisect_left(indexed, (high, ""))
    segments = ((start, stop),) if strict else ((start, stop), (0, start), (max(start, stop), n))
    for a, b in segments:
        for pos in range(max(a, closed), b):
            name = indexed[pos][1]
            if not skip(name):
                yield name


def _job_of_quota(ssn: Session, quota: QuotaInfo) -> JobInfo | None:
    for claim in quota.claims.values():
        return ssn.job(claim.job)
    return None
