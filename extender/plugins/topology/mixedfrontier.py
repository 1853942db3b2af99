"""What nodes and zones hold of a gang whose quotas differ in size (``mixedplan``), and rule 1,
the zones such a gang takes. Pure functions: no session, no I/O.

A gang of several **kinds** (``mixedorder.Kind``: its quotas that are alike) is measured in
**count vectors**: how many quotas of each kind. What a node can hold of the gang is the set of
count vectors whose summed request fits its room on every resource (kinds its predicates refuse:
none); a set of nodes holds the sum of what each holds. Such a set is downward closed and is kept
as its maximal vectors, capped at the gang's counts: its **frontier** (:func:`node_frontier`,
:func:`frontier_of`). A zone set holds the gang iff its frontier reaches the gang's counts: never
an over-promise, never a refusal of a gang that fits (:func:`choose_zones_mixed`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from extender.plugins.topology.gangplan import ZoneOffer, fewest_zones_that, single_zone_key
from extender.plugins.topology.mixedorder import Kind, MixedNode, add, fits_more, room_for, takes

__all__ = [
    "STATE_LIMIT",
    "Counts",
    "Frontier",
    "choose_zones_kept",
    "choose_zones_mixed",
    "combine",
    "combined",
    "frontier_of",
    "may_hold",
    "node_frontier",
    "node_fronts",
    "states",
    "takes_some",
]

Counts = tuple[int, ...]
Frontier = tuple[Counts, ...]

STATE_LIMIT = 4096
"""Count vectors a gang may have (Π (count + 1)) for this exact planning; a gang of more (many
kinds of many quotas each) is planned over merged kinds (``gangparts.coarsen``: sound, may wait
longer)."""


def states(kinds: Sequence[Kind]) -> int:
    out = 1
    for k in kinds:
        out *= k.count + 1
    return out


def _maximal(vectors: Iterable[Counts]) -> Frontier:
    """The vectors no other vector dominates (componentwise ≥ and different)."""
    uniq = sorted(set(vectors), key=sum, reverse=True)
    out: list[Counts] = []
    for v in uniq:
        if not any(all(a >= b for a, b in zip(w, v, strict=True)) for w in out):
            out.append(v)
    return tuple(out)


def node_frontier(node: MixedNode, kinds: Sequence[Kind]) -> Frontier:
    """What ``node`` can hold of the gang, as maximal count vectors."""
    found: list[Counts] = []

    def grow(t: int, total: dict[str, int], vec: list[int]) -> None:
        if t == len(kinds):
            found.append(tuple(vec))
            return
        n = 0
        apart = kinds[t].apart  # a kind an earlier one on the node repels takes none here
        allowed = node.eligible[t] and not (apart and any(vec[k] for k in apart if k < t))
        most = 1 if t in apart else kinds[t].count  # a kind that repels itself: one a node
        while allowed and n < most and fits_more(total, kinds[t].request, node.room, n + 1):
            n += 1
        for c in range(n, -1, -1):  # the largest first: the others matter only when later kinds fill up
            vec.append(c)
            grow(t + 1, add(total, kinds[t].request, c), vec)
            vec.pop()
            if t == len(kinds) - 1:
                break

    grow(0, {}, [])
    return _maximal(found)


def may_hold(nodes: Iterable[MixedNode], kinds: Sequence[Kind]) -> bool:
    """A necessary condition for ``nodes`` to hold the gang, far cheaper than their frontier: the
    quotas of each kind fit them with every node taking of that kind what its room takes of it
    alone (the other kinds aside). False: no placement exists; True: one may. One pass, which
    ends once every kind is covered."""
    # a kind that asks for nothing a room counts fits any node its predicates allow: not counted
    short = [k.count if any(v > 0 for v in k.request.values()) else 0 for k in kinds]
    left = sum(1 for c in short if c > 0)
    for node in nodes:
        if left == 0:
            break
        for t, kind in enumerate(kinds):
            if short[t] > 0 and node.eligible[t]:
                short[t] -= room_for(kind.request, node.room)
                left -= short[t] <= 0
    return left == 0


def takes_some(node: MixedNode, kinds: Sequence[Kind]) -> bool:
    """Whether ``node`` takes at least one quota of the gang (its frontier is not just zero): one
    quota of some kind (:func:`takes`) — what :func:`node_frontier` finds first, without the rest."""
    return any(takes(node, kinds, t) for t in range(len(kinds)))


def combine(a: Frontier, b: Frontier, need: Counts) -> Frontier:
    """What two disjoint sets of nodes hold together, capped at ``need``."""
    return _maximal(tuple(min(x + y, n) for x, y, n in zip(u, v, need, strict=True)) for u in a for v in b)


def frontier_of(nodes: Iterable[MixedNode], kinds: Sequence[Kind]) -> Frontier:
    """What ``nodes`` hold of the gang together (each node's frontier measured as
    :func:`node_fronts` does, and only until they hold it)."""
    front = _FrontMemo(kinds)
    return combined((front(node) for node in nodes), tuple(k.count for k in kinds))


def node_fronts(nodes: Iterable[MixedNode], kinds: Sequence[Kind]) -> dict[str, Frontier]:
    """Each node's frontier by name; nodes of equal room and predicates (a zone's empty nodes)
    hold the same, measured once."""
    front = _FrontMemo(kinds)
    return {node.name: front(node) for node in nodes}


class _FrontMemo:
    """:func:`node_frontier` for one gang's kinds, once per room and predicates."""

    def __init__(self, kinds: Sequence[Kind]) -> None:
        self.kinds = kinds
        self.seen: dict[tuple[tuple[tuple[str, int], ...], tuple[bool, ...]], Frontier] = {}

    def __call__(self, node: MixedNode) -> Frontier:
        key = (tuple(node.room.items()), node.eligible)
        out = self.seen.get(key)
        if out is None:
            out = self.seen[key] = node_frontier(node, self.kinds)
        return out


