"""The session side of gang planning: reads the cluster through :class:`FitMemo`, applies the pure
rules of :mod:`gangplan`, and answers one plan per gang: which node each unbound quota goes to.

* **GPU spec.** A gang plans within one spec: its bound siblings' spec, else the spec its quotas
  ask for, else each spec in turn, keeping the best plan (fewest zones, then rule 1's costs).
* **Bound siblings** (a drifted or released quota, a node that failed): the rest of the gang goes
  to the siblings' zones first, and only what they cannot hold to the fewest further zones; in
  rank order around the siblings whenever those zones allow it (any gang), and a strict-order gang
  that those zones cannot keep in order takes the fewest further zones that can.
* **Gangs whose quotas differ in size** (a launcher or master beside workers): planned exactly
  over their *kinds* (``mixedplan.py``; the session side in ``mixedplanner.py``): the fewest
  zones whose nodes hold every quota on every resource, then each quota's node, in rank order
  whenever those zones allow it (always, for a strict-order gang); under ``continuity``, the
  shortest run of consecutive nodes that holds them so first; else one NVLink domain first; a
  gang of more than ``STATE_LIMIT`` count vectors is planned over merged kinds
  (``gangparts.coarsen``: never an over-promise, but such a gang may wait while it would fit).
  Every quota is re-checked as it is bound, like any other.
* **Quota affinity between its own quotas** (``gangparts.glue``): the quotas that must share a
  node (a quota is bound beside the earlier one its ``quotaAffinity`` names) are planned as one;
  a quota whose term also selects bound quotas goes beside one of those, or — when that plan
  fails — beside its earlier partner (``MixedPlanner._glued_best``).
* **minMember below the gang's size** (``gangparts.py``): a gang that does not fit whole places
  the most of its unbound quotas that fit, the lowest ranks first, when they reach ``minMember``.
* **Holds.** Nodes held for another gang (``holds.py``) are no candidates; and a gang that would
  span more zones because of a hold than without it waits instead (``NodeHeldForGang``, naming
  the holders: :meth:`GangPlanner.holders_keeping_off`, ``verdicts.py``): a hold may delay others, never scatter
  them (the keeper may end the holds of gangs after it in hold order: ``keeper.py``).
* **Refusals.** A gang without a plan is told why in operators' words (gathered by the
  :class:`~extender.plugins.topology.verdicts.PlanVerdicts` it inherits, worded by ``refusals.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from functools import partial
from typing import Protocol

from extender.framework.session import Session
from extender.framework.status import Status
from extender.model.job import JobInfo
from extender.model.quota import QuotaInfo
from extender.plugins.gang import quotas_bound
from extender.plugins.topology.fitmemo import FitMemo
from extender.plugins.topology.gangparts import GangPlan, SpecPlan, kinds_of, most_that_fit, plan_key
from extender.plugins.topology.gangplan import Range, Slot, ZoneId, ZoneOffer, best_single_zone, choose_zones, slots_in
from extender.plugins.topology.holds import HoldBook
from extender.plugins.topology.mixedplanner import MixedPlanner
from extender.plugins.topology.nodechoice import Candidate, choose_nodes, continuity_block, fill_run
from extender.plugins.topology.rankorder import assign_ranks, order_break, ordered_in_zones
from extender.plugins.topology.refusals import out_of_rank_order
from extender.plugins.topology.siblings import rank_ranges
from extender.plugins.topology.tierwalk import by_tier, first_near_siblings, near_siblings
from extender.plugins.topology.verdicts import PlanVerdicts

__all__ = ["GangPlan", "GangPlanner"]


class NodeLike(Protocol):
    """A node as a planner models it (``nodechoice.Candidate``, ``mixedorder.MixedNode``)."""

    @property
    def name(self) -> str: ...


class GangPlanner(PlanVerdicts):
    """Plans gangs for one session; nodes the hold book keeps for another gang are no candidates."""

    def __init__(
        self,
        ssn: Session,
        memo: FitMemo,
        *,
        pack: bool,
        continuity: bool,
        affinity: Callable[[str], Counter[ZoneId]] | None,
        holds: HoldBook,
    ) -> None:
        """``affinity(key)``: the quotas per zone of the jobs sharing a ``topology-affinity-key``
        (None: cross-job affinity is off)."""
        self.ssn, self.memo = ssn, memo
        self.pack, self.continuity = pack, continuity
        self.affinity, self.holds = affinity, holds
        self._unheld: GangPlanner | None = None
        self._kept_off_by: dict[Status, tuple[str, ...]] = {}  # a NodeHeldForGang refusal → the holders it names
        self.mixed = MixedPlanner(self)  # gangs whose quotas differ in size

    def without_holds(self) -> GangPlanner:
        """A planner of the same session that sees no holds: what a gang would get were nothing
        held (it shares the memo, which knows nothing of holds)."""
        if self._unheld is None:
            self._unheld = GangPlanner(
                self.ssn,
                self.memo,
                pack=self.pack,
                continuity=self.continuity,
                affinity=self.affinity,
                holds=HoldBook.none(),
            )
        return self._unheld

    def plan(self, job: JobInfo, quotas: Sequence[QuotaInfo]) -> GangPlan | Status:
        """Nodes for the job's unbound ``quotas`` (all its quotas, rank order, bound ones included):
        for all of them if they fit, else for the most of them, the lowest ranks first, that fit
        and reach ``minMember`` with its bound ones (``gang.quotas_bound``); the rest wait
        (``GangPlan.rest``)."""
        unbound = [q for q in quotas if not q.node_name]
        whole = self._plan_some(job, quotas, unbound)
        if isinstance(whole, GangPlan):
            return whole
        least = max(1, job.min_member - quotas_bound(self.ssn, job))  # what it lacks of minMember
        part = most_that_fit(lambda k: self._plan_some(job, quotas, unbound[:k]), least, len(unbound) - 1)
        if not isinstance(part, GangPlan):
            return whole
        part.rest = whole
        return part

    def _plan_some(self, job: JobInfo, quotas: Sequence[QuotaInfo], unbound: Sequence[QuotaInfo]) -> GangPlan | Status:
        """Nodes for ``unbound``, some of the job's unbound quotas, as one gang."""
        mix = kinds_of(unbound, self.memo.shape_of, self.ssn.gpu_resources)
        if len(mix.kinds) > 1:
            return self.mixed.plan(job, quotas, mix)
        sid = self.memo.shape_of(mix.head)
        return self._plan_group(job, quotas, unbound, mix.head, sid, judged=sid is not None and len(mix.kinds) == 1)

    def _plan_group(
        self,
        job: JobInfo,
        quotas: Sequence[QuotaInfo],
        unbound: Sequence[QuotaInfo],
        head: QuotaInfo,
        sid: int | None,
        *,
        judged: bool,
    ) -> GangPlan | Status:
        """Nodes for ``unbound``, every one counted as ``head`` (of shape ``sid``); ``judged``: all
        of ``unbound`` have that shape, so the plan's nodes were judged for each of them."""
        specs, bound_zones = self.specs(quotas, head)
        if bound_zones and job.hard_tier == 0 and self.memo.domain_of:
            in_domain = self._plan_siblings_domain(job, quotas, unbound, head, sid, judged=judged)
            if in_domain is not None:
                return in_domain
            if self.holds.any():
                unheld = self.without_holds()._plan_siblings_domain(job, quotas, unbound, head, sid, judged=False)
                if (kept_off := self.kept_off_domain(job, unheld, quotas, unbound)) is not None:
                    return kept_off
        best = self._best_spec(job, head, sid, specs, need=len(unbound), bound_zones=bound_zones)
        held = Counter(q.node_name for q in quotas if q.node_name) if bound_zones else None
        if self.holds.any():
            free_planner = self.without_holds()
            free = free_planner._best_spec(job, head, sid, specs, need=len(unbound), bound_zones=bound_zones)
            if self.past_limit(job, free, held or ()) and (best is None or self.past_limit(job, best, held or ())):
                # were nothing held it would wait for its limit all the same: no hold keeps it off
                refusal = free_planner._plan_group(job, quotas, unbound, head, sid, judged=judged)
                if isinstance(refusal, Status):
                    return refusal
            kept_off = self.kept_off(job, best, free, unbound, held=held or ())
            if kept_off is not None:
                return kept_off
        if best is None:
            return self.failure(job, head, sid, specs, unbound)
        if self.past_limit(job, best, held or ()):
            return self.above_limit(job, head, sid, best, unbound, held=held or ())
        slots = best.slots
        if slots is None:
            cands = partial(self._candidates, job, head, sid)
            slots = slots_in(
                cands,
                best.zones,
                len(unbound),
                home=bound_zones,
                pack=self.pack,
                held=held,
                domains=self.memo.domain_of,
            )
        ranges = rank_ranges(quotas, unbound, self.ssn.node)
        placed, zones = assign_ranks(slots, ranges), [z.id for z in best.zones]
        # only bound siblings can break the order assign_ranks gives (it sorts the slots)
        broken = order_break(placed, ranges) if bound_zones or job.strict_order else None
        if broken is not None:
            away = sum(1 for s in placed if self.memo.zone_of.get(s.node) not in bound_zones)
            ordered = self._in_order(job, head, sid, zones, ranges, home=bound_zones, away=away, held=held or {})
            if ordered is not None:
                placed, zones = ordered
            elif job.strict_order:
                return out_of_rank_order(unbound, broken)
            else:  # no order around its siblings: rank order among its own quotas (mixedorder.order_kept)
                placed = sorted(placed, key=lambda s: (s.index, s.node))
        nodes = {q.name: s.node for q, s in zip(unbound, placed, strict=True)}
        return GangPlan(nodes, zones, judged)

    def _plan_siblings_domain(
        self,
        job: JobInfo,
        quotas: Sequence[QuotaInfo],
        unbound: Sequence[QuotaInfo],
        head: QuotaInfo,
        sid: int | None,
        *,
        judged: bool,
    ) -> GangPlan | Status | None:
        """Tier 0 around bound siblings: a gang held to one NVLink domain (``highestTierAllowed:
        nvlink``, hard) whose bound siblings sit in one named domain places the rest there — its
        slots, distinct nodes free of the gang first, ranks sharing rather than wait — in rank order
        if it can (a strict-order gang only so: else ``TopologyOrder``). None when the siblings span
        more than that one domain or it has too little room: the gang's plan by zones then tells
        why it waits (:meth:`above_limit`)."""
        memo = self.memo
        held = Counter(q.node_name for q in quotas if q.node_name)
        (domain, *others) = {memo.domain_of.get(n, "") for n in held}
        if others or not domain:
            return None
        home = sorted({memo.zone_of[n] for n in held if n in memo.zone_of})

        def cands(zid: ZoneId) -> list[Candidate]:
            return [c for c in self._candidates(job, head, sid, zid) if memo.domain_of.get(c.name) == domain]

        offers = [
            ZoneOffer(z, o.size, sum(c.capacity for c in cands(z)), o.untouched, o.first_index)
            for z in home
            for o in (self.offer(job, head, sid, z),)
        ]
        if sum(z.capacity for z in offers) < len(unbound):
            return None
        slots = slots_in(cands, offers, len(unbound), home=home, pack=self.pack, held=held, domains=memo.domain_of)
        ranges = rank_ranges(quotas, unbound, self.ssn.node)
        placed = assign_ranks(slots, ranges)
        broken = order_break(placed, ranges)
        if broken is not None:
            ordered = ordered_in_zones(cands, home, ranges, home=home, pack=self.pack, held=held)
            if ordered is not None:
                placed = ordered[0]
            elif job.strict_order:
                return out_of_rank_order(unbound, broken)
            else:
                placed = sorted(placed, key=lambda s: (s.index, s.node))
        nodes = {q.name: s.node for q, s in zip(unbound, placed, strict=True)}
        return GangPlan(nodes, [z.id for z in offers], judged)

    def _in_order(
        self,
        job: JobInfo,
        head: QuotaInfo,
        sid: int | None,
        zones: list[ZoneId],
        ranges: Sequence[Range],
        *,
        home: list[ZoneId],
        away: int,
        held: Collection[str],
    ) -> tuple[list[Slot], list[ZoneId]] | None:
        """:func:`rankorder.ordered_in_zones` for the gang: a strict-order one may take further zones
        of its spec beside its siblings' (``home``) — within its hard ``highestTierAllowed`` of
        them, if it has one; under their spine first (``tierwalk.first_near_siblings``) —; any
        other keeps to its chosen ``zones``, and to ``away`` quotas outside ``home`` (what its
        plan by room put there). ``held``: the nodes of its bound siblings (distinct nodes come
        first)."""
        spec = (home or zones)[0][0] if home or zones else ""
        further = None
        if job.strict_order:
            limit, span = job.hard_tier, self.memo.span
            further = [
                self.offer(job, head, sid, z)
                for z in self.memo.spec_zones.get(spec, [])
                if z not in home and (limit is None or span([*home, z]) <= limit)
            ]
        cands = partial(self._candidates, job, head, sid)

        def ordered(near: Sequence[ZoneOffer] | None) -> tuple[list[Slot], list[ZoneId]] | None:
            return ordered_in_zones(
                cands,
                zones,
                ranges,
                home=home,
                further=near,
                away=None if near else away,
                pack=self.pack,
                held=held,
                domains=self.memo.domain_of,
            )

        if further and home:  # the further zones under the siblings' spine first, as near_siblings
            return first_near_siblings(self.memo.zone_tiers, self.memo.levels, further, home, ordered)
        return ordered(further)

    def specs(self, quotas: Sequence[QuotaInfo], head: QuotaInfo) -> tuple[Collection[str], list[ZoneId]]:
        """The GPU specs a gang may plan in (its bound siblings', else the one ``head`` asks for,
        else every spec), and its bound siblings' zones."""
        memo = self.memo
        bound_zones = sorted({memo.zone_of[q.node_name] for q in quotas if q.node_name in memo.zone_of})
        if bound_zones:
            return {bound_zones[0][0]}, bound_zones
        if head.spec:
            return ([head.spec] if head.spec in memo.spec_zones else []), bound_zones
        return sorted(memo.spec_zones), bound_zones

    def _best_spec(
        self,
        job: JobInfo,
        head: QuotaInfo,
        sid: int | None,
        specs: Collection[str],
        *,
        need: int,
        bound_zones: list[ZoneId],
    ) -> SpecPlan | None:
        """The best spec's plan (rule 1). Under continuity, as the seed's topology plugin takes the
        first algorithm by weight that gives a result: when no run of consecutive nodes of any spec
        holds the gang, the zone rules place it (a gang that fits is never refused)."""
        for continuity in (True, False) if self.continuity else (False,):
            best: SpecPlan | None = None
            for spec in specs:
                plan = self._plan_spec(job, head, sid, spec, need=need, bound_zones=bound_zones, continuity=continuity)
                limit = job.hard_tier
                if continuity and plan is not None and limit is not None and plan.tier(self.memo.domain_of) > limit:
                    plan = None  # a run above a hard tier limit is no answer: the zone rules' is
                if plan is not None and (best is None or plan.key < best.key):
                    best = plan
            if best is not None:
                return best
        return None

    # --- one GPU spec ------------------------------------------------------------------------
    def offer(self, job: JobInfo, head: QuotaInfo, sid: int | None, zid: ZoneId) -> ZoneOffer:
        """What the zone offers this job (the memo's offer, unless holds or affinity change it)."""
        memo = self.memo
        affinity = self.affinity(job.affinity_key)[zid] if self.affinity is not None and job.affinity_key else 0
        held = self.holds.any() and any(self.holds.held_for_other(n, job.key) for n in memo.zone_nodes[zid])
        base = memo.offer(head, sid, zid)
        if not held and not affinity:
            return base
        # held nodes take nothing; else the zone's capacity is the memo's (no need to rank it)
        cap = sum(c.capacity for c in self._candidates(job, head, sid, zid)) if held else base.capacity
        return ZoneOffer(zid, base.size, cap, base.untouched, base.first_index, affinity)

    def _offers(self, job: JobInfo, head: QuotaInfo, sid: int | None, spec: str) -> list[ZoneOffer]:
        """:meth:`offer` of every zone of ``spec``."""
        if self.holds.any():
            return [self.offer(job, head, sid, z) for z in self.memo.spec_zones.get(spec, [])]
        offers = self.memo.spec_offers(head, sid, spec)
        if self.affinity is None or not job.affinity_key:
            return offers
        counts = self.affinity(job.affinity_key)  # the memo's offers, with the key's quotas per zone
        return [
            ZoneOffer(z.id, z.size, z.capacity, z.untouched, z.first_index, n) if (n := counts[z.id]) else z
            for z in offers
        ]

    def _candidates(self, job: JobInfo, head: QuotaInfo, sid: int | None, zid: ZoneId) -> list[Candidate]:
        """The zone's candidates for the job, best first (``nodechoice.rank_key``)."""
        cands = self.memo.candidates(head, sid, zid)
        if not self.holds.any():
            return cands
        return [c for c in cands if not self.holds.held_for_other(c.name, job.key)]

    def _plan_spec(
        self,
        job: JobInfo,
        head: QuotaInfo,
        sid: int | None,
        spec: str,
        *,
        need: int,
        bound_zones: list[ZoneId],
        continuity: bool,
    ) -> SpecPlan | None:
        """The zones this spec would give the gang, with the key that ranks specs (rule 1); with
        ``continuity``, the shortest run of consecutive nodes instead."""
        zones = self.memo.spec_zones.get(spec, [])
        if continuity and not bound_zones:
            return self._plan_continuity(job, head, sid, spec, need=need)
        if self.memo.domain_of and not bound_zones:
            in_domain = self._plan_domain(job, head, sid, spec, need=need)
            if in_domain is not None:
                return in_domain
        if bound_zones:
            home = [self.offer(job, head, sid, z) for z in bound_zones]
            room = sum(z.capacity for z in home)
            chosen = [z for z in home if z.capacity > 0]
            if room < need:
                others = [self.offer(job, head, sid, z) for z in zones if z not in bound_zones]
                more = near_siblings(self.memo.zone_tiers, self.memo.levels, others, bound_zones, need - room)
                if more is None:
                    return None
                chosen += more
        else:
            picked = self._lowest_tier(self._offers(job, head, sid, spec), need)
            if picked is None:
                return None
            chosen = picked
        ids = [z.id for z in chosen]
        span = self.memo.span(sorted({*bound_zones, *ids}) if bound_zones else ids)  # the gang's, bound quotas' too
        return SpecPlan(plan_key(chosen, spec, span), chosen, None)

    def _plan_domain(self, job: JobInfo, head: QuotaInfo, sid: int | None, spec: str, *, need: int) -> SpecPlan | None:
        """Tier 0: the NVLink domain with the least room that holds the whole gang (no RDMA hop at
        all). A domain's room is its slots with ``pack_workers``, its nodes by default: distinct
        nodes come before one NVLink domain, which never makes ranks share a node (4 workers of 4
        GPUs beside a domain of two empty nodes take four nodes of the leaf, not two) — unless the
        job may not leave one domain (``highestTierAllowed: nvlink``, hard): then its slots, so
        a gang one domain holds runs there rather than wait."""
        memo = self.memo
        units: dict[str, list[Candidate]] = {}
        for z in memo.spec_zones.get(spec, []):
            # in index order: a domain's first node breaks ties between domains below
            for c in sorted(self._candidates(job, head, sid, z), key=lambda c: c.index):
                domain = memo.domain_of.get(c.name)
                if domain:
                    units.setdefault(domain, []).append(c)

        def slot_room(cs: list[Candidate]) -> int:
            return sum(c.capacity for c in cs)

        holding: list[tuple[str, list[Candidate]]] = []
        for by_slots in self.domain_rooms(job):
            room: Callable[[list[Candidate]], int] = slot_room if by_slots else len
            holding = [(d, cs) for d, cs in units.items() if room(cs) >= need]
            if holding:
                break
        if not holding:
            return None
        pull = self.domain_affinity(job)
        domain, cands = min(holding, key=lambda u: (-pull(u[1]), room(u[1]), len(u[1]), u[1][0].index, u[0]))
        slots = [Slot(c.name, c.index) for c, n in choose_nodes(cands, need, pack=self.pack) for _ in range(n)]
        offers = [self.offer(job, head, sid, z) for z in sorted({memo.zone_of[c.name] for c in cands})]
        key = (0, 1, -pull(cands), 0, room(cands), len(cands), cands[0].index, spec)
        return SpecPlan(key, offers, slots)

    def domain_affinity(self, job: JobInfo) -> Callable[[Iterable[NodeLike]], int]:
        """The quotas of the job's ``topology-affinity-key`` in the leaves of an NVLink domain's
        nodes: more come first, before room, as among leaves (``gangplan.single_zone_key``)."""
        counts = self.affinity(job.affinity_key) if self.affinity is not None and job.affinity_key else None
        zone_of = self.memo.zone_of

        def pull(nodes: Iterable[NodeLike]) -> int:
            return sum(counts[z] for z in {zone_of[n.name] for n in nodes}) if counts else 0

        return pull

    def domain_rooms(self, job: JobInfo) -> tuple[bool, ...]:
        """How tier 0 weighs an NVLink domain's room, in turn (True: its slots; False: its nodes,
        a domain holding a gang only with a node per quota): its slots with ``pack_workers``; its
        nodes by default (one NVLink domain never makes ranks share a node), then — when the job
        may not leave one domain (``highestTierAllowed: nvlink``, hard) and no domain holds it so —
        its slots: ranks share a domain's nodes rather than wait. For gangs of one size and of
        several (``MixedPlanner._domain``) alike."""
        if self.pack:
            return (True,)
        return (False, True) if job.hard_tier == 0 else (False,)

    def _plan_continuity(self, job: JobInfo, head: QuotaInfo, sid: int | None, spec: str, need: int) -> SpecPlan | None:
        memo = self.memo
        cands = [c for z in memo.spec_zones.get(spec, []) for c in self._candidates(job, head, sid, z)]
        indices = memo.all_indices.get(spec, [])
        block = continuity_block(
            sorted(cands, key=lambda c: c.index), indices, need, lambda run: memo.tiers_spanned(c.name for c in run)
        )
        if block is None:
            return None
        taken = choose_nodes(block, need, pack=True) if self.pack else fill_run(block, need)
        slots = [Slot(c.name, c.index) for c, n in taken for _ in range(n)]
        zids = sorted({memo.zone_of[c.name] for c in block})
        offers = [self.offer(job, head, sid, z) for z in zids]
        key = (memo.span(zids), len(block), 0, 0, sum(c.capacity for c in block), len(block), block[0].index, spec)
        return SpecPlan(key, offers, slots)

    # --- tiers above the leaf ----------------------------------------------------------------
    def _lowest_tier(self, offers: Sequence[ZoneOffer], need: int) -> list[ZoneOffer] | None:
        """Rule 1 applied tier by tier: one leaf if one holds the gang; else :meth:`by_tier`."""
        one = best_single_zone(offers, need) if need > 0 else None
        if one is not None:
            return [one]
        return self.by_tier(offers, lambda zs: choose_zones(zs, need), lambda zs: sum(z.capacity for z in zs) >= need)

    def by_tier(
        self,
        offers: Sequence[ZoneOffer],
        choose: Callable[[Sequence[ZoneOffer]], list[ZoneOffer] | None],
        holds: Callable[[Sequence[ZoneOffer]], bool],
    ) -> list[ZoneOffer] | None:
        """:func:`tierwalk.by_tier` over this session's tiers."""
        return by_tier(self.memo.zone_tiers, self.memo.levels, offers, choose, holds)
