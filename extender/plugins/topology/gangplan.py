"""Planning a gang's nodes as a whole (seed 三 3.4–3.5, 2.6). Pure functions: no session, no I/O.

Vocabulary:

* a **slot** is room for one quota of the gang on a node; a node's **capacity** for a gang is how
  many of the gang's quotas its ``quota_idle`` takes (0 when its QN predicates refuse the gang);
* a **zone** is a set of nodes of one GPU spec cabled to the same RDMA switches (the leaf tier);
  its capacity is the sum of its nodes' capacities.

The rules, in the order the planner applies them:

1. **Zones** (:func:`choose_zones`). If one zone can hold the whole gang, the zone with the *least*
   capacity that still holds it (best fit: a big free zone stays whole for a big gang); ties:
   fewer nodes, lower first node index. Otherwise the fewest zones; among plans with that count,
   the one that breaks the least capacity of whole, untouched zones (an exact fit beats breaking a
   big empty zone), then the least capacity taken, fewer nodes, lower indices. Jobs sharing a
   ``topology-affinity-key`` first prefer zones where that key already holds quotas.
2. **Slots per zone** (:func:`split_slots`): the zones of the gang's bound siblings first (a
   partly bound gang fills them before it takes room elsewhere), then the zone with the most
   capacity, so the largest part of the gang shares one switch — by default one slot per node
   free of the gang first, so that ranks share a node only when the chosen zones run out of free
   nodes (a sibling's node is no free one: while the chosen zones have a free node per slot, a
   rank takes one in any of them before it joins a sibling).
3. **Nodes in a zone** (``nodechoice``): by default distinct nodes while the zone has enough of
   them, best QN score first; consecutive ranks share a node only when needed, and then, as with
   ``pack``, on the fewest nodes that hold the share, best fit. With ``pack`` the bound siblings'
   zones are one pool, filled first, and the zones beyond them another (the fewest nodes of the
   zones, not of each zone's share).
   Where nodes name NVLink domains, the nodes come from the fewest domains first, best fit among
   them, the bound siblings' domains before any other (:func:`domain_parts`: rules 1 and 2 one
   tier down; a domain's room is its nodes by default, its slots with ``pack``: NVLink first).
4. **Ranks** (``rankorder``): slots sorted by node index go to quotas in task-index order,
   so task *i* sits on a node index ≥ that of task *i−1* (the seed's closed range
   ``[preNode, lastNode]``); a quota whose bound siblings fence its range takes the lowest slot
   inside it. When those slots break that order around bound siblings, the gang is placed in
   order on the other nodes of its chosen zones if they allow it, exactly as rule 2 would (by
   default one quota a node while the order allows it, the fewest quotas outside the siblings'
   zones first; else, as with ``pack``, the fewest nodes, the fewest quotas outside first:
   ``rankorder.assign_in_order``); the range is the seed's even where the bound siblings are
   themselves out of order; a
   strict-order gang whose chosen zones do not takes, beside its siblings' zones, the fewest
   further zones that do (:func:`fewest_zones_that`), else waits.

A gang the rules allow (capacity, predicates, one GPU spec) is therefore never refused: the plan
fails only when no spec's zones together hold ``need`` slots.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from extender.plugins.topology.nodechoice import Candidate, choose_ranked, fewest_to_reach, rank_key

__all__ = [
    "SEARCH_LIMIT",
    "Range",
    "Slot",
    "ZoneOffer",
    "best_single_zone",
    "choose_zones",
    "domain_parts",
    "domain_unit",
    "fewest_zones_that",
    "single_zone_key",
    "slots_in",
    "split_slots",
]

ZoneId = tuple[str, str]  # (GPU spec, zone key)
Range = tuple[int | None, int | None]  # a quota's closed node-index range (None: open)


@dataclass(frozen=True, slots=True)
class ZoneOffer:
    """What one zone offers the gang now."""

    id: ZoneId
    size: int  # nodes in the zone
    capacity: int  # Σ capacity of its nodes for the gang
    untouched: bool  # no quota is bound on any of its nodes
    first_index: int  # smallest node index (deterministic tie-break)
    affinity: int = 0  # quotas of the job's topology-affinity-key already in the zone


@dataclass(slots=True)
class Slot:
    node: str
    index: int


def single_zone_key(z: ZoneOffer) -> tuple[int, int, int, int, ZoneId]:
    """Rule 1's order among zones that each hold the whole gang (the least first): more affinity,
    then less capacity (best fit), fewer nodes, lower first index; a total order."""
    return (-z.affinity, z.capacity, z.size, z.first_index, z.id)


def choose_zones(zones: Iterable[ZoneOffer], need: int) -> list[ZoneOffer] | None:
    """The zones for ``need`` slots, by rule 1, or None when together they cannot hold them.

    All ``zones`` must be of one GPU spec (the caller plans per spec). The several-zone case is an
    exact dynamic programme over (zones taken, slots covered capped at ``need``) with additive,
    lexicographic costs, so it finds the best subset of the minimal size, not a greedy one.
    """
    if need <= 0:
        return []
    zones = list(zones)
    one = best_single_zone(zones, need)
    if one is not None:
        return [one]
    usable = sorted((z for z in zones if z.capacity > 0), key=lambda z: (z.first_index, z.id))
    fewest = fewest_to_reach((z.capacity for z in usable), need)
    if fewest is None:
        return None
    return _best_subset(usable, need, fewest)


def best_single_zone(zones: Iterable[ZoneOffer], need: int) -> ZoneOffer | None:
    """Rule 1 when one zone holds the gang: the one with the least capacity that still holds
    ``need`` slots (ties: more affinity, fewer nodes, lower first index); None when none does."""
    best, best_key = None, None
    for z in zones:  # once per zone of each GPU model per gang: the key is made inline, not called
        if z.capacity >= need:
            key = (-z.affinity, z.capacity, z.size, z.first_index, z.id)  # single_zone_key(z)
            if best_key is None or key < best_key:
                best, best_key = z, key
    return best


SEARCH_LIMIT = 4096
"""Zone sets :func:`fewest_zones_that` tries at most (and node sets ``mixedplan.packed`` does)."""


def fewest_zones_that(
    zones: Sequence[ZoneOffer],
    holds: Callable[[Sequence[ZoneOffer]], bool],
    *,
    smallest: int = 1,
    limit: int = SEARCH_LIMIT,
) -> list[ZoneOffer] | None:
    """Rule 1 where capacity alone does not decide (a strict-order gang must keep rank order): the
    smallest set of ``zones`` (of at least ``smallest``) that ``holds`` accepts, and among sets of
    that size the cheapest by rule 1's costs (one zone: :func:`single_zone_key`; several: the
    least capacity of untouched zones broken, then the least capacity, fewer nodes, lower first
    indices). Past ``limit`` sets tried, every zone if ``holds`` accepts them all (the gang runs,
    in more zones than it might need, rather than wait); None when no set is accepted."""
    tried = 0
    for k in range(smallest, len(zones) + 1):
        if math.comb(len(zones), k) > limit - tried:
            return list(zones) if holds(zones) else None
        sets = sorted(itertools.combinations(zones, k), key=_set_cost if k > 1 else _first_zone_key)
        for zs in sets:
            tried += 1
            if holds(zs):
                return list(zs)
    return None


def _set_cost(zs: Sequence[ZoneOffer]) -> tuple[int, int, int, list[int]]:
    untouched = sum(z.capacity for z in zs if z.untouched)
    return (untouched, sum(z.capacity for z in zs), sum(z.size for z in zs), [z.first_index for z in zs])


def _first_zone_key(zs: Sequence[ZoneOffer]) -> tuple[int, int, int, int, ZoneId]:
    return single_zone_key(zs[0]) if zs else (0, 0, 0, 0, ("", ""))


Cost = tuple[int, int, int, int]


def _best_subset(zones: Sequence[ZoneOffer], need: int, k: int) -> list[ZoneOffer]:
    # state (taken, covered) → (cost, chosen positions); cost = (−affinity, untouched capacity
    # broken, capacity taken, nodes taken): lexicographic order is kept by addition
    best: dict[tuple[int, int], tuple[Cost, tuple[int, ...]]] = {(0, 0): ((0, 0, 0, 0), ())}
    for pos, z in enumerate(zones):
        step: Cost = (-z.affinity, z.capacity if z.untouched else 0, z.capacity, z.size)
        for (taken, covered), (cost, chosen) in list(best.items()):
            if taken == k or covered >= need:
                continue
            state = (taken + 1, min(need, covered + z.capacity))
            added: Cost = (cost[0] + step[0], cost[1] + step[1], cost[2] + step[2], cost[3] + step[3])
            new = (added, (*chosen, pos))
            held = best.get(state)
            if held is None or new < held:
                best[state] = new
    _, chosen = min(v for (taken, covered), v in best.items() if covered >= need and taken <= k)
    return [zones[p] for p in chosen]


def split_slots(
    zones: Sequence[ZoneOffer],
    need: int,
    home: Collection[ZoneId] = (),
    nodes: Mapping[ZoneId, int] | None = None,
) -> list[tuple[ZoneOffer, int]]:
    """How many of ``need`` slots each chosen zone takes (rule 2): the zones of the gang's bound
    siblings (``home``) first, then the largest zone first. Given ``nodes`` (the default's
    distinct nodes: each zone's nodes with room that hold none of the gang), the zones beyond
    ``home`` first take one slot per such node, and only then the rest of their room: ranks share
    a node only when the chosen zones run out of free ones (three workers over a leaf of one node
    with room for two and a leaf of two nodes with room for one each take all three nodes). While
    the chosen zones have a free node per slot, ``home`` too first takes only its free nodes: a
    bound sibling's node is no free one, and a rank goes to a free node of any zone the gang takes
    before it joins a sibling (the zones are chosen already: this costs no zone more). When they
    have fewer, ranks share anyway, and ``home`` gives its whole room first (as ranks that must
    share take the siblings' nodes first: ``nodechoice.choose_ranked``)."""
    order = sorted(zones, key=lambda z: (z.id not in home, -z.capacity, z.first_index, z.id))
    out: list[tuple[ZoneOffer, int]] = []
    if nodes is None or len(order) == 1:  # one pass, by room (kept plain: it runs for every gang)
        for z in order:
            if need <= 0:
                break
            out.append((z, min(z.capacity, need)))
            need -= out[-1][1]
        return out
    taken = dict.fromkeys((z.id for z in order), 0)
    left = need
    apart = sum(min(z.capacity, nodes.get(z.id, 0)) for z in order) >= need  # a free node per slot
    for distinct in (True, False):  # one slot per free node first, then the rest of the room
        for z in order:
            cap = min(z.capacity, nodes.get(z.id, 0)) if distinct and (apart or z.id not in home) else z.capacity
            take = min(cap - taken[z.id], left)
            if take > 0:
                taken[z.id] += take
                left -= take
    return [(z, taken[z.id]) for z in order if taken[z.id]]


def _roomiest(z: ZoneOffer) -> tuple[int, int, ZoneId]:
    """Rule 2's order of zones: the most capacity first, ties the lower first index."""
    return (-z.capacity, z.first_index, z.id)


def slots_in(
    candidates: Callable[[ZoneId], Sequence[Candidate]],
    chosen: Sequence[ZoneOffer],
    need: int,
    *,
    home: Collection[ZoneId] = (),
    pack: bool = False,
    held: Mapping[str, int] | None = None,
    domains: Mapping[str, str] | None = None,
) -> list[Slot]:
    """The gang's ``need`` slots in its ``chosen`` zones (rules 2 and 3; ``home``: its bound
    siblings' zones; ``held``: node → its bound siblings there; ``candidates``: a zone's
    candidates, best first). With ``pack`` the zones beyond ``home`` are one pool: the fewest nodes
    of those zones hold the gang, not the fewest of each zone's share (4 workers over a leaf with
    three half free nodes and a leaf with one empty node take the empty node and two others, not
    all four). Every pooled zone still takes some: they are the fewest zones that hold the gang.
    So are the zones of ``home``, filled first: the siblings' nodes in any of them cost no node
    more (rank 0 on n0 in leaf 1 and rank 3 on n2 in leaf 2 with room for three: ranks 1 and 2
    beside rank 3, not onto a new n1 because leaf 1 has the most room).
    ``domains``: node → its NVLink domain; the gang takes each part in its bound siblings'
    domains first, then the fewest further domains (:func:`domain_parts`)."""
    lists = {z.id: candidates(z.id) for z in chosen}
    parts: list[tuple[Sequence[Candidate], int]]
    if pack:  # the siblings' zones one pool, filled first (rule 2), the others another
        mine = min(need, sum(z.capacity for z in chosen if z.id in home))
        # the siblings' zones in rule 2's order (the roomiest first), each best first: which of
        # them takes a rank is the zones' rule, not the scores' (those choose only nodes of a zone)
        inner = [c for z in sorted(chosen, key=_roomiest) if z.id in home for c in lists[z.id]]
        outer = sorted((c for z in chosen if z.id not in home for c in lists[z.id]), key=rank_key)
        pools = [inner, outer]
        parts = [(pool, m) for pool, m in zip(pools, (mine, need - mine), strict=True) if m > 0]
    else:
        free = None
        if len(chosen) > 1:  # distinct nodes across the chosen zones (rule 2)
            free = {z: sum(1 for c in cs if c.name not in held) if held else len(cs) for z, cs in lists.items()}
        parts = [(lists[z.id], m) for z, m in split_slots(chosen, need, home, free)]
    if domains:
        parts = [p for ranked, m in parts for p in domain_parts(ranked, m, domains, pack=pack, held=held)]
    slots: list[Slot] = []
    for ranked, m in parts:
        for cand, count in choose_ranked(ranked, m, pack=pack, held=held):
            slots += [Slot(cand.name, cand.index)] * count
    return slots


def domain_unit(node: str, domains: Mapping[str, str]) -> str:
    """The NVLink domain ``node`` counts in (``domains``: node → domain): its own, a domain of one
    node, when it names none."""
    return domains.get(node) or f"node#{node}"


def domain_parts(
    ranked: Sequence[Candidate],
    need: int,
    domains: Mapping[str, str],
    *,
    pack: bool = False,
    held: Mapping[str, int] | None = None,
) -> list[tuple[Sequence[Candidate], int]]:
    """Rule 3's NVLink tier: ``need`` slots of one share (``ranked``: its candidates, best first)
    in the fewest NVLink domains (``domains``: node → domain; a node without one is a domain of
    its own) that hold them, and among sets of that many the best fit — rule 1 one tier down: the
    least room, then fewer nodes, lower first index. A domain's room is its slots with ``pack``
    (ranks packed NVLink first), its nodes by default (distinct nodes first: a domain never makes
    ranks share a node; a node holding a bound sibling, ``held``, is no distinct node). The
    domains of the gang's bound siblings come first, as their zones do (rule 2): they cost no
    domain more; only what they cannot hold goes to the fewest further domains. By default the
    chosen domains take their shares the siblings' first, then the largest first (rule 2 one tier
    down: the largest part of the gang in one domain); with ``pack`` they are one pool (rule 3
    takes its fewest nodes; each chosen domain still takes some). The one part ``(ranked, need)``
    when domains do not choose: every node its own domain and none a sibling's, or by default
    fewer free nodes than ``need`` (then every node takes ranks anyway)."""
    held = held or {}
    if need <= 0 or (not pack and sum(1 for c in ranked if c.name not in held) < need):
        return [(ranked, need)]
    units: dict[str, list[Candidate]] = {}  # domain → its candidates, best first
    for c in ranked:
        units.setdefault(domain_unit(c.name, domains), []).append(c)
    home = {domain_unit(n, domains) for n in held} & units.keys()
    if len(units) == len(ranked) and not any(domains.get(n) in units for n in held):  # nothing to choose
        return [(ranked, need)]
    offers = {
        key: ZoneOffer(("", key), len(cs), _domain_room(cs, pack, held), False, min(c.index for c in cs))
        for key, cs in units.items()
    }
    room = sum(offers[key].capacity for key in home)
    further = choose_zones((z for key, z in offers.items() if key not in home), need - room) if room < need else []
    if further is None:
        return [(ranked, need)]
    chosen = [*(offers[key] for key in sorted(home)), *further]
    if pack:
        keep = {z.id[1] for z in chosen}
        return [([c for c in ranked if domain_unit(c.name, domains) in keep], need)]
    return [(units[z.id[1]], m) for z, m in split_slots(chosen, need, home={("", key) for key in home})]


def _domain_room(cands: Sequence[Candidate], pack: bool, held: Mapping[str, int]) -> int:
    """A domain's room for the gang (:func:`domain_parts`): its slots with ``pack``, else its
    nodes free of the gang."""
    if pack:
        return sum(c.capacity for c in cands)
    return sum(1 for c in cands if c.name not in held) if held else len(cands)