def combined(fronts: Iterable[Frontier], need: Counts) -> Frontier:
    """What disjoint sets of nodes with these frontiers hold together, capped at ``need``: once
    they reach ``need`` (a frontier of that one vector), more nodes add nothing, and the rest of
    ``fronts`` (lazy: each node's, computed on demand) is not read.

    A frontier that once added nothing is **absorbed** and skipped from then on: capped sums are
    commutative and associative, so if ``out ⊕ f = out`` then ``(out ⊕ g) ⊕ f = out ⊕ g`` for
    any later ``g``. A zone's nodes hold few distinct frontiers (its full nodes, its empty ones,
    a few in between: about 4 a zone in ``bench/binder_cycle.py --launchers``), so a zone costs
    about as many sums as it has distinct frontiers until each is absorbed, not one a node
    (there: 125,044 sums a cycle before, one for each node read)."""
    out: Frontier = (tuple(0 for _ in need),)
    absorbed: set[Frontier] = set()
    for front in fronts:
        if front in absorbed:
            continue
        grown = combine(out, front, need)
        if need in grown:
            return grown
        if len(grown) == len(out) and set(grown) == set(out):
            absorbed.add(front)
        out = grown
    return out


def choose_zones_mixed(
    zones: Sequence[tuple[ZoneOffer, Frontier]], need: Counts, start: Frontier = ()
) -> list[ZoneOffer] | None:
    """Rule 1: the zones that together (with ``start``, what the gang's bound siblings' zones
    still hold) reach ``need``, fewest first, then by :func:`gangplan.choose_zones`'s costs."""
    base = start or (tuple(0 for _ in need),)
    if need in base:
        return []
    single = [z for z, f in zones if need in combine(base, f, need)]
    if single:
        return [min(single, key=single_zone_key)]
    Cost = tuple[int, int, int, int]
    best: dict[tuple[int, Counts], tuple[Cost, tuple[int, ...]]] = {(0, c): ((0, 0, 0, 0), ()) for c in base}
    for pos, (z, front) in enumerate(zones):
        step: Cost = (-z.affinity, z.capacity if z.untouched else 0, z.capacity, z.size)
        for (taken, covered), (cost, chosen) in list(best.items()):
            if covered == need:
                continue
            added: Cost = (cost[0] + step[0], cost[1] + step[1], cost[2] + step[2], cost[3] + step[3])
            for part in front:
                state = (taken + 1, tuple(min(c + p, n) for c, p, n in zip(covered, part, need, strict=True)))
                held = best.get(state)
                if held is None or (added, (*chosen, pos)) < held:
                    best[state] = (added, (*chosen, pos))
    done = [(taken, v) for (taken, covered), v in best.items() if covered == need]
    if not done:
        return None
    _, (_, chosen) = min(done)
    return [zones[p][0] for p in chosen]


def choose_zones_kept(
    zones: Sequence[tuple[ZoneOffer, Frontier]],
    need: Counts,
    start: Frontier = (),
    in_order: Callable[[Sequence[ZoneOffer]], bool] | None = None,
) -> list[ZoneOffer] | None:
    """Rule 1 for a gang that must keep an order (``mixedplan`` rule 2): :func:`choose_zones_mixed`
    when ``in_order`` is None; else the fewest zones whose nodes ``in_order`` accepts (beside what
    ``start`` stands for, the bound siblings' part: none further when it alone is accepted),
    cheapest first (:func:`gangplan.fewest_zones_that`) — no fewer than hold the gang in any
    order. For the zones of a leaf tier and the NVLink domains inside them (``mixeddomains``)."""
    any_order = choose_zones_mixed(zones, need, start)
    if in_order is None or any_order is None:
        return any_order
    if start and in_order([]):
        return []
    return fewest_zones_that([z for z, _ in zones], in_order, smallest=max(1, len(any_order)))
