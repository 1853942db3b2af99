"""The session side of planning a gang whose quotas differ in size (a launcher or master beside
workers): reads the cluster through the :class:`~extender.plugins.topology.planner.GangPlanner`
it belongs to and applies the exact rules of ``mixedplan.py`` over the gang's kinds.

Every rule of a gang of one kind holds: GPU specs (``GangPlanner.specs``), one NVLink domain
when one holds the gang (nothing bound yet; :meth:`MixedPlanner._domain`), bound siblings' zones
first, holds (a hold may delay the gang, never scatter it), a hard tier limit (held to one NVLink
domain, the rest of a partly bound gang goes to its siblings' domain:
:meth:`MixedPlanner._siblings_domain`). Inside the chosen leaves, the fewest NVLink domains that
hold it (``mixeddomains.py``). Under ``continuity``, the shortest run of consecutive nodes that
holds the gang comes first (``mixedrun.continuity_run``), else the zone rules. A gang of more
count vectors than ``mixedfrontier.STATE_LIMIT`` is planned over merged kinds
(``gangparts.for_planning``); quotas that must share a node (``gangparts.glue``) are planned as
one and share its node.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING

from extender.framework.status import Status
from extender.model.job import JobInfo
from extender.model.quota import QuotaInfo
from extender.plugins.topology.gangparts import GangPlan, Mix, PlanKey, SpecPlan, coarsen, for_planning, plan_key
from extender.plugins.topology.gangplan import Range, Slot, ZoneId, ZoneOffer
from extender.plugins.topology.mixedfrontier import STATE_LIMIT, frontier_of
from extender.plugins.topology.mixedmembers import MixedMembers
from extender.plugins.topology.mixedplan import (
    MixedGang,
    MixedNode,
    holds_apart,
    place_mixed,
    plan_mixed,
    room_for,
    zones_mixed,
)
from extender.plugins.topology.mixedrun import plan_run
from extender.plugins.topology.rankorder import order_break
from extender.plugins.topology.refusals import out_of_rank_order
from extender.plugins.topology.siblings import rank_ranges
from extender.plugins.topology.tierwalk import first_near_siblings
from extender.plugins.topology.verdicts import UnitParts

if TYPE_CHECKING:
    from extender.plugins.topology.planner import GangPlanner

__all__ = ["MixedPlanner"]


class MixedPlanner:
    """Plans the gangs of several kinds for one :class:`GangPlanner` (its session, memo, holds)."""

    def __init__(self, planner: GangPlanner) -> None:
        self.p = planner
        self.members = MixedMembers(planner)

    def plan(self, job: JobInfo, quotas: Sequence[QuotaInfo], mix: Mix) -> GangPlan | Status:
        """A gang of several kinds, planned exactly (``mixedplan.py``) under every rule of
        ``GangPlanner._plan_group``: specs, one NVLink domain, bound siblings, holds, tier limit."""
        head, unbound, given = mix.head, mix.unbound, mix
        sid = self.p.memo.shape_of(head)
        specs, bound_zones = self.p.specs(quotas, head)
        fences = rank_ranges(quotas, unbound, self.p.ssn.node)  # strict order keeps to them (mixedplan rule 2)
        held = frozenset(q.node_name for q in quotas if q.node_name)  # its bound siblings' nodes (rule 3)
        mix, gang, best = self._glued_best(job, mix, fences, specs, bound_zones, held=held)
        if self.p.holds.any():
            unheld = self.p.without_holds()
            free = unheld.mixed.best(job, mix, gang, specs, bound_zones)
            if self.p.past_limit(job, free, held) and (best is None or self.p.past_limit(job, best, held)):
                # were nothing held it would wait for its limit all the same: no hold keeps it off
                refusal = unheld.mixed.plan(job, quotas, given)
                if isinstance(refusal, Status):
                    return refusal
            kept_off = self.p.kept_off(job, best, free, unbound, held=held)
            if kept_off is not None:
                return kept_off
        if best is None or best.nodes is None:
            return self._out_of_order(job, mix, gang, specs, bound_zones) or self.p.failure(
                job, head, sid, specs, unbound
            )
        if (limit := job.hard_tier) is not None and self.p.past_limit(job, best, held):
            return self._out_of_order(job, mix, gang, specs, bound_zones, within=limit) or self.p.above_limit(
                job, head, sid, best, unbound, held=held, room_in=partial(self.quotas_in, job, given)
            )
        nodes = dict(best.nodes)
        for first, rest in mix.glued.items():
            nodes.update(dict.fromkeys(rest, nodes[first]))
        return GangPlan(nodes, [z.id for z in best.zones])

    def quotas_in(self, job: JobInfo, mix: Mix, parts: UnitParts) -> int:
        """How many of the gang's quotas (``mix``: as it asks, not glued) the nodes of a unit of its
        tier limit hold together, every combination of its kinds counted (``mixedfrontier``): a
        launcher beside two whole-node workers is three, not the two its largest quota counts.
        Beyond ``STATE_LIMIT`` count vectors, over merged kinds (``gangparts.coarsen``: never more
        than the unit holds)."""
        mix = coarsen(mix, STATE_LIMIT)
        nodes = [
            n
            for zid, members in self.members.of(job, mix, parts).items()
            for n in members
            if (names := parts[zid]) is None or n.name in names
        ]
        return max(sum(v) for v in frontier_of(nodes, mix.kinds))

    def _glued_best(
        self,
        job: JobInfo,
        given: Mix,
        fences: Sequence[Range],
        specs: Collection[str],
        bound_zones: list[ZoneId],
        *,
        held: frozenset[str] = frozenset(),
    ) -> tuple[Mix, MixedGang, SpecPlan | None]:
        """The gang as the exact planner takes it (``gangparts.for_planning``) and its best plan.
        A quota whose ``quotaAffinity`` term selects bound quotas and an earlier quota of the gang
        may go to either's node (the predicate, once the earlier one is bound): the plan on the
        bound ones' nodes first, as before; only when it has none, the plan that puts the quota
        beside the earlier one. Refused both ways: the first attempt, which says why. Two plans,
        not every mix of them: of two such quotas, one beside a bound quota and the other beside
        its earlier partner is not tried."""
        first: tuple[Mix, MixedGang, SpecPlan | None] | None = None
        for beside_earlier in (False, True):
            if first is not None and not any(q.quota_affinity for q in given.unbound):
                break  # no quota attracts another: nothing else to glue
            mix, kept = for_planning(
                given, fences, self.p.ssn.quotas, strict=job.strict_order, beside_earlier=beside_earlier
            )
            if first is not None and mix.glued == first[0].glued:
                break
            gang = MixedGang(
                mix.kinds, mix.order, job.strict_order, self.p.pack, mix.head_kind, kept, held, self.p.memo.domain_of
            )
            best = self.best(job, mix, gang, specs, bound_zones)
            if best is not None and best.nodes is not None:
                return mix, gang, best
            first = first or (mix, gang, best)
        assert first is not None
        return first

    def _out_of_order(
        self,
        job: JobInfo,
        mix: Mix,
        gang: MixedGang,
        specs: Collection[str],
        bound_zones: list[ZoneId],
        *,
        within: int | None = None,
    ) -> Status | None:
        """``TopologyOrder`` for a strict-order gang that fits, but not in rank order (around its
        bound quotas, if any; as ``GangPlanner._plan_group`` says) — ``within`` its hard tier limit,
        if given: one held to one NVLink domain that its siblings' domain holds only out of order
        is told so, not that it fits only above its limit; None: it does not fit in any order."""
        if not gang.strict:
            return None
        loose = self.best(job, mix, replace(gang, strict=False), specs, bound_zones)
        if loose is not None and within is not None and loose.tier(self.p.memo.domain_of, gang.held) > within:
            return None
        nodes = [self.p.ssn.node(loose.nodes[q.name]) for q in mix.unbound] if loose and loose.nodes else []
        broken = order_break([Slot(n.name, n.index) for n in nodes if n], gang.fences) if nodes and all(nodes) else None
        if broken is None:
            return None
        return out_of_rank_order(mix.unbound, broken)

    def best(
        self, job: JobInfo, mix: Mix, gang: MixedGang, specs: Collection[str], bound_zones: list[ZoneId]
    ) -> SpecPlan | None:
        """The best spec's plan; under continuity, as ``GangPlanner._best_spec``: the shortest run of
        consecutive nodes of any spec that holds the gang, else the zone rules."""
        for continuity in (True, False) if self.p.continuity and not bound_zones else (False,):
            found: list[SpecPlan | _Unplaced] = []
            for spec in specs:
                plan: SpecPlan | _Unplaced | None = None
                if not continuity and self.p.memo.domain_of:
                    if not bound_zones:
                        plan = self._domain(job, mix, gang, spec)
                    elif job.hard_tier == 0:
                        plan = self._siblings_domain(job, mix, gang, spec, bound_zones)
                if plan is None and continuity:
                    plan = self._run(job, mix, gang, spec, bound_zones)
                    limit = job.hard_tier
                    if plan is not None and limit is not None and plan.tier(self.p.memo.domain_of) > limit:
                        plan = None  # a run above a hard tier limit is no answer: the zone rules' is
                elif plan is None:
                    plan = self._zones(job, mix, gang, spec, bound_zones)
                if plan is not None:
                    found.append(plan)
            best = _least_placed(found)
            if best is not None:
                return best
        return None

    def _run(self, job: JobInfo, mix: Mix, gang: MixedGang, spec: str, bound_zones: list[ZoneId]) -> SpecPlan | None:
        """``GangPlanner._plan_continuity`` for a gang of several kinds (``mixedrun.continuity_run``)."""
        memo, t = self.p.memo, mix.head_kind
        nodes = [n for ns in self.members.of(job, mix, memo.spec_zones.get(spec, [])).values() for n in ns]
        indices = memo.all_indices.get(spec, [])
        made = plan_run(gang, sorted(nodes, key=lambda n: n.index), indices, memo.tiers_spanned)
        if made is None:
            return None
        run, zids = made[0], sorted({n.zone for n in made[0]})
        room = sum(room_for(mix.kinds[t].request, n.room) for n in run if n.eligible[t])
        key = (memo.span(zids), len(run), 0, 0, room, len(run), run[0].index, spec)
        offers = [self.p.offer(job, mix.head, memo.shape_of(mix.head), z) for z in zids]
        return SpecPlan(key, offers, None, dict(zip((q.name for q in mix.unbound), made[1], strict=True)))

    def _domain(self, job: JobInfo, mix: Mix, gang: MixedGang, spec: str) -> SpecPlan | None:
        """Tier 0, as ``GangPlanner._plan_domain``: the NVLink domain with the least room that holds
        the whole gang (no RDMA hop at all), planned inside it by the rules of ``mixedplan.py``. A
        domain counts only its nodes with room for some quota of the gang (a full node counts
        none, as ``GangPlanner._candidates`` counts only nodes with room for the shape). Its room
        (``GangPlanner.domain_rooms``) is its slots for the largest kind with ``pack_workers``; by
        default its nodes, and one NVLink domain never makes ranks share a node: the domains whose
        plan puts one quota a node come first (a launcher and two 4-GPU workers over a = n0 full,
        n1, n2 and b = n3–n6 empty take n3, n4, n5, not n1, n1, n2); only when none does, a domain
        with a node per quota whose plan shares one — not one whose leaves hold the gang one quota
        a node (:meth:`_shares_needlessly`: the zone rules then place it, distinct nodes in the
        leaf they choose where it has them) —, unless the plan by zones puts one quota a node
        (:meth:`_apart_in_leaves`): one domain beats two only when ranks share anyway. Held
        to one domain (``highestTierAllowed: nvlink``, hard), when no domain holds the gang so,
        its slots (ranks share a domain's nodes rather than wait). Ties: fewer nodes, the lower
        first node index."""
        memo, t = self.p.memo, mix.head_kind
        units: dict[str, dict[ZoneId, list[MixedNode]]] = {}
        for z, zone_nodes in self.members.of(job, mix, memo.spec_zones.get(spec, [])).items():
            for n in zone_nodes:
                domain = memo.domain_of.get(n.name)
                if domain and any(
                    e and room_for(k.request, n.room) for e, k in zip(n.eligible, mix.kinds, strict=True)
                ):
                    units.setdefault(domain, {}).setdefault(z, []).append(n)
        pull = self.p.domain_affinity(job)
        for by_slots in self.p.domain_rooms(job):
            ranked = []
            for domain, members in units.items():
                nodes = sorted((n for ns in members.values() for n in ns), key=lambda n: n.index)
                if not by_slots and len(nodes) < sum(k.count for k in mix.kinds):
                    continue
                room = sum(room_for(mix.kinds[t].request, n.room) for n in nodes if n.eligible[t])
                rank = (-pull(nodes), room if by_slots else len(nodes), len(nodes), nodes[0].index)
                ranked.append(((*rank, domain), members))
            sharing: SpecPlan | None = None
            for key, members in sorted(ranked, key=lambda u: u[0]):
                plan = self._in_domain(job, mix, gang, spec, rank=key[:4], members=members)
                if plan is not None and (by_slots or _apart(plan)):
                    return plan
                if sharing is None and plan is not None and not self._shares_needlessly(job, mix, gang, plan):
                    sharing = plan
            if sharing is not None:
                return self._apart_in_leaves(job, mix, gang, spec) or sharing
        return None

    def _shares_needlessly(self, job: JobInfo, mix: Mix, gang: MixedGang, plan: SpecPlan) -> bool:
        """Whether a domain's ``plan`` that shares a node makes ranks share where they need not: the
        leaves it takes hold the gang one quota a node (in the rank order they allow:
        ``mixedplan.holds_apart``), and the job may leave one domain (not ``highestTierAllowed:
        nvlink``, hard). Such a domain yields to the zone rules."""
        if job.hard_tier == 0:
            return False
        members = self.members.of(job, mix, [z.id for z in plan.zones])
        nodes = sorted((n for ns in members.values() for n in ns), key=lambda n: (n.index, n.name))
        return holds_apart(nodes, gang.kinds, gang.order, gang.fences)

    def _apart_in_leaves(self, job: JobInfo, mix: Mix, gang: MixedGang, spec: str) -> SpecPlan | None:
        """When one NVLink domain holds the gang only with ranks sharing a node: the plan by zones
        (``_spec``) if it puts one quota a node within the job's hard tier limit — distinct
        nodes come before one domain, as for a gang of one size (a launcher and two 4-GPU
        workers over a = n0 with 8 GPUs free, n1, n2 with 2, b = n3, n4 empty take n0, n3, n4,
        not n1, n0, n0); else None: sharing is needed anyway, and one domain beats two."""
        limit = job.hard_tier
        if limit == 0:
            return None
        spread = self._spec(job, mix, gang, spec, [])
        if spread is None or not _apart(spread):
            return None
        return spread if limit is None or spread.tier(self.p.memo.domain_of) <= limit else None

    def _in_domain(
        self,
        job: JobInfo,
        mix: Mix,
        gang: MixedGang,
        spec: str,
        *,
        rank: tuple[int, int, int, int],
        members: dict[ZoneId, list[MixedNode]],
    ) -> SpecPlan | None:
        """The gang planned inside one NVLink domain (its nodes ``members``, by zone), ranked by
        ``rank`` (less affinity, its room, nodes, first node index)."""
        sid = self.p.memo.shape_of(mix.head)
        offers = [self.p.offer(job, mix.head, sid, z) for z in members]
        made = plan_mixed(gang, offers, members, [])
        if made is None:
            return None
        placed = dict(zip((q.name for q in mix.unbound), made[1], strict=True))
        return SpecPlan((0, 1, rank[0], 0, *rank[1:], spec), made[0], None, placed)

    def _siblings_domain(
        self, job: JobInfo, mix: Mix, gang: MixedGang, spec: str, bound_zones: list[ZoneId]
    ) -> SpecPlan | None:
        """Tier 0 around bound siblings, as ``GangPlanner._plan_siblings_domain``: a gang held to one
        NVLink domain (``highestTierAllowed: nvlink``, hard) whose bound siblings sit in one named
        domain places the rest there, by the rules of ``mixedplan.py`` on that domain's nodes of
        their zones (distinct nodes free of the gang first, ranks sharing rather than wait; rank
        order around the siblings, a strict-order gang's only so). None when the siblings span
        more than that one domain or it cannot hold the rest: the plan by zones then tells why the
        gang waits (``GangPlanner.above_limit``)."""
        memo, t = self.p.memo, mix.head_kind
        (domain, *others) = {memo.domain_of.get(n, "") for n in gang.held}
        if others or not domain:
            return None
        members = self.members.of(job, mix, bound_zones)
        home = [n for ns in members.values() for n in ns if memo.domain_of.get(n.name) == domain]
        made = plan_mixed(gang, [], {}, sorted(home, key=lambda n: n.index)) if home else None
        if made is None:
            return None
        room = sum(room_for(mix.kinds[t].request, n.room) for n in home if n.eligible[t])
        offers = [self.p.offer(job, mix.head, memo.shape_of(mix.head), z) for z in bound_zones]
        placed = dict(zip((q.name for q in mix.unbound), made[1], strict=True))
        return SpecPlan((0, 1, 0, 0, room, len(home), min(n.index for n in home), spec), offers, None, placed)

    def _spec(self, job: JobInfo, mix: Mix, gang: MixedGang, spec: str, bound_zones: list[ZoneId]) -> SpecPlan | None:
        """Rules 1–4 of ``mixedplan.py`` in one spec: the zones (after the bound siblings' zones,
        else in the lowest tier that holds the gang), then each quota's node."""
        plan = self._zones(job, mix, gang, spec, bound_zones)
        return plan.place() if isinstance(plan, _Unplaced) else plan

    def _zones(
        self, job: JobInfo, mix: Mix, gang: MixedGang, spec: str, bound_zones: list[ZoneId]
    ) -> SpecPlan | _Unplaced | None:
        """:meth:`_spec`, its nodes left to place when its zones settle its rank among the specs:
        one zone or none beside the bound siblings' (the gang's nodes use it; several zones chosen
        past the search limit may be fewer once placed, so they are placed at once). Nodes are
        placed for the spec that wins, not for every spec (``bench/binder_cycle.py --launchers``,
        5,000 nodes in two GPU models: cycle 3.6 s -> 3.3 s)."""
        sid = self.p.memo.shape_of(mix.head)
        members, measure, may = self.members.with_fronts(job, mix, self.p.memo.spec_zones.get(spec, []))
        home = [n for z in bound_zones for n in members.get(z, [])]
        offers = [self.p.offer(job, mix.head, sid, z) for z, ns in members.items() if ns and z not in bound_zones]
        if bound_zones:  # further zones under the siblings' spine first (tierwalk.near_siblings)
            memo = self.p.memo

            def near(zs: Sequence[ZoneOffer]) -> list[ZoneOffer] | None:
                return zones_mixed(gang, zs, members, home, None, measure=measure, may=may)

            zones = first_near_siblings(memo.zone_tiers, memo.levels, offers, bound_zones, near)
        else:
            zones = zones_mixed(gang, offers, members, home, self.p.by_tier, measure=measure, may=may)
        if zones is None:
            return None
        beside = [self.p.offer(job, mix.head, sid, z) for z in bound_zones if z in members]

        def place() -> SpecPlan | None:
            made = place_mixed(gang, zones, members, home)
            if made is None:
                return None
            chosen = beside + made[0]
            nodes = dict(zip((q.name for q in mix.unbound), made[1], strict=True))
            return SpecPlan(plan_key(chosen, spec, self.p.memo.span([z.id for z in chosen])), chosen, None, nodes)

        if len(zones) > 1:
            return place()
        chosen = beside + zones
        return _Unplaced(plan_key(chosen, spec, self.p.memo.span([z.id for z in chosen])), place)


@dataclass(frozen=True, slots=True)
class _Unplaced:
    """A spec's plan whose zones are chosen and rank it (``key``) and whose nodes ``place`` makes
    (None: they do not hold the gang)."""

    key: PlanKey
    place: Callable[[], SpecPlan | None]


def _least_placed(plans: Sequence[SpecPlan | _Unplaced]) -> SpecPlan | None:
    """The plan of the least key (the first on a tie) that places the gang: an unplaced one is
    placed only when its turn comes, and one that does not place the gang gives way to the next."""
    for plan in sorted(plans, key=lambda p: p.key):
        placed = plan.place() if isinstance(plan, _Unplaced) else plan
        if placed is not None:
            return placed
    return None


def _apart(plan: SpecPlan) -> bool:
    """Whether the plan puts one of the gang's quotas a node (no two ranks share one)."""
    placed = list((plan.nodes or {}).values())
    return len(set(placed)) == len(placed)
