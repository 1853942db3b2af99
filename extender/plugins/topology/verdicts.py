"""What a gang without a plan is told, gathered from the session: the planner's verdict methods
(a mixin of :class:`~extender.plugins.topology.planner.GangPlanner`); ``refusals.py`` words them.

* ``NodeHeldForGang`` (:meth:`PlanVerdicts.kept_off`) — were nothing held for another gang, the
  gang would take fewer zones than it can now: it waits rather than spread, told every gang
  holding nodes of the zones it would take (held to one NVLink domain: of the domain it would
  take) (:meth:`PlanVerdicts.holders_keeping_off` gives them
  to the keeper, which may end those after it in hold order);
  the same for a gang held hard to its bound siblings' NVLink domain that the domain would
  take were nothing held there (:meth:`PlanVerdicts.kept_off_domain`);
* ``FitsOnlyAboveAllowedTier`` (:meth:`PlanVerdicts.above_limit`) — a hard tier limit it fits only
  above; also when held nodes keep it off a plan that would itself go past the limit
  (:meth:`PlanVerdicts.past_limit` of its plan were nothing held): no hold keeps it waiting, so
  none is named and the keeper ends none for it (it is told what it would be told were nothing
  held);
* ``NoZoneFits`` (:meth:`PlanVerdicts.failure`) — no zone, or set of zones, holds it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from extender.framework.session import Session
from extender.framework.status import Reason, Status
from extender.model.job import JobInfo
from extender.model.quota import QuotaInfo
from extender.plugins.topology.fitmemo import FitMemo, capacity_for
from extender.plugins.topology.gangparts import GangPlan, SpecPlan
from extender.plugins.topology.gangplan import ZoneId
from extender.plugins.topology.holds import HoldBook
from extender.plugins.topology.refusals import describe_gang, fits_only_above, held_for_others, no_zone_fits

if TYPE_CHECKING:
    from extender.plugins.topology.gangplan import ZoneOffer
    from extender.plugins.topology.nodechoice import Candidate

__all__ = ["PlanVerdicts", "UnitParts"]

UnitParts = dict[ZoneId, set[str] | None]
"""A unit of a tier limit (an NVLink domain, a leaf, ...): zone → its nodes in the unit (None: all)."""


class PlanVerdicts:
    """The verdicts of a :class:`~extender.plugins.topology.planner.GangPlanner` (its session,
    memo, holds; its offers and candidates, which see the holds)."""

    ssn: Session
    memo: FitMemo
    holds: HoldBook
    _kept_off_by: dict[Status, tuple[str, ...]]  # a NodeHeldForGang refusal → the holders it names

    if TYPE_CHECKING:

        def offer(self, job: JobInfo, head: QuotaInfo, sid: int | None, zid: ZoneId) -> ZoneOffer: ...

        def _candidates(self, job: JobInfo, head: QuotaInfo, sid: int | None, zid: ZoneId) -> list[Candidate]: ...

    def past_limit(self, job: JobInfo, plan: SpecPlan | None, held: Iterable[str]) -> bool:
        """The plan spans a tier above the job's hard ``highestTierAllowed`` (``held``: the nodes of
        its bound siblings, which the tier it spans counts too; ``SpecPlan.tier``)."""
        limit = job.hard_tier
        return plan is not None and limit is not None and plan.tier(self.memo.domain_of, held) > limit

    def kept_off(
        self,
        job: JobInfo,
        best: SpecPlan | None,
        free: SpecPlan | None,
        unbound: Sequence[QuotaInfo],
        *,
        held: Collection[str] = (),
    ) -> Status | None:
        """``NodeHeldForGang`` when the plan were nothing held (``free``) spans fewer zones than
        ``best``: a hold may make a gang wait, never make it span more zones than it would without.
        It names the holders of the nodes of ``free``'s zones — of a gang held to one NVLink
        domain (``highestTierAllowed: nvlink``, hard) that ``free`` keeps to, only of that
        domain's nodes (:meth:`_free_domain`; ``held``: its bound siblings' nodes): it may use no
        other node with them, and the keeper ends no hold it names but for it."""
        if free is None or (best is not None and free.key[:2] >= best.key[:2]):
            return None
        domain = self._free_domain(job, free, held)
        nodes = self._nodes_in([z.id for z in free.zones], {domain} if domain else None)
        return self._held_for(job, free.key[1], nodes, unbound)

    def _free_domain(self, job: JobInfo, free: SpecPlan, held: Collection[str]) -> str:
        """The one NVLink domain of the nodes of ``free`` (and the bound siblings' ``held``) when the
        job is held to one (hard) and ``free`` keeps to it; "" otherwise."""
        domain_of = self.memo.domain_of
        if job.hard_tier != 0 or free.tier(domain_of, held) != 0:
            return ""
        names = [s.node for s in free.slots] if free.slots is not None else list((free.nodes or {}).values())
        return next((d for n in (*names, *held) if (d := domain_of.get(n, ""))), "")

    def kept_off_domain(
        self,
        job: JobInfo,
        free: GangPlan | Status | None,
        quotas: Sequence[QuotaInfo],
        unbound: Sequence[QuotaInfo],
    ) -> Status | None:
        """``NodeHeldForGang`` for a gang held to its bound siblings' NVLink domain
        (``highestTierAllowed: nvlink``, hard) that this domain would take were nothing held for
        another gang (``free``: the planner's plan in the siblings' domain without holds): it waits
        for the holders of the domain's nodes, not for a tier it fits only above
        (``FitsOnlyAboveAllowedTier`` would hide the hold, and keep the keeper from ending a lower
        gang's hold there)."""
        if not isinstance(free, GangPlan):
            return None
        domains = {self.memo.domain_of.get(q.node_name) for q in quotas if q.node_name}
        return self._held_for(job, len(free.zones), self._nodes_in(free.zones, domains), unbound)

    def _nodes_in(self, zones: Sequence[ZoneId], domains: Collection[str | None] | None) -> list[str]:
        """The nodes of ``zones``; only those whose NVLink domain is one of ``domains``, if given."""
        nodes = [n for z in zones for n in self.memo.zone_nodes[z]]
        return nodes if domains is None else [n for n in nodes if self.memo.domain_of.get(n) in domains]

    def _held_for(self, job: JobInfo, zones: int, nodes: Sequence[str], unbound: Sequence[QuotaInfo]) -> Status:
        """The refusal naming every gang but ``job`` that holds one of ``nodes`` (the keeper reads
        them back: :meth:`holders_keeping_off`)."""
        holders = sorted({h for n in nodes for h in self.holds.holders(n)} - {job.key})
        refusal = held_for_others(zones, describe_gang(unbound, self.ssn.gpu_resources), holders)
        self._kept_off_by[refusal] = tuple(holders)
        return refusal

    def holders_keeping_off(self, refusal: Status) -> tuple[str, ...]:
        """The gangs whose holds a ``NodeHeldForGang`` refusal of this planner names: those holding
        nodes of the zones the gang would take were nothing held (empty: not such a refusal)."""
        return self._kept_off_by.get(refusal, ())

    def above_limit(
        self,
        job: JobInfo,
        head: QuotaInfo,
        sid: int | None,
        best: SpecPlan,
        unbound: Sequence[QuotaInfo],
        *,
        held: Collection[str] = (),
        room_in: Callable[[UnitParts], int] | None = None,
    ) -> Status:
        """A hard ``highestTierAllowed`` the gang fits only above: it waits (``refusals.py``),
        told what the unit of its limit's tier it must fit in has room for, in its own quotas —
        its bound siblings' unit when it has siblings (``held``: their nodes; it may use no other),
        else the roomiest unit — or, when they already span several units, those units (no room
        of theirs would let it run). ``room_in``: how many of the gang's quotas a unit's nodes hold
        (default: slots for ``head``, the one size of a gang of one size)."""
        limit = job.highest_tier or 0
        spec = best.zones[0].id[0] if best.zones else ""
        units = self.limit_units(spec, limit)
        mine = {self.unit_of(n, limit) for n in held}
        if held:
            units = {name: parts for name, parts in units.items() if name in mine}
        count = room_in or partial(self._slots_in, job, head, sid)
        room = {name: count(parts) for name, parts in units.items()}
        # bound siblings on a node naming no NVLink domain: no domain can ever hold the gang with them
        homeless = sorted(n for n in held if n in self.memo.zone_of and not self.unit_of(n, limit))
        return fits_only_above(
            describe_gang(unbound, self.ssn.gpu_resources),
            len(unbound),
            span=best.key[0],
            levels=self.memo.levels,
            limit=limit,
            room=room,
            siblings=bool(held),
            homeless=homeless,
            spanned=sorted(mine - {""}),  # more than one: no unit can ever hold the gang with them
        )

    def limit_units(self, spec: str, limit: int) -> dict[str, UnitParts]:
        """The units of tier ``limit`` over the zones of ``spec``: name → zone → its nodes in the
        unit (None: all of them). Tier 0: the NVLink domains (a node naming none is in no unit)."""
        units: dict[str, UnitParts] = {}
        for zid in self.memo.spec_zones.get(spec, []):
            if limit > 0:
                units.setdefault(self._zone_unit(zid, limit), {})[zid] = None
                continue
            for n in self.memo.zone_nodes[zid]:
                if domain := self.memo.domain_of.get(n):
                    nodes = units.setdefault(domain, {}).setdefault(zid, set())
                    assert nodes is not None
                    nodes.add(n)
        return units

    def unit_of(self, node: str, limit: int) -> str:
        """The name of ``node``'s unit of tier ``limit`` ("": none)."""
        if limit == 0:
            return self.memo.domain_of.get(node, "")
        zid = self.memo.zone_of.get(node)
        return "" if zid is None else self._zone_unit(zid, limit)

    def _zone_unit(self, zid: ZoneId, limit: int) -> str:
        return zid[1] if limit == 1 else self.memo.zone_tiers[zid].get(limit, zid[1])

    def _slots_in(self, job: JobInfo, head: QuotaInfo, sid: int | None, parts: UnitParts) -> int:
        """How many quotas like ``head`` the nodes of a unit take (a whole zone: its offer's room)."""
        return sum(
            self.offer(job, head, sid, zid).capacity
            if nodes is None
            else sum(c.capacity for c in self._candidates(job, head, sid, zid) if c.name in nodes)
            for zid, nodes in parts.items()
        )

    def failure(
        self, job: JobInfo, head: QuotaInfo, sid: int | None, specs: Collection[str], unbound: Sequence[QuotaInfo]
    ) -> Status:
        memo = self.memo
        if not specs:
            return Status.unresolvable(Reason.NO_ZONE_FITS, f"no node has GPU model {head.spec}")
        room = {z: self.offer(job, head, sid, z).capacity for s in specs for z in memo.spec_zones.get(s, [])}
        refusals = {n: st for spec in specs for n, st in memo.refusals(head, sid, spec).items()}
        refused_room: Counter[ZoneId] = Counter()  # what the refusing nodes would take, were they to accept
        for node in filter(None, map(self.ssn.node, refusals)):
            refused_room[memo.zone_of[node.name]] += capacity_for(head.request, node.quota_room())
        what = describe_gang(unbound, self.ssn.gpu_resources)
        return no_zone_fits(what, len(unbound), room, refusals, refused_room)
