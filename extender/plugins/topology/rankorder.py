"""Rank order (rule 4 of ``gangplan``): which slot each quota of a gang takes, so that task *i*
sits on a node index ≥ that of task *i−1* (the seed's closed range ``[preNode, lastNode]``), and
how a gang whose plan breaks that order around its bound siblings is placed in order instead.
Pure functions: no session, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence

from extender.plugins.topology.gangplan import Range, Slot, ZoneId, ZoneOffer, domain_unit, fewest_zones_that
from extender.plugins.topology.nodechoice import Candidate, fewest_to_reach

__all__ = ["assign_in_domains", "assign_in_order", "assign_ranks", "order_break", "ordered_in_zones"]


def assign_ranks(
    slots: Sequence[Slot],
    ranges: Sequence[tuple[int | None, int | None]],
) -> list[Slot]:
    """The slot of each quota, given in task-index order with the closed node-index range its bound
    siblings leave it (``None``: open); rule 4. ``len(slots) == len(ranges)``."""
    ordered = sorted(slots, key=lambda s: (s.index, s.node))
    if all(lo is None and hi is None for lo, hi in ranges):
        return ordered
    free = list(ordered)
    out: list[Slot] = []
    for lo, hi in ranges:
        pick = 0
        for i, s in enumerate(free):
            if (lo is None or s.index >= lo) and (hi is None or s.index <= hi):
                pick = i
                break
        out.append(free.pop(pick))
    return out


def order_break(placed: Sequence[Slot], ranges: Sequence[Range]) -> tuple[int, str] | None:
    """The first quota of ``placed`` (task order) outside its range or below the quota before it:
    its position and how (``"0 < 3"``: node index 0 where 3 at least was due); None: none is."""
    last = -1
    for at, (s, (lo, hi)) in enumerate(zip(placed, ranges, strict=True)):
        low = max(last, -1 if lo is None else lo)
        if s.index < low:
            return at, f"{s.index} < {low}"
        if hi is not None and s.index > hi:
            return at, f"{s.index} > {hi}"
        last = s.index
    return None


def assign_in_order(
    candidates: Sequence[Candidate],
    ranges: Sequence[Range],
    *,
    pack: bool = False,
    held: Collection[str] = (),
    outside: Collection[str] = (),
    away: int | None = None,
) -> list[Slot] | None:
    """Rule 4 for a gang whose bound siblings fence its ranks (``ranges``, task order): the quotas
    in rank order on the ``candidates``, exactly, as rule 2 places them by room, with at most
    ``away`` quotas on nodes of ``outside`` (beyond the siblings' zones; None: any — a bound, not
    a cost: a gang without strict order keeps the order only where it costs no locality). By
    default one quota a node (none on a node holding a bound sibling, ``held``, or an earlier one
    of them) while some placement allows it, the fewest quotas outside first, then the lowest
    node indices; else the fewest quotas outside, then the fewest ranks sharing a node (ranks
    share only where the order leaves them no free node), then the lowest indices. With ``pack``
    (rule 3's ``pack_workers``) the fewest nodes instead, the fewest quotas outside first
    (:func:`packed_in_order`). None when no placement in rank order exists (within ``away``).

    Greedy lowest index first is not exact: task 0 bound on n1 (room for one more) in leaf 1, n3
    (room for two) in leaf 2; free nodes first put tasks 1 and 2 both on n3, two quotas outside
    leaf 1, where n1, n3 put one. Nor is "else packed": 4 × 4-GPU, rank 0 bound on n2 (room for one
    more) in leaf 1, leaf 2 three empty nodes, at most two quotas outside: rank 1 beside rank 0,
    ranks 2 and 3 on two of the empty nodes (one rank sharing), not both on one (two)."""
    if pack:
        return packed_in_order(candidates, ranges, held=held, outside=outside)

    def apart(pos: int, c: Candidate, most: int) -> Iterator[tuple[int, Cost]]:
        if c.name not in held:  # one quota a node, each free of the gang
            yield 1, (c.name in outside, 0, 0, pos)

    def near(pos: int, c: Candidate, most: int) -> Iterator[tuple[int, Cost]]:
        free = c.name not in held
        for k in range(1, most + 1):
            yield k, (k * (c.name in outside), k - free, 0, k * pos)

    def within(placed: list[Slot] | None) -> bool:
        return placed is not None and (away is None or sum(s.node in outside for s in placed) <= away)

    placed = _least_in_order(candidates, ranges, apart)
    if within(placed):
        return placed
    placed = _least_in_order(candidates, ranges, near)
    return placed if within(placed) else None


Cost = tuple[int, int, int, int]  # lexicographic and additive over the nodes a placement takes
Path = tuple["Path", int, int] | None  # the placement so far, linked: (before, node position, quotas there)
Steps = Callable[[int, Candidate, int], Iterable[tuple[int, Cost]]]  # (position, node, most) → (quotas, cost)


def packed_in_order(
    candidates: Sequence[Candidate],
    ranges: Sequence[Range],
    *,
    held: Collection[str] = (),
    outside: Collection[str] = (),
) -> list[Slot] | None:
    """Rule 4 with ``pack_workers``: the quotas of ``ranges`` (task order, each fenced by its
    bound siblings) in rank order on the fewest nodes. Lexicographically least: quotas on nodes
    of ``outside`` (beyond the siblings' zones: rule 2 fills those first), then nodes that hold
    none of the siblings (``held``: theirs cost no node more), then those nodes' room (best fit),
    then lower node indices. None when no placement in rank order exists (:func:`_least_in_order`).
    A node that adds no quota outside takes as many as it may: placing more quotas there never
    costs the rest more (what places the later ones places a suffix of them). Greedy lowest index
    first is not exact: task 2 bound on n3, n0 with room for one, n1 and n4 for two; tasks 0 and 1
    on n0 and n1 then task 3 on n4 take four nodes, n1, n1, n4 three."""

    def packed(pos: int, c: Candidate, most: int) -> Iterator[tuple[int, Cost]]:
        far, new = c.name in outside, c.name not in held
        for k in range(1, most + 1) if far else (most,) if most else ():
            yield k, (k * far, new, c.capacity * new, k * pos)

    return _least_in_order(candidates, ranges, packed)


def _least_in_order(candidates: Sequence[Candidate], ranges: Sequence[Range], steps: Steps) -> list[Slot] | None:
    """The least placement of the quotas of ``ranges`` (task order, each fenced by its bound
    siblings) in rank order on ``candidates``, by the cost ``steps`` gives a node for taking k of
    them (``most``: the most it may take from there on; a cost never falls as k grows). None
    when none exists.

    Exact: in rank order each node takes a run of consecutive quotas, so a dynamic programme over
    the nodes in index order keeps, per number of quotas placed, the cheapest placement so far.
    States that place fewer quotas at no lower cost are dropped (whatever completes them
    completes the other, for no more): at most one state per count of quotas, so the time is
    O(nodes × quotas × the steps of a node) — the quotas are typically few: the rest of a gang
    whose others stay bound."""
    nodes = sorted(candidates, key=lambda c: (c.index, c.name))
    need = len(ranges)
    los = [-1 if lo is None else lo for lo, _ in ranges]
    his = [nodes[-1].index if hi is None else hi for _, hi in ranges] if nodes else []
    best: dict[int, tuple[Cost, Path]] = {0: ((0, 0, 0, 0), None)}
    for pos, c in enumerate(nodes):
        index = c.index
        grown = dict(best)
        for placed, (cost, path) in best.items():
            most = 0  # the quotas from ``placed`` on that may sit on this node, in a run
            while most < c.capacity and placed + most < need and los[placed + most] <= index <= his[placed + most]:
                most += 1
            for k, add in steps(pos, c, most) if most else ():
                step = (cost[0] + add[0], cost[1] + add[1], cost[2] + add[2], cost[3] + add[3])
                if placed + k not in grown or step < grown[placed + k][0]:
                    grown[placed + k] = (step, (path, pos, k))
        best, least = {}, None  # drop a state that places fewer quotas at no lower cost
        for placed in sorted(grown, reverse=True):
            if least is None or grown[placed][0] < least:
                best[placed] = grown[placed]
                least = grown[placed][0]
    if need not in best:
        return None
    taken: list[tuple[int, int]] = []  # (node position, quotas there), the last node first
    link = best[need][1]
    while link is not None:
        link, pos, k = link
        taken.append((pos, k))
    return [Slot(nodes[pos].name, nodes[pos].index) for pos, k in reversed(taken) for _ in range(k)]


def assign_in_domains(
    candidates: Sequence[Candidate],
    ranges: Sequence[Range],
    *,
    domains: Mapping[str, str],
    siblings: Collection[str],
    pack: bool = False,
    held: Collection[str] = (),
    outside: Collection[str] = (),
    away: int | None = None,
) -> list[Slot] | None:
    """:func:`assign_in_order` in the fewest NVLink domains (``domains``: node → domain; a node
    without one is a domain of its own) that allow it: the domains of the bound ``siblings``
    (their nodes) first, then the fewest further ones, the cheapest such set by rule 1 one tier
    down (:func:`gangplan.fewest_zones_that`) — as :func:`gangplan.domain_parts` does where order
    does not decide. By default never at the cost of a rank sharing a node more than on all the
    ``candidates``: a domain never makes ranks share a node. ``pack``, ``held``, ``outside`` and
    ``away``: as :func:`assign_in_order`."""
    whole = assign_in_order(candidates, ranges, pack=pack, held=held, outside=outside, away=away)
    if whole is None or not domains:
        return whole
    units: dict[str, list[Candidate]] = {}
    for c in candidates:
        units.setdefault(domain_unit(c.name, domains), []).append(c)
    home = {domain_unit(n, domains) for n in siblings} & units.keys()
    if len(units) == len(candidates) and not any(domains.get(n) in units for n in siblings):  # nothing to choose
        return whole
    shared = None if pack else _shared(whole, siblings)

    def place(zs: Sequence[ZoneOffer]) -> list[Slot] | None:
        keys = home | {z.id[1] for z in zs}
        inside = [c for c in candidates if domain_unit(c.name, domains) in keys]
        placed = assign_in_order(inside, ranges, pack=pack, held=held, outside=outside, away=away)
        if placed is None or (shared is not None and _shared(placed, siblings) > shared):
            return None
        return placed

    further = [
        ZoneOffer(("", key), len(cs), sum(c.capacity for c in cs), False, min(c.index for c in cs))
        for key, cs in units.items()
        if key not in home
    ]
    lacking = len(ranges) - sum(c.capacity for key in home for c in units[key])
    smallest = fewest_to_reach((z.capacity for z in further), lacking) if lacking > 0 else 0
    if smallest is None:
        return whole
    found = fewest_zones_that(further, lambda zs: place(zs) is not None, smallest=smallest)
    return whole if found is None else place(found)


def _shared(placed: Sequence[Slot], siblings: Collection[str]) -> int:
    """How many of ``placed`` share a node with a bound sibling or an earlier one of them."""
    seen = set(siblings)
    count = 0
    for s in placed:
        count += s.node in seen
        seen.add(s.node)
    return count


def ordered_in_zones(
    candidates: Callable[[ZoneId], Sequence[Candidate]],
    chosen: Sequence[ZoneId],
    ranges: Sequence[Range],
    *,
    home: Sequence[ZoneId] = (),
    further: Sequence[ZoneOffer] | None = None,
    away: int | None = None,
    pack: bool = False,
    held: Collection[str] = (),
    domains: Mapping[str, str] | None = None,
) -> tuple[list[Slot], list[ZoneId]] | None:
    """Rule 4 when a gang's slots break rank order around its bound siblings (``ranges``, task
    order): its slots by :func:`assign_in_order` on the ``candidates`` of its ``chosen`` zones if
    they allow it (rank order then costs no zone more), and the zones used — with ``away`` (a gang
    that does not ask for strict order: order is a preference, never at a cost), only if they put
    at most that many quotas outside ``home``, its siblings' zones, which come first (rule 2);
    else, given ``further`` zones (a strict-order gang: its spec's zones but ``home``), beside
    ``home`` the fewest of them that allow it, the cheapest such set by rule 1
    (:func:`fewest_zones_that`); None when none do. ``pack`` and ``held``: as
    :func:`assign_in_order` (by default one quota a node, nodes free of the siblings first, else
    the fewest quotas outside ``home``, then the fewest ranks sharing a node; packed the fewest
    quotas outside first, then the fewest nodes); ``domains`` (node → NVLink domain): within the
    zones, the fewest domains that keep the order (:func:`assign_in_domains`)."""

    def place(zones: Sequence[ZoneId]) -> tuple[list[Slot], list[ZoneId]] | None:
        zone_of = {c.name: z for z in zones for c in candidates(z)}
        cands = [c for z in zones for c in candidates(z)]
        far = {c.name for c in cands if zone_of[c.name] not in home} if home else ()
        if domains:
            placed = assign_in_domains(
                cands, ranges, domains=domains, siblings=held, pack=pack, held=held, outside=far, away=away
            )
        else:
            placed = assign_in_order(cands, ranges, pack=pack, held=held, outside=far, away=away)
        return None if placed is None else (placed, sorted({zone_of[s.node] for s in placed}))

    got = place(chosen)
    if got is not None and away is not None:
        outside = {c.name for z in chosen if z not in home for c in candidates(z)}

        def near(p: tuple[list[Slot], list[ZoneId]] | None) -> bool:
            return p is not None and sum(1 for s in p[0] if s.node in outside) <= away

        return got if near(got) else None
    if got is not None or further is None:
        return got

    def beside(zs: Sequence[ZoneOffer]) -> list[ZoneId]:
        return [*home, *(z.id for z in zs)]

    # in order needs at least the zones that hold the rest by capacity alone
    lacking = len(ranges) - sum(c.capacity for z in home for c in candidates(z))
    smallest = fewest_to_reach((z.capacity for z in further), lacking) if lacking > 0 else 0
    if smallest is None:
        return None
    found = fewest_zones_that(further, lambda zs: place(beside(zs)) is not None, smallest=smallest)
    return None if found is None else place(beside(found))
