"""What the topology planner knows of the cluster within one session: zones, and per quota *shape*
which nodes can take such a quota, how many, and how they score.

A **shape** is a key under which quotas filter and score identically on every node (request,
selectors, tolerations, affinity, mount points, their pods' placement keys). Quotas with quota
affinity or a static node, and quotas another quota's anti-affinity repels, read names and labels:
they have no shape and are judged one by one. The topology score's cross-job affinity term is a
zone's, not a node's, and reads the job: a shape's stand-in is scored without it
(:meth:`FitMemo.is_stand_in`), and the planner weighs affinity where it chooses zones.

For a shape the memo evaluates the QN ``select`` and ``predicate`` stages **once per node** on a
detached, unbound stand-in of the shape. A refusal that says only "not enough ``quota_idle``"
leaves the node *eligible* if the stages pass it for the stand-in asking for nothing (under
``and(...)`` the room refusal may have ended the judgement before the rest ran): how many quotas
of the shape it takes (its capacity) is then plain arithmetic on the quota ledger less the node's
stray pods, which every bind and release on the node changes, and every pod placed there or
evicted; the memo follows them
(:meth:`FitMemo.on_ledger_change`). Nothing else a session does can change a predicate's answer
for a shape, so nothing else is re-evaluated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from extender.framework.session import Session
from extender.framework.status import SUCCESS, Code, Reason, Status
from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo, QuotaPhase
from extender.model.resources import Resource
from extender.plugins.topology.gangplan import ZoneId, ZoneOffer, domain_unit
from extender.plugins.topology.nodechoice import Candidate, rank_key
from extender.plugins.topology.ranking import ZoneRanking

if TYPE_CHECKING:
    from extender.plugins.topology.mixedfrontier import Frontier
    from extender.plugins.topology.mixedorder import MixedNode

# a zone's nodes as a gang of several kinds sees them: (zone, each kind's shape ids, head shape id)
MembersKey = tuple[ZoneId, tuple[tuple[int, ...], ...], int]
KindsKey = tuple[tuple[tuple[tuple[str, int], ...], int, frozenset[int]], ...]  # mixedmembers.kinds_key

__all__ = ["UNBOUNDED", "FitMemo", "ShapeFit", "capacity_for"]

UNBOUNDED = 1 << 30  # the capacity of a node for a request of nothing
_ROOM = frozenset({Reason.INSUFFICIENT_QUOTA_IDLE})


def _room_only(status: Status) -> bool:
    """A refusal for want of ``quota_idle`` and nothing else."""
    return status.code is Code.UNSCHEDULABLE and {f.reason for f in status.failures} <= _ROOM


def capacity_for(request: Resource, room: Resource) -> int:
    """How many quotas of ``request`` fit ``room`` — a node's ``quota_room()`` (the ledger's rule,
    applied repeatedly: a requested name the node does not advertise fits none)."""
    have = room.q
    out = UNBOUNDED
    for name, amount in request.q.items():
        if amount <= 0:
            continue
        free = have.get(name)
        if free is None or free < amount:
            return 0
        out = min(out, free // amount)
    return out


@dataclass(slots=True)
class ShapeFit:
    """One shape's view of the nodes: eligibility, capacity and score per node, and each zone's
    total capacity (exact whenever read: :meth:`FitMemo._fit` catches it up with the nodes
    changed since)."""

    rep: QuotaInfo  # detached, unbound stand-in of the shape
    synced: int  # how many of the memo's changed nodes this view has caught up with
    eligible: dict[str, bool] = field(default_factory=dict)
    refusals: dict[str, Status] = field(default_factory=dict)  # node → why it is not eligible
    capacity: dict[str, int] = field(default_factory=dict)  # eligible node → slots now
    score: dict[str, float] = field(default_factory=dict)  # node → QN score (dropped on change)
    zone_capacity: dict[ZoneId, int] = field(default_factory=dict)
    # zone → its nodes with room, best first (a changed node is re-ranked when the zone is next read)
    rankings: dict[ZoneId, ZoneRanking] = field(default_factory=dict)
    offers: dict[ZoneId, ZoneOffer] = field(default_factory=dict)  # dropped when the zone changes
    # GPU spec → the offers of its zones; a zone changed since (stale_offers) is offered again when read
    spec_offers: dict[str, list[ZoneOffer]] = field(default_factory=dict)
    stale_offers: set[ZoneId] = field(default_factory=set)


class FitMemo:
    """Zones of the session and the :class:`ShapeFit` of every shape met so far.
    ``neighbour_scores``: a node's QN score reads the capacity of the nodes at the next lower and
    higher node index (topology ``continuity_weight`` > 0), so a change of a node's ledger changes
    its neighbours' scores too."""

    def __init__(self, ssn: Session, *, neighbour_scores: bool = False) -> None:
        self.ssn = ssn
        self._at_index: dict[int, list[str]] | None = {} if neighbour_scores else None  # index → nodes
        self.zone_of: dict[str, ZoneId] = {}
        self.zone_nodes: dict[ZoneId, list[str]] = {}  # ascending node index
        self.spec_zones: dict[str, list[ZoneId]] = {}  # GPU spec → its zones, first index ascending
        self.spec_position: dict[ZoneId, int] = {}  # zone → where it is in its spec's spec_zones
        self.all_indices: dict[str, list[int]] = {}  # GPU spec → node indices, ascending
        self._touched: dict[ZoneId, int] = {}  # zone → nodes holding a bound quota
        self._busy: set[str] = set()  # the nodes holding a bound quota
        for node in ssn.nodes():  # rank order: every list comes out ascending
            zid = (node.spec, node.zone or f"node#{node.name}")
            self.zone_of[node.name] = zid
            members = self.zone_nodes.get(zid)
            if members is None:
                members = self.zone_nodes[zid] = []
                in_spec = self.spec_zones.setdefault(zid[0], [])
                self.spec_position[zid] = len(in_spec)
                in_spec.append(zid)
                self._touched[zid] = 0
            members.append(node.name)
            self.all_indices.setdefault(node.spec, []).append(node.index)
            if self._at_index is not None:
                self._at_index.setdefault(node.index, []).append(node.name)
            if node.quota_allocated:
                self._touched[zid] += 1
                self._busy.add(node.name)
        # the tiers above the leaf: zone → (its spine, its core, …) as level → name, from its first node
        self.zone_tiers: dict[ZoneId, dict[int, str]] = {}
        self.levels = 1  # the highest tier level any node names (1: leaves only)
        for zid, members in self.zone_nodes.items():
            first = ssn.node(members[0])
            tiers = first.tiers if first is not None else ()
            self.zone_tiers[zid] = {lv: name for lv, name in enumerate(tiers) if lv >= 2 and name}
            if self.zone_tiers[zid]:
                self.levels = max(self.levels, *self.zone_tiers[zid])
        # NVLink / accelerator domains (tier 0): node → its domain, for the nodes that name one
        self.domain_of = {n.name: n.tier(0) for n in ssn.nodes() if n.tier(0)}
        self._shape_ids: dict[object, int] = {}
        self.shapes: dict[int, ShapeFit] = {}  # read through _fit(), which catches the view up
        self._quota_shape: dict[str, int | None] = {}
        self._stand_ins: set[str] = set()  # the names of the shapes' stand-ins
        self._no_room: dict[str, QuotaInfo] = {}  # stand-in → it asking for nothing (judge)
        self._changed: list[str] = []  # nodes whose ledgers changed, in order (see _fit)
        self._zone_changed: dict[ZoneId, list[str]] = {}  # zone → its nodes' changes seen, in order
        self._versioned = 0  # how many of _changed the zones' lists count
        # the mixed planner's members of a zone (mixedmembers.MixedMembers), as of the zone's version
        self.mixed_members: dict[MembersKey, tuple[int, list[MixedNode]]] = {}
        # … and what those members hold of a gang of these kinds (mixedfrontier.frontier_of), likewise
        self.mixed_fronts: dict[tuple[MembersKey, KindsKey], tuple[int, Frontier]] = {}
        self.mixed_may: dict[tuple[MembersKey, KindsKey], tuple[int, bool]] = {}  # … mixedfrontier.may_hold

    # --- shapes ------------------------------------------------------------------------------
    def shape_of(self, quota: QuotaInfo) -> int | None:
        """The quota's shape id, or None when it must be judged on its own."""
        known = self._quota_shape.get(quota.name, -1)
        if known != -1:
            return known
        key = self._shape_key(quota)
        sid: int | None = None
        if key is not None:
            sid = self._shape_ids.get(key)
            if sid is None:
                sid = self._shape_ids[key] = len(self._shape_ids)
                rep = quota.clone()  # re-checking a node with a quota bound there finds room that is not
                rep.name = f"{quota.name}#shape{sid}"
                rep.node_name = ""
                rep.phase = QuotaPhase.EMPTY
                self.shapes[sid] = ShapeFit(rep, synced=len(self._changed))
                self._stand_ins.add(rep.name)
        self._quota_shape[quota.name] = sid
        return sid

    def is_stand_in(self, quota: QuotaInfo) -> bool:
        """``quota`` is a shape's stand-in (scored for the shape, not for one job)."""
        return quota.name in self._stand_ins

    def forget_quota(self, name: str) -> None:
        """The quota's claims changed: its claimants are part of its shape."""
        self._quota_shape.pop(name, None)

    def _shape_key(self, quota: QuotaInfo) -> object | None:
        if quota.quota_affinity or quota.quota_anti_affinity or quota.static_bind_node:
            return None
        ssn = self.ssn
        for name in ssn.anti_affinity_holders():
            holder = ssn.quota(name)
            if holder is not None and any(t.matches(quota.name, quota.labels) for t in holder.quota_anti_affinity):
                return None
        return ssn.filter_key(quota)

    # --- evaluation --------------------------------------------------------------------------
    def judge(self, quota: QuotaInfo, node: NodeInfo) -> Status:
        """The QN select and predicate stages for ``quota`` on ``node``, room aside: a refusal for
        want of ``quota_idle`` only is success here (room is counted separately) — once the
        stages pass the node for a quota like ``quota`` that asks for nothing. Under ``and(...)``
        a room refusal ends the judgement before the participants listed after it run: a
        NotReady or tainted node that is full now would count as one the shape may use once it
        empties (a hold could be taken on it)."""
        status = self._stages(quota, node)
        if status.ok or not _room_only(status):
            return SUCCESS if status.ok else status
        again = self._stages(self._roomless(quota), node)
        return SUCCESS if again.ok or _room_only(again) else again

    def _stages(self, quota: QuotaInfo, node: NodeInfo) -> Status:
        qn = self.ssn.qn
        status = qn.select(quota, node)
        return qn.predicate(quota, node) if status.ok else status

    def _roomless(self, quota: QuotaInfo) -> QuotaInfo:
        """``quota`` asking for nothing (kept for a shape's stand-in, whose claims never change)."""
        kept = self._no_room.get(quota.name)
        if kept is not None:
            return kept
        out = quota.clone()
        out.request = Resource.empty()
        if quota.name in self._stand_ins:
            self._no_room[quota.name] = out
        return out

    def node_capacity(self, quota: QuotaInfo, sid: int | None, node: NodeInfo) -> int:
        """Slots the node has for quotas like ``quota`` now (0: refused or full)."""
        if sid is None:
            return capacity_for(quota.request, node.quota_room()) if self.judge(quota, node).ok else 0
        return self._capacity(self._fit(sid), node)

    def eligible(self, quota: QuotaInfo, sid: int | None, node: NodeInfo) -> bool:
        """Whether the QN stages let quotas like ``quota`` on ``node`` at all (room aside)."""
        if sid is None:
            return self.judge(quota, node).ok
        fit = self._fit(sid)
        self._capacity(fit, node)
        return fit.eligible.get(node.name, False)

    def zone_capacity(self, quota: QuotaInfo, sid: int | None, zid: ZoneId) -> int:
        if sid is None:
            return sum(self.node_capacity(quota, None, n) for n in self._nodes(zid))
        return self._zone_capacity(self._fit(sid), zid)

    def candidates(self, quota: QuotaInfo, sid: int | None, zid: ZoneId) -> list[Candidate]:
        """The zone's nodes with room for the shape, with their QN scores, best first
        (``nodechoice.rank_key``)."""
        if sid is None:
            return sorted(self._scan_alone(quota, zid), key=rank_key)
        fit = self._fit(sid)
        ranking = fit.rankings.get(zid)
        if ranking is None:
            ranking = fit.rankings[zid] = ZoneRanking(self._scan(fit, zid))
        return ranking.ranked(partial(self._candidate, fit))

    def offer(self, quota: QuotaInfo, sid: int | None, zid: ZoneId) -> ZoneOffer:
        """What the zone offers a gang of the shape (no affinity, no holds: the planner's to add)."""
        if sid is None:
            return self._make_offer(zid, self.zone_capacity(quota, None, zid))
        return self._offer(self._fit(sid), zid)

    def spec_offers(self, quota: QuotaInfo, sid: int | None, spec: str) -> list[ZoneOffer]:
        """:meth:`offer` of every zone of ``spec``, in the order of ``spec_zones``. A shape's list
        is kept between reads; only the zones changed since are offered again."""
        zones = self.spec_zones.get(spec, [])
        if sid is None:
            return [self.offer(quota, None, z) for z in zones]
        fit = self._fit(sid)
        listed = fit.spec_offers.get(spec)
        if listed is None:
            listed = fit.spec_offers[spec] = [self._offer(fit, z) for z in zones]
            fit.stale_offers.difference_update(zones)
            return listed
        stale = [z for z in fit.stale_offers if z[0] == spec]
        if stale:
            listed = fit.spec_offers[spec] = list(listed)  # a list handed out earlier stays as it was
            for zid in stale:
                listed[self.spec_position[zid]] = self._offer(fit, zid)
            fit.stale_offers.difference_update(stale)
        return listed

    def score(self, quota: QuotaInfo, sid: int | None, node: NodeInfo) -> float:
        """The node's QN score (``node_order`` + ``batch_node_order``) for quotas like ``quota``."""
        if sid is None:
            return self._score_now(quota, node) if self.ssn.qn.has_scores else 0.0
        return self._score(self._fit(sid), node)

    def hold_rows(
        self,
        quota: QuotaInfo,
        sid: int | None,
        zid: ZoneId,
        held: Callable[[str], bool],
        kept: Mapping[str, Resource],
    ) -> list[tuple[int, int, int, str]]:
        """(room now, room when empty, index, name) of the zone's nodes that could take the shape
        and are not held for another gang: what a hold is chosen from. A node too small for one
        quota of the shape even when empty (a GPU gone from an 8-GPU node, for 8-GPU workers) is
        none of them: holding it would keep others off room the gang can never use. ``kept``:
        node → what the gang's own bound quotas take there, which no departure of others frees
        ("empty" is empty of the other jobs)."""
        out = []
        for node in self._nodes(zid):
            if held(node.name) or not self.eligible(quota, sid, node):
                continue
            own = kept.get(node.name)
            empty = capacity_for(quota.request, node.allocatable - own if own is not None else node.allocatable)
            if empty > 0:
                out.append((self.node_capacity(quota, sid, node), empty, node.index, node.name))
        return out

    # --- one shape's view, caught up (the public reads above call _fit once, then these) -----
    def _capacity(self, fit: ShapeFit, node: NodeInfo) -> int:
        cap = fit.capacity.get(node.name)
        if cap is not None:
            return cap
        ok = fit.eligible.get(node.name)
        if ok is None:
            status = self.judge(fit.rep, node)
            ok = fit.eligible[node.name] = status.ok
            if not ok:
                fit.refusals[node.name] = status
        cap = capacity_for(fit.rep.request, node.quota_room()) if ok else 0
        fit.capacity[node.name] = cap
        return cap

    def _zone_capacity(self, fit: ShapeFit, zid: ZoneId) -> int:
        total = fit.zone_capacity.get(zid)
        if total is None:
            total = fit.zone_capacity[zid] = sum(self._capacity(fit, n) for n in self._nodes(zid))
        return total

    def _score(self, fit: ShapeFit, node: NodeInfo) -> float:
        if not self.ssn.qn.has_scores:
            return 0.0
        score = fit.score.get(node.name)
        if score is None:
            score = fit.score[node.name] = self._score_now(fit.rep, node)
        return score

    def _score_now(self, quota: QuotaInfo, node: NodeInfo) -> float:
        qn = self.ssn.qn
        return qn.node_order(quota, node) + qn.batch_node_order(quota, [node]).get(node.name, 0.0)

    def _candidate(self, fit: ShapeFit, name: str) -> Candidate | None:
        """The node as a candidate for the shape now; None when it has no room (or is gone)."""
        node = self.ssn.node(name)
        if node is None:
            return None
        cap = self._capacity(fit, node)
        return Candidate(name, node.index, cap, self._score(fit, node)) if cap > 0 else None

    def _scan(self, fit: ShapeFit, zid: ZoneId) -> Iterator[Candidate]:
        for node in self._nodes(zid):
            cap = self._capacity(fit, node)
            if cap > 0:
                yield Candidate(node.name, node.index, cap, self._score(fit, node))

    def _scan_alone(self, quota: QuotaInfo, zid: ZoneId) -> Iterator[Candidate]:
        """:meth:`_scan` for a quota without a shape (judged on its own, nothing kept)."""
        for node in self._nodes(zid):
            cap = self.node_capacity(quota, None, node)
            if cap > 0:
                yield Candidate(node.name, node.index, cap, self.score(quota, None, node))

    def _offer(self, fit: ShapeFit, zid: ZoneId) -> ZoneOffer:
        known = fit.offers.get(zid)
        if known is None:
            known = fit.offers[zid] = self._make_offer(zid, self._zone_capacity(fit, zid))
        return known

    def _make_offer(self, zid: ZoneId, capacity: int) -> ZoneOffer:
        members = self.zone_nodes[zid]
        first = self.ssn.node(members[0])
        return ZoneOffer(zid, len(members), capacity, self.untouched(zid), first.index if first else 0)

    def refusals(self, quota: QuotaInfo, sid: int | None, spec: str) -> dict[str, Status]:
        """Why nodes of ``spec`` refuse quotas like ``quota``: for a shape, the nodes looked at so
        far; for a quota judged on its own (quota affinity, anti-affinity, a static node), every
        node of ``spec`` judged again — its refusal (``QuotaAntiAffinity``, …) is kept nowhere, and
        this is read only for a gang that gets no plan."""
        if sid is None:
            nodes = (n for z in self.spec_zones.get(spec, ()) for n in self._nodes(z))
            return {n.name: st for n in nodes if not (st := self.judge(quota, n)).ok}
        zones = set(self.spec_zones.get(spec, ()))
        return {n: s for n, s in self._fit(sid).refusals.items() if self.zone_of.get(n) in zones}

    def span(self, zones: Sequence[ZoneId]) -> int:
        """The highest tier a set of zones spans: 1 for one leaf, 2 for leaves of one spine, …
        (``levels + 1``: the whole cluster)."""
        if len(zones) <= 1:
            return 1
        for level in range(2, self.levels + 1):
            names = {self.zone_tiers[z].get(level) for z in zones}
            if len(names) == 1 and None not in names:
                return level
        return self.levels + 1

    def tiers_spanned(self, nodes: Iterable[str]) -> tuple[int, int, int]:
        """What ``nodes`` span, the least first (the tiers' rule where it only breaks ties, as
        between equally short runs under continuity): the highest tier (:meth:`span`), the
        leaves, the NVLink domains (a node without one is a domain of its own)."""
        names = list(nodes)
        zones = sorted({self.zone_of[n] for n in names})
        return self.span(zones), len(zones), len({domain_unit(n, self.domain_of) for n in names})

    def untouched(self, zid: ZoneId) -> bool:
        return self._touched.get(zid, 0) == 0

    def _nodes(self, zid: ZoneId) -> Iterator[NodeInfo]:
        node = self.ssn.node
        for name in self.zone_nodes[zid]:
            n = node(name)
            if n is not None:
                yield n

    # --- following the statement -------------------------------------------------------------
    def on_ledger_change(self, node_name: str) -> None:
        """A quota was bound to or released from ``node_name``, or a pod placed there or evicted:
        whether its zone is untouched changes now; its capacity (quota room less stray pods) and
        score (binpack, eviction cost) for each shape change when that shape is next read
        (:meth:`_fit`), and so do its index neighbours' scores when scores read neighbours.
        Nothing else does."""
        node = self.ssn.node(node_name)
        zid = self.zone_of.get(node_name)
        if node is None or zid is None:
            return
        busy = bool(node.quota_allocated)
        if busy != (node_name in self._busy):
            if busy:
                self._busy.add(node_name)
                self._touched[zid] += 1
            else:
                self._busy.discard(node_name)
                self._touched[zid] -= 1
        self._changed.append(node_name)
        if self._at_index is not None:
            for side in (node.index - 1, node.index + 1):
                self._changed += self._at_index.get(side, ())

    def zone_version(self, zid: ZoneId) -> int:
        """How many times a node of the zone (or, when scores read neighbours, a neighbour of one)
        has changed so far: what was kept of the zone at another version is stale. Counted when
        read, not on every change, so sessions that never read it pay nothing for it."""
        if self._versioned < len(self._changed):
            changed, zone_of = self._zone_changed, self.zone_of
            for name in self._changed[self._versioned :]:
                changed.setdefault(zone_of[name], []).append(name)
            self._versioned = len(self._changed)
        return len(self._zone_changed.get(zid, ()))

    def changed_since(self, zid: ZoneId, version: int) -> set[str]:
        """The zone's nodes that changed after it was at ``version`` (:meth:`zone_version`): what
        was kept of its other nodes then still holds."""
        self.zone_version(zid)
        return set(self._zone_changed.get(zid, ())[version:])

    def _fit(self, sid: int) -> ShapeFit:
        """The shape's view, caught up with every node changed since it was last read: a bind
        costs the same however many shapes the session has met, and a node changed several
        times between two reads of a shape is looked at once."""
        fit = self.shapes[sid]
        if fit.synced < len(self._changed):
            for name in dict.fromkeys(self._changed[fit.synced :]):
                self._refresh(fit, name)
            fit.synced = len(self._changed)
        return fit

    def _refresh(self, fit: ShapeFit, node_name: str) -> None:
        """The node's capacity and score for ``fit``'s shape, its zone's total and ranking, and
        the zone's offers, as the node's ledger is now."""
        node = self.ssn.node(node_name)
        zid = self.zone_of[node_name]
        fit.score.pop(node_name, None)
        fit.offers.pop(zid, None)
        fit.stale_offers.add(zid)
        old = fit.capacity.get(node_name)
        if old is None or node is None:
            return
        new = capacity_for(fit.rep.request, node.quota_room()) if fit.eligible.get(node_name) else 0
        fit.capacity[node_name] = new
        total = fit.zone_capacity.get(zid)
        if total is not None:
            fit.zone_capacity[zid] = total - old + new
        ranking = fit.rankings.get(zid)
        if ranking is not None:
            ranking.mark_stale(node_name)
