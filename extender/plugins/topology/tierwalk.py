"""The tiers above the leaf (spine, then core, …): which unit of the lowest tier a gang goes to.
Pure functions: no session, no I/O. ``tiers`` maps each zone to its unit per level (2: spine,
3: core, …; from NodeTopology ``spec.tiers`` or node labels, see ``fitmemo.py``); ``levels`` is
the highest level any zone names.

* **A fresh gang** (:func:`by_tier`): the unit of the lowest tier that holds it, the one with the
  most quotas of its affinity key, then the least room that does (best fit; ties: fewer nodes,
  lower first index, name), and in it the
  zones the caller's rule picks (the fewest leaves); when no unit holds it, that rule over the
  whole cluster.
* **A partly bound gang** (:func:`near_siblings`): the fewest further zones under the lowest tier
  its bound siblings' zones share, if they hold the rest; else the fewest anywhere
  (:func:`first_near_siblings`: the same walk for any rule of choosing the zones).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from extender.plugins.topology.gangplan import ZoneId, ZoneOffer, choose_zones

__all__ = ["Tiers", "by_tier", "first_near_siblings", "near_siblings"]

Tiers = Mapping[ZoneId, Mapping[int, str]]
T = TypeVar("T")


def by_tier(
    tiers: Tiers,
    levels: int,
    offers: Sequence[ZoneOffer],
    choose: Callable[[Sequence[ZoneOffer]], list[ZoneOffer] | None],
    holds: Callable[[Sequence[ZoneOffer]], bool],
) -> list[ZoneOffer] | None:
    """The units of the lowest tier (spine, then core, …) of which one ``holds`` the gang — the
    one with the most quotas of the job's ``topology-affinity-key``, then the least room (best
    fit), as among leaves (``gangplan.single_zone_key``) — and within it the zones ``choose``
    picks (the fewest leaves); else what ``choose`` picks of the whole cluster."""
    for level in range(2, levels + 1):
        units: dict[str, list[ZoneOffer]] = {}
        for z in offers:
            name = tiers[z.id].get(level)
            if name:
                units.setdefault(name, []).append(z)
        holding = [(n, zs) for n, zs in units.items() if holds(zs)]
        if holding:
            _, best = min(
                holding,
                key=lambda u: (
                    -sum(z.affinity for z in u[1]),
                    sum(z.capacity for z in u[1]),
                    sum(z.size for z in u[1]),
                    min(z.first_index for z in u[1]),
                    u[0],
                ),
            )
            return choose(best)
    return choose(offers)


def near_siblings(
    tiers: Tiers, levels: int, others: Sequence[ZoneOffer], bound_zones: Sequence[ZoneId], need: int
) -> list[ZoneOffer] | None:
    """Further zones for a partly bound gang (``need`` quotas more): under the lowest tier its
    siblings share, if there are enough there, else anywhere (fewest zones)."""
    return first_near_siblings(tiers, levels, others, bound_zones, lambda near: choose_zones(near, need))


def first_near_siblings(
    tiers: Tiers,
    levels: int,
    others: Sequence[ZoneOffer],
    bound_zones: Sequence[ZoneId],
    choose: Callable[[Sequence[ZoneOffer]], T | None],
) -> T | None:
    """What ``choose`` picks of the zones ``others`` under the lowest tier (spine, then core, …)
    that a partly bound gang's siblings' zones share, the first tier where it picks anything;
    else of all of ``others``. The rule of :func:`near_siblings` for any way of choosing (a gang
    of several sizes, or one that keeps rank order around its siblings)."""
    for level in range(2, levels + 1):
        names = {tiers[z].get(level) for z in bound_zones}
        if len(names) != 1 or None in names:
            continue
        (name,) = names
        near = [z for z in others if tiers[z.id].get(level) == name]
        if near and len(near) < len(others) and (chosen := choose(near)) is not None:
            return chosen
    return choose(others)
