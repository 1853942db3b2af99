"""The session side of gang planning: reads the cluster through :class:`FitMemo`, applies the pure
rules of :mod:`gangplan`, and answers one plan per gang: which node each unbound quota goes to.

* **GPU spec.** A gang plans within one spec: its bound siblings' spec, else the spec its quotas
  ask for, else each spec in turn, keeping the best plan (fewest zones, then rule 1's costs).
* **Bound siblings** (a drifted or released quota, a node that failed): the rest of the gang goes
  to the siblings' zones first, and only what they cannot hold to the fewest further zones; in
  rank order around the siblings whenever those zones allow it (any gang), and a strict-order gang
  that those zones cannot keep in order takes the fewest further zones that can.
* **Gangs whose quotas differ in size** (a launcher or master beside workers): planned exactly
  over their *kinds* (``mixedplan.py``): the fewest zones whose nodes hold every quota on every
  resource, then each quota's node, in rank order whenever those zones allow it (always, for a
  strict-order gang); under ``continuity``, the shortest run of consecutive nodes that holds
  them so first. Without an NVLink-domain tier; a gang of more than ``STATE_LIMIT`` count vectors
  is planned over merged kinds (``gangparts.coarsen``: never an over-promise, but such a gang may
  wait while it would fit). Every quota is re-checked as it is bound, like any other.
* **Quota affinity between its own quotas** (``gangparts.glue``): the quotas that must share a
  node (a quota is bound beside the earlier one its ``quotaAffinity`` names) are planned as one.
* **minMember below the gang's size** (``gangparts.py``): a gang that does not fit whole places
  the most of its unbound quotas that fit, the lowest ranks first, when they reach ``minMember``.
* **Holds.** Nodes held for another gang (``holds.py``) are no candidates; and a gang that would
  span more zones because of a hold than without it waits instead (``NodeHeldForGang``, naming
  the holders: :meth:`GangPlanner.holders_keeping_off`): a hold may delay others, never scatter
  them (the keeper may end the holds of gangs after it in hold order: ``keeper.py``).
* **Refusals.** A gang without a plan is told why in operators' words (``refusals.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from functools import partial

from extender.framework.session import Session
from extender.framework.status import Reason, Status
from extender.model.job import JobInfo
from extender.model.quota import QuotaInfo
from extender.plugins.gang import quotas_bound
from extender.plugins.topology.fitmemo import FitMemo, capacity_for
from extender.plugins.topology.gangparts import GangPlan, Mix, PlanKey, for_planning, kinds_of, most_that_fit, plan_key
from extender.plugins.topology.gangplan import (
    Candidate,
    Range,
    Slot,
    ZoneId,
    ZoneOffer,
    best_single_zone,
    choose_nodes,
    choose_zones,
    continuity_block,
    slots_in,
)
from extender.plugins.topology.holds import HoldBook
from extender.plugins.topology.mixedplan import MixedGang, MixedNode, plan_mixed, plan_run, room_for
from extender.plugins.topology.rankorder import assign_ranks, order_break, ordered_in_zones
from extender.plugins.topology.refusals import (
    describe_gang,
    fits_only_above,
    held_for_others,
    no_zone_fits,
    out_of_rank_order,
)
from extender.plugins.topology.siblings import rank_ranges
from extender.plugins.topology.tierwalk import by_tier, near_siblings

__all__ = ["GangPlan", "GangPlanner"]


@dataclass(slots=True)
class _SpecPlan:
    key: PlanKey
    zones: list[ZoneOffer]
    slots: list[Slot] | None  # None: made for the winning spec only
    nodes: dict[str, str] | None = None  # a mixed gang's plan: unbound quota → node


class GangPlanner:
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
            return self._plan_mixed(job, quotas, mix)
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
        best = self._best_spec(job, head, sid, specs, need=len(unbound), bound_zones=bound_zones)
        if self.holds.any():
            free = self.without_holds()._best_spec(job, head, sid, specs, need=len(unbound), bound_zones=bound_zones)
            kept_off = self._kept_off(job, best, free, unbound)
            if kept_off is not None:
                return kept_off
        if best is None:
            return self._failure(job, head, sid, specs, unbound)
        if job.tier_hard and job.highest_tier is not None and best.key[0] > job.highest_tier:
            return self._above_limit(job, head, sid, best, unbound)
        slots = best.slots
        held = Counter(q.node_name for q in quotas if q.node_name) if bound_zones else None
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
        nodes = {q.name: s.node for q, s in zip(unbound, placed, strict=True)}
        return GangPlan(nodes, zones, judged)

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
        of its spec beside its siblings' (``home``); any other keeps to its chosen ``zones``, and to
        ``away`` quotas outside ``home`` (what its plan by room put there). ``held``: the nodes of
        its bound siblings (distinct nodes come first)."""
        spec = (home or zones)[0][0] if home or zones else ""
        further = None
        if job.strict_order:
            further = [self._offer(job, head, sid, z) for z in self.memo.spec_zones.get(spec, []) if z not in home]
        cands = partial(self._candidates, job, head, sid)
        return ordered_in_zones(
            cands, zones, ranges, home=home, further=further, away=None if further else away, pack=self.pack, held=held
        )

    def _kept_off(
        self, job: JobInfo, best: _SpecPlan | None, free: _SpecPlan | None, unbound: Sequence[QuotaInfo]
    ) -> Status | None:
        """``NodeHeldForGang`` when the plan were nothing held (``free``) spans fewer zones than
        ``best``: a hold may make a gang wait, never make it span more zones than it would without."""
        if free is None or (best is not None and free.key[:2] >= best.key[:2]):
            return None
        holders = sorted({self.holds.holder(n) for z in free.zones for n in self.memo.zone_nodes[z.id]} - {"", job.key})
        refusal = held_for_others(free.key[1], describe_gang(unbound, self.ssn.gpu_resources), holders)
        self._kept_off_by[refusal] = tuple(holders)
        return refusal

    def holders_keeping_off(self, refusal: Status) -> tuple[str, ...]:
        """The gangs whose holds a ``NodeHeldForGang`` refusal of this planner names: those holding
        nodes of the zones the gang would take were nothing held (empty: not such a refusal)."""
        return self._kept_off_by.get(refusal, ())

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

    # --- gangs whose quotas differ in size (mixedplan.py) -----------------------------------
    def _plan_mixed(self, job: JobInfo, quotas: Sequence[QuotaInfo], mix: Mix) -> GangPlan | Status:
        """A gang of several kinds, planned exactly (``mixedplan.py``) under every rule of
        :meth:`_plan_group` but the NVLink-domain tier: specs, bound siblings, holds, tier limit."""
        head, unbound = mix.head, mix.unbound
        sid = self.memo.shape_of(head)
        specs, bound_zones = self.specs(quotas, head)
        fences = rank_ranges(quotas, unbound, self.ssn.node)  # strict order keeps to them (mixedplan rule 2)
        mix, fences = for_planning(mix, fences, self.ssn.quotas, strict=job.strict_order)
        gang = MixedGang(mix.kinds, mix.order, job.strict_order, self.pack, mix.head_kind, fences)
        best = self._best_mixed(job, mix, gang, specs, bound_zones)
        if self.holds.any():
            free = self.without_holds()._best_mixed(job, mix, gang, specs, bound_zones)
            kept_off = self._kept_off(job, best, free, unbound)
            if kept_off is not None:
                return kept_off
        if best is None or best.nodes is None:
            return self._out_of_order(job, mix, gang, specs, bound_zones) or self._failure(
                job, head, sid, specs, unbound
            )
        if job.tier_hard and job.highest_tier is not None and best.key[0] > job.highest_tier:
            return self._above_limit(job, head, sid, best, unbound)
        nodes = dict(best.nodes)
        for first, rest in mix.glued.items():
            nodes.update(dict.fromkeys(rest, nodes[first]))
        return GangPlan(nodes, [z.id for z in best.zones])

    def _out_of_order(
        self, job: JobInfo, mix: Mix, gang: MixedGang, specs: Collection[str], bound_zones: list[ZoneId]
    ) -> Status | None:
        """``TopologyOrder`` for a strict-order gang that fits, but not in rank order (around its
        bound quotas, if any; as :meth:`_plan_group` says); None: it does not fit in any order."""
        if not gang.strict:
            return None
        loose = self._best_mixed(job, mix, replace(gang, strict=False), specs, bound_zones)
        nodes = [self.ssn.node(loose.nodes[q.name]) for q in mix.unbound] if loose and loose.nodes else []
        broken = order_break([Slot(n.name, n.index) for n in nodes if n], gang.fences) if nodes and all(nodes) else None
        if broken is None:
            return None
        return out_of_rank_order(mix.unbound, broken)

    def _best_mixed(
        self, job: JobInfo, mix: Mix, gang: MixedGang, specs: Collection[str], bound_zones: list[ZoneId]
    ) -> _SpecPlan | None:
        """The best spec's plan; under continuity, as :meth:`_best_spec`: the shortest run of
        consecutive nodes of any spec that holds the gang, else the zone rules."""
        for continuity in (True, False) if self.continuity and not bound_zones else (False,):
            best: _SpecPlan | None = None
            for spec in specs:
                plan = (self._mixed_run if continuity else self._mixed_spec)(job, mix, gang, spec, bound_zones)
                if plan is not None and (best is None or plan.key < best.key):
                    best = plan
            if best is not None:
                return best
        return None

    def _mixed_run(
        self, job: JobInfo, mix: Mix, gang: MixedGang, spec: str, bound_zones: list[ZoneId]
    ) -> _SpecPlan | None:
        """:meth:`_plan_continuity` for a gang of several kinds (``mixedplan.continuity_run``)."""
        memo, t = self.memo, mix.head_kind
        nodes = [n for z in memo.spec_zones.get(spec, []) for n in self._mixed_members(job, mix, z)]
        made = plan_run(gang, sorted(nodes, key=lambda n: n.index), memo.all_indices.get(spec, []))
        if made is None:
            return None
        run, zids = made[0], sorted({n.zone for n in made[0]})
        room = sum(room_for(mix.kinds[t].request, n.room) for n in run if n.eligible[t])
        key = (memo.span(zids), len(run), 0, 0, room, len(run), run[0].index, spec)
        offers = [self._offer(job, mix.head, memo.shape_of(mix.head), z) for z in zids]
        return _SpecPlan(key, offers, None, dict(zip((q.name for q in mix.unbound), made[1], strict=True)))

    def _mixed_members(self, job: JobInfo, mix: Mix, zid: ZoneId) -> list[MixedNode]:
        """The zone's nodes not held for another gang, with their room, which kinds they take and
        their QN score for the gang's largest kind."""
        memo, out = self.memo, []
        shaped = [[(rep, memo.shape_of(rep)) for rep in reps] for reps in mix.reps]
        head_sid = memo.shape_of(mix.head)
        for name in memo.zone_nodes[zid]:
            node = self.ssn.node(name)
            if node is None or (self.holds.any() and self.holds.held_for_other(name, job.key)):
                continue
            eligible = tuple(all(memo.eligible(rep, sid, node) for rep, sid in kind) for kind in shaped)
            if any(eligible):
                score = memo.score(mix.head, head_sid, node)
                out.append(MixedNode(name, node.index, zid, node.quota_room().q, eligible, score))
        return out

    def _mixed_spec(
        self, job: JobInfo, mix: Mix, gang: MixedGang, spec: str, bound_zones: list[ZoneId]
    ) -> _SpecPlan | None:
        """Rules 1–4 of ``mixedplan.py`` in one spec: the zones (after the bound siblings' zones,
        else in the lowest tier that holds the gang), then each quota's node."""
        sid = self.memo.shape_of(mix.head)
        members = {z: self._mixed_members(job, mix, z) for z in self.memo.spec_zones.get(spec, [])}
        home = [n for z in bound_zones for n in members.get(z, [])]
        offers = [self._offer(job, mix.head, sid, z) for z, ns in members.items() if ns and z not in bound_zones]
        made = plan_mixed(gang, offers, members, home, None if bound_zones else self._by_tier)
        if made is None:
            return None
        chosen = [self._offer(job, mix.head, sid, z) for z in bound_zones if z in members] + made[0]
        nodes = dict(zip((q.name for q in mix.unbound), made[1], strict=True))
        return _SpecPlan(plan_key(chosen, spec, self.memo.span([z.id for z in chosen])), chosen, None, nodes)

    def _best_spec(
        self,
        job: JobInfo,
        head: QuotaInfo,
        sid: int | None,
        specs: Collection[str],
        *,
        need: int,
        bound_zones: list[ZoneId],
    ) -> _SpecPlan | None:
        """The best spec's plan (rule 1). Under continuity, as the seed's topology plugin takes the
        first algorithm by weight that gives a result: when no run of consecutive nodes of any spec
        holds the gang, the zone rules place it (a gang that fits is never refused)."""
        for continuity in (True, False) if self.continuity else (False,):
            best: _SpecPlan | None = None
            for spec in specs:
                plan = self._plan_spec(job, head, sid, spec, need=need, bound_zones=bound_zones, continuity=continuity)
                if plan is not None and (best is None or plan.key < best.key):
                    best = plan
            if best is not None:
                return best
        return None

    # --- one GPU spec ------------------------------------------------------------------------
    def _offer(self, job: JobInfo, head: QuotaInfo, sid: int | None, zid: ZoneId) -> ZoneOffer:
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
        """:meth:`_offer` of every zone of ``spec``."""
        if self.holds.any():
            return [self._offer(job, head, sid, z) for z in self.memo.spec_zones.get(spec, [])]
        offers = self.memo.spec_offers(head, sid, spec)
        if self.affinity is None or not job.affinity_key:
            return offers
        counts = self.affinity(job.affinity_key)  # the memo's offers, with the key's quotas per zone
        return [
            ZoneOffer(z.id, z.size, z.capacity, z.untouched, z.first_index, n) if (n := counts[z.id]) else z
            for z in offers
        ]

    def _candidates(self, job: JobInfo, head: QuotaInfo, sid: int | None, zid: ZoneId) -> list[Candidate]:
        """The zone's candidates for the job, best first (``gangplan.rank_key``)."""
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
    ) -> _SpecPlan | None:
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
            home = [self._offer(job, head, sid, z) for z in bound_zones]
            room = sum(z.capacity for z in home)
            chosen = [z for z in home if z.capacity > 0]
            if room < need:
                others = [self._offer(job, head, sid, z) for z in zones if z not in bound_zones]
                more = near_siblings(self.memo.zone_tiers, self.memo.levels, others, bound_zones, need - room)
                if more is None:
                    return None
                chosen += more
        else:
            picked = self._lowest_tier(self._offers(job, head, sid, spec), need)
            if picked is None:
                return None
            chosen = picked
        return _SpecPlan(plan_key(chosen, spec, self.memo.span([z.id for z in chosen])), chosen, None)

    def _plan_domain(self, job: JobInfo, head: QuotaInfo, sid: int | None, spec: str, *, need: int) -> _SpecPlan | None:
        """Tier 0: the NVLink domain with the least room that holds the whole gang (no RDMA hop at
        all). A domain's room is its slots with ``pack_workers``, its nodes by default: distinct
        nodes come before one NVLink domain, which never makes ranks share a node (4 workers of 4
        GPUs beside a domain of two empty nodes take four nodes of the leaf, not two)."""
        memo = self.memo
        units: dict[str, list[Candidate]] = {}
        for z in memo.spec_zones.get(spec, []):
            # in index order: a domain's first node breaks ties between domains below
            for c in sorted(self._candidates(job, head, sid, z), key=lambda c: c.index):
                domain = memo.domain_of.get(c.name)
                if domain:
                    units.setdefault(domain, []).append(c)
        room = (lambda cs: sum(c.capacity for c in cs)) if self.pack else len
        holding = [(d, cs) for d, cs in units.items() if room(cs) >= need]
        if not holding:
            return None
        domain, cands = min(holding, key=lambda u: (room(u[1]), len(u[1]), u[1][0].index, u[0]))
        slots = [Slot(c.name, c.index) for c, n in choose_nodes(cands, need, pack=self.pack) for _ in range(n)]
        offers = [self._offer(job, head, sid, z) for z in sorted({memo.zone_of[c.name] for c in cands})]
        key = (0, 1, 0, 0, room(cands), len(cands), cands[0].index, spec)
        return _SpecPlan(key, offers, slots)

    def _plan_continuity(
        self, job: JobInfo, head: QuotaInfo, sid: int | None, spec: str, need: int
    ) -> _SpecPlan | None:
        memo = self.memo
        cands = [c for z in memo.spec_zones.get(spec, []) for c in self._candidates(job, head, sid, z)]
        block = continuity_block(sorted(cands, key=lambda c: c.index), memo.all_indices.get(spec, []), need)
        if block is None:
            return None
        slots = [Slot(c.name, c.index) for c, n in choose_nodes(block, need, pack=self.pack) for _ in range(n)]
        zids = sorted({memo.zone_of[c.name] for c in block})
        offers = [self._offer(job, head, sid, z) for z in zids]
        key = (memo.span(zids), len(block), 0, 0, sum(c.capacity for c in block), len(block), block[0].index, spec)
        return _SpecPlan(key, offers, slots)

    # --- tiers above the leaf ----------------------------------------------------------------
    def _lowest_tier(self, offers: Sequence[ZoneOffer], need: int) -> list[ZoneOffer] | None:
        """Rule 1 applied tier by tier: one leaf if one holds the gang; else :meth:`_by_tier`."""
        one = best_single_zone(offers, need) if need > 0 else None
        if one is not None:
            return [one]
        return self._by_tier(offers, lambda zs: choose_zones(zs, need), lambda zs: sum(z.capacity for z in zs) >= need)

    def _by_tier(
        self,
        offers: Sequence[ZoneOffer],
        choose: Callable[[Sequence[ZoneOffer]], list[ZoneOffer] | None],
        holds: Callable[[Sequence[ZoneOffer]], bool],
    ) -> list[ZoneOffer] | None:
        """:func:`tierwalk.by_tier` over this session's tiers."""
        return by_tier(self.memo.zone_tiers, self.memo.levels, offers, choose, holds)

    # --- ranks and failures ------------------------------------------------------------------
    def _above_limit(
        self, job: JobInfo, head: QuotaInfo, sid: int | None, best: _SpecPlan, unbound: Sequence[QuotaInfo]
    ) -> Status:
        """A hard ``highestTierAllowed`` the gang fits only above: it waits (``refusals.py``)."""
        limit = max(job.highest_tier or 0, 1)  # an NVLink-domain limit is told with the leaves
        units: dict[str, int] = {}
        spec = best.zones[0].id[0] if best.zones else ""
        for zid in self.memo.spec_zones.get(spec, []):
            name = zid[1] if limit <= 1 else self.memo.zone_tiers[zid].get(limit, zid[1])
            units[name] = units.get(name, 0) + self._offer(job, head, sid, zid).capacity
        what = describe_gang(unbound, self.ssn.gpu_resources)
        return fits_only_above(what, len(unbound), span=best.key[0], levels=self.memo.levels, limit=limit, room=units)

    def _failure(
        self, job: JobInfo, head: QuotaInfo, sid: int | None, specs: Collection[str], unbound: Sequence[QuotaInfo]
    ) -> Status:
        memo = self.memo
        if not specs:
            return Status.unresolvable(Reason.NO_ZONE_FITS, f"no node has GPU model {head.spec}")
        room = {z: self._offer(job, head, sid, z).capacity for s in specs for z in memo.spec_zones.get(s, [])}
        refusals = {n: st for spec in specs for n, st in memo.refusals(sid, spec).items()}
        refused_room: Counter[ZoneId] = Counter()  # what the refusing nodes would take, were they to accept
        for node in filter(None, map(self.ssn.node, refusals)):
            refused_room[memo.zone_of[node.name]] += capacity_for(head.request, node.quota_room())
        what = describe_gang(unbound, self.ssn.gpu_resources)
        return no_zone_fits(what, len(unbound), room, refusals, refused_room)
