"""Planning a gang whose quotas differ in size (an MPI launcher beside its workers, a master beside
workers): seed 三 3.4, issue 16 items 2–3. Pure functions: no session, no I/O.

Vocabulary (beside :mod:`gangplan`'s): a **kind** is the gang's quotas that are alike (one shape);
a **count vector** says how many quotas of each kind; a node's or a zone's **frontier** is what it
can hold of the gang (``mixedfrontier``).

The rules:

1. **Zones** (:func:`mixedfrontier.choose_zones_mixed`): as :func:`gangplan.choose_zones` with the
   frontier in place of a capacity — one zone whose frontier reaches the gang's counts, best fit
   (the least capacity for the gang's largest kind, then fewer nodes, lower index); else an exact
   dynamic programme over (zones taken, count vector covered) for the fewest zones, with the same
   costs. A zone set holds the gang iff its frontier reaches the counts: never an over-promise,
   never a refusal of a gang that fits.
2. **Strict rank order** (:func:`gangplan.fewest_zones_that`): a strict-order gang needs a
   placement whose node index never descends as the task index ascends, its bound siblings'
   included: each quota inside its *fence*, the node-index range its bound siblings leave it
   (``MixedGang.fences``, the seed's ``[preNode, lastNode]``); zone sets are tried smallest first,
   cheapest first, and a set holds the gang iff :func:`mixedorder.next_fit` places it so. Past
   :data:`gangplan.SEARCH_LIMIT` sets, every zone is taken if together they hold it so (the gang
   runs, in more zones than it might need, rather than wait).
3. **Which nodes** (:func:`preferred`, unless ``pack_workers`` or ranks must share): of the
   chosen zones' nodes, while they count at least one node with room for some quota of the gang,
   free of the gang (not its bound siblings'), per quota (:func:`must_share`), the best scored
   of those free nodes (the QN ``node_order`` stage: binpack, eviction cost …; ties: lower
   index; a bound sibling's node only after every free one), one per quota
   (distinct nodes), and as few more as hold the gang — in the rank order the chosen zones allow
   (:func:`mixedorder.order_kept`: inside the fences, else among the gang's own quotas, else
   none). With ``pack_workers``, or when they count fewer (ranks must share: as
   ``nodechoice.choose_ranked`` for a gang of one kind, not over every node; :func:`packed`): the
   bound siblings' nodes first (they cost no node more; only those when they hold the gang),
   then the fewest nodes that hold the gang (in that rank order), and among those the least
   capacity taken (best fit, as for gangs of one kind). Where nodes name NVLink domains, both
   choose among the nodes of the fewest domains that hold the gang, the siblings' first
   (:func:`mixeddomains.in_fewest_domains`; not when ranks must share by default, nor in a
   continuity run).
4. **Nodes and ranks** (:func:`place`): on those nodes, quotas in task order, each on the
   lowest-index node inside its fence after the previous quota's (pack, or ranks that must share:
   a node of the bound siblings' zones first, then the previous quota's node) that still lets the
   rest follow in order
   (:func:`mixedorder.place_ordered`); so rank order holds, around the bound siblings too,
   whenever the chosen zones allow it (always, for a strict-order gang). When they do not (only a
   gang that does not ask for strict order gets there), a placement from the frontiers, in which
   each kind's quotas still ascend with the node index — by default one quota a node whenever
   the nodes allow it.

:func:`zones_mixed` (rules 1–2) and :func:`place_mixed` (rules 3–4) apply the rules for the
planner (``mixedplanner.py``), which supplies the zones' nodes, their frontiers and its tier walk;
:func:`plan_mixed` applies all four over given zones, the fewest anywhere.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from extender.plugins.topology.gangplan import SEARCH_LIMIT, ZoneId, ZoneOffer, single_zone_key
from extender.plugins.topology.mixeddomains import in_fewest_domains
from extender.plugins.topology.mixedfrontier import (
    Counts,
    Frontier,
    choose_zones_kept,
    combined,
    frontier_of,
    may_hold,
    node_frontier,
    node_fronts,
    takes_some,
)
from extender.plugins.topology.mixedorder import (
    Alone,
    AloneMemo,
    Fences,
    Kind,
    MixedNode,
    fits_apart,
    next_fit,
    order_kept,
    place_ordered,
    room_for,
)
from extender.plugins.topology.nodechoice import fewest_to_reach

__all__ = [
    "Kind",
    "MixedGang",
    "MixedNode",
    "holds_apart",
    "must_share",
    "next_fit",
    "nodes_and_ranks",
    "packed",
    "place",
    "place_mixed",
    "plan_mixed",
    "preferred",
    "room_for",
    "zones_mixed",
]


@dataclass(frozen=True, slots=True)
class MixedGang:
    """The gang's kinds, the kind of each of its unbound quotas in task order, and its options."""

    kinds: Sequence[Kind]
    order: Sequence[int]
    strict: bool = False  # strict rank order (rule 2)
    pack: bool = False  # pack_workers (rule 3)
    head: int = 0  # the kind of the gang's largest quota (pack's best fit counts room in it)
    fences: Fences = ()  # each quota's node-index range between its bound siblings (empty: open)
    held: frozenset[str] = frozenset()  # the nodes of its bound siblings (rule 3: no distinct nodes)
    domains: Mapping[str, str] = field(default_factory=dict)  # node → its NVLink domain (rule 3)


def preferred(
    nodes: Sequence[MixedNode],
    kinds: Sequence[Kind],
    order: Sequence[int],
    fences: Fences = (),
    held: Collection[str] = (),
) -> list[MixedNode]:
    """Rule 3 by default while the gang need not share nodes (:func:`must_share`): the
    best-scored of ``nodes`` (which hold the gang), one per quota, and as few more as hold it (in
    the rank order all of ``nodes`` allow: :func:`mixedorder.order_kept`); index order. A node of
    ``held`` (its bound siblings') is no distinct node: every node free of the gang ranks before
    it, whatever the scores (binpack scores a sibling's node higher, for it is fuller), as
    ``nodechoice.choose_ranked`` leaves them out for a gang of one kind. Distinct nodes first:
    the fewest best-scored free nodes that hold the gang one quota a node (in that order:
    :func:`mixedorder.fits_apart`); only when none do, the fewest best-scored that hold it
    (ranks then share where they must)."""
    need = tuple(k.count for k in kinds)
    alone = AloneMemo(nodes, kinds)  # asked of every node scanned for the order and of every prefix tried
    kept = order_kept(nodes, kinds, order, fences, alone)
    ranked = sorted(nodes, key=lambda n: (n.name in held, -n.score, n.index, n.name))
    free = sum(1 for n in ranked if n.name not in held)
    least = max(len(order), _fewest_alone(ranked, kinds, alone))
    apart = _fewest_ranked(ranked, least, free, lambda subset: _apart_in(subset, kinds, order, kept, alone))
    if apart is not None:  # one quota a node, free of the gang, while some such nodes hold it
        return apart
    shared = _fewest_ranked(
        ranked,
        len(order),
        len(ranked) - 1,
        lambda subset: next_fit(subset, kinds, order, kept) if kept is not None else need in frontier_of(subset, kinds),
    )
    return shared if shared is not None else sorted(nodes, key=lambda n: (n.index, n.name))


def _fewest_alone(ranked: Sequence[MixedNode], kinds: Sequence[Kind], alone: Alone) -> int:
    """The length of the shortest prefix of ``ranked`` with, for each kind, as many nodes that
    take a quota of it alone as it has quotas (``len(ranked) + 1`` when there is none): no shorter
    prefix holds the gang one quota a node, in any order, so the search for the fewest that do
    starts there. Where a zone's best-scored nodes are full for the workers and take only the
    launcher, this is where the answer lies, one or two placements away, not a bisection of the
    whole zone (``bench/cycle_instructions.py --launchers --nodes 5000 --leaves 40 --jobs 2000``:
    25.06 G -> 23.31 G instructions a cycle)."""
    short = [k.count for k in kinds]
    left = sum(1 for c in short if c > 0)
    for at, node in enumerate(ranked):
        for t, ok in enumerate(alone[node.name]):
            if ok and short[t] > 0:
                short[t] -= 1
                left -= short[t] == 0
        if left == 0:
            return at + 1
    return len(ranked) + 1


def _fewest_ranked(
    ranked: Sequence[MixedNode], lo: int, hi: int, holds: Callable[[list[MixedNode]], bool]
) -> list[MixedNode] | None:
    """The shortest prefix ``ranked[:k]``, ``lo`` ≤ k ≤ ``hi``, that ``holds`` accepts, in index
    order; None when none does. ``holds`` is monotone (nodes that hold the gang, in rank order
    or one quota a node, still hold it with a node more: the same placement is on them), so the
    shortest is found by bisection: a few placements where one a length made the planning of a
    gang quadratic in the nodes of its zone (``bench/binder_cycle.py --launchers``: 5,000 nodes,
    2,000 gangs, cycle 7.3 s -> 4.7 s)."""
    if lo > hi:
        return None

    def prefix(k: int) -> list[MixedNode]:
        return sorted(ranked[:k], key=lambda n: (n.index, n.name))

    if holds(first := prefix(lo)):
        return first
    if not holds(prefix(hi)):
        return None
    return prefix(lo + bisect.bisect_left(range(lo, hi + 1), True, key=lambda k: holds(prefix(k))))


def holds_apart(nodes: Sequence[MixedNode], kinds: Sequence[Kind], order: Sequence[int], fences: Fences = ()) -> bool:
    """Rule 3's question, whether ranks need share a node: whether ``nodes`` (index order) hold the
    gang one quota a node in the rank order they allow (:func:`mixedorder.order_kept`: inside
    the ``fences``, else among its own quotas, else any)."""
    return _apart_in(nodes, kinds, order, order_kept(nodes, kinds, order, fences))


def _apart_in(
    nodes: Sequence[MixedNode],
    kinds: Sequence[Kind],
    order: Sequence[int],
    kept: Fences | None,
    alone: Alone | None = None,
) -> bool:
    """Whether ``nodes`` hold the gang one quota a node in the order ``kept`` (None: any);
    ``alone``: :func:`mixedorder.takes_alone` of the nodes, when known."""
    if kept is not None:
        return fits_apart(nodes, kinds, order, kept, alone)
    return _place_any(nodes, kinds, order, one_each=True) is not None


def packed(
    nodes: Sequence[MixedNode],
    kinds: Sequence[Kind],
    order: Sequence[int],
    *,
    head: int = 0,
    fences: Fences = (),
    limit: int = SEARCH_LIMIT,
    held: Collection[str] = (),
) -> list[MixedNode]:
    """Rule 3 with ``pack_workers``: the nodes of ``held`` (the bound siblings') first, as they
    cost no node more — only those when they hold the gang — then the fewest of ``nodes`` (which
    hold the gang) that hold it —
    in the rank order all of ``nodes`` allow (:func:`mixedorder.order_kept`) — and among those
    the least capacity taken (best fit, as :func:`nodechoice.choose_nodes` packs; a node's
    capacity: how many quotas of kind ``head``, the gang's largest, its room takes), then fewer
    of the roomiest, the best scores, lower indices.
    Returned in index order.

    Exact while the sets of each size up to the answer number at most ``limit`` in all. Beyond,
    the nodes that hold the most of the gang are taken until they hold it, those it can do without
    are dropped, and then each, the roomiest first, gives way to the smallest node left out that
    keeps the set holding the gang."""
    need = tuple(k.count for k in kinds)
    kept = order_kept(nodes, kinds, order, fences)
    fronts = node_fronts(nodes, kinds)
    slots = {name: max(sum(v) for v in front) for name, front in fronts.items()}  # the most of the gang
    room = {n.name: room_for(kinds[head].request, n.room) if n.eligible[head] else 0 for n in nodes}
    usable = sorted(
        (n for n in nodes if slots[n.name] > 0), key=lambda n: (-slots[n.name], -room[n.name], -n.score, n.index)
    )
    base: list[MixedNode] = []  # the bound siblings' nodes the gang takes whatever else it takes

    def holds(subset: Iterable[MixedNode]) -> bool:
        ranked = sorted([*base, *subset], key=lambda n: (n.index, n.name))
        return (
            next_fit(ranked, kinds, order, kept)
            if kept is not None
            else need in combined((fronts[n.name] for n in ranked), need)
        )

    def cost(subset: tuple[MixedNode, ...]) -> tuple[int, list[int], float, list[int]]:
        caps = sorted((room[n.name] for n in subset), reverse=True)
        return (sum(caps), caps, -sum(n.score for n in subset), sorted(n.index for n in subset))

    mine = [n for n in usable if n.name in held]
    if mine and holds(mine):
        usable = mine
    elif mine:
        base, usable = mine, [n for n in usable if n.name not in held]
    left = len(order) - sum(slots[n.name] for n in base)
    fewest = fewest_to_reach((slots[n.name] for n in usable), left) or len(usable)
    tried = 0
    for k in range(fewest, len(usable) + 1):
        tried += math.comb(len(usable), k)
        if tried > limit:
            break
        # the cheapest set of k that holds the gang: asked in order of cost (a stable sort keeps
        # the first of equal cost), so most sets are never placed (pack_workers, --launchers,
        # 1,000 nodes, 400 gangs: cycle 1.32 s -> 0.74 s)
        best = next((s for s in sorted(itertools.combinations(usable, k), key=cost) if holds(s)), None)
        if best is not None:
            return sorted([*base, *best], key=lambda n: (n.index, n.name))
    chosen = _most_then_best_fit(usable, room, holds)
    return sorted([*base, *chosen], key=lambda n: (n.index, n.name))


def _most_then_best_fit(
    usable: Sequence[MixedNode], room: Mapping[str, int], holds: Callable[[Iterable[MixedNode]], bool]
) -> list[MixedNode]:
    """:func:`packed` beyond its limit (``usable``: the nodes holding the most of the gang first):
    the shortest prefix that holds the gang; then, the last taken first, each node the rest still
    hold the gang without is dropped (a node only it can serve — say the one node that takes the
    launcher — may come late in that order); then each chosen node, the roomiest first, swapped for
    the least roomy node left out (ties: best score, lower index) that keeps the set holding it."""
    chosen: list[MixedNode] = []
    for n in usable:
        chosen.append(n)
        if holds(chosen):
            break
    for n in reversed(list(chosen)):
        without = [x for x in chosen if x is not n]
        if without and holds(without):
            chosen = without
    left = [n for n in usable if n not in chosen]
    for n in sorted(chosen, key=lambda n: (-room[n.name], n.score, -n.index)):
        for m in sorted(left, key=lambda m: (room[m.name], -m.score, m.index, m.name)):
            if room[m.name] >= room[n.name]:
                break
            trial = [m if x is n else x for x in chosen]
            if holds(trial):
                chosen = trial
                left = [n if x is m else x for x in left]
                break
    return chosen


def place(
    nodes: Sequence[MixedNode],
    kinds: Sequence[Kind],
    order: Sequence[int],
    *,
    pack: bool,
    fences: Fences = (),
    home: Collection[ZoneId] = (),
) -> list[str] | None:
    """Rule 4: the node of each quota (kinds ``order``, task order) on ``nodes`` (index order), in
    the rank order they allow (inside ``fences`` if they can), or None when they cannot hold it.
    ``home``: the bound siblings' zones, whose nodes a packed gang takes first."""
    kept = order_kept(nodes, kinds, order, fences)
    ordered = None if kept is None else place_ordered(nodes, kinds, order, kept, pack=pack, home=home)
    if ordered is not None:
        return ordered
    spread = None if pack else _place_any(nodes, kinds, order, one_each=True)
    return spread if spread is not None else _place_any(nodes, kinds, order)


def _place_any(
    nodes: Sequence[MixedNode], kinds: Sequence[Kind], order: Sequence[int], *, one_each: bool = False
) -> list[str] | None:
    """A placement from the frontiers, node by node (each node's share recorded), then each kind's
    quotas on that kind's slots in node-index order. ``one_each``: at most one quota a node
    (distinct nodes, rule 3's default; None when ``nodes`` cannot hold the gang so)."""
    need = tuple(k.count for k in kinds)
    zero = tuple(0 for _ in kinds)
    layers: list[dict[Counts, tuple[Counts, Counts]]] = []  # per node: state → (state before, share)
    reach: dict[Counts, tuple[Counts, Counts]] = {zero: (zero, zero)}
    for node in nodes:
        nxt: dict[Counts, tuple[Counts, Counts]] = {}
        parts = node_frontier(node, kinds)
        if one_each:  # nothing, or one quota of a kind the node takes one of
            kinds_here = sorted({t for p in parts for t, c in enumerate(p) if c})
            parts = (zero, *(tuple(int(k == t) for k in range(len(kinds))) for t in kinds_here))
        for state in reach:
            for part in parts:
                share = tuple(min(p, n - s) for p, n, s in zip(part, need, state, strict=True))
                new = tuple(s + p for s, p in zip(state, share, strict=True))
                nxt.setdefault(new, (state, share))
        layers.append(nxt)
        reach = nxt
    if need not in reach:
        return None
    shares: list[Counts] = []
    state = need
    for layer in reversed(layers):
        state, share = layer[state]
        shares.append(share)
    shares.reverse()
    slots: dict[int, list[str]] = {t: [] for t in range(len(kinds))}
    for node, share in zip(nodes, shares, strict=True):
        for t, c in enumerate(share):
            slots[t] += [node.name] * c
    return [slots[t].pop(0) for t in order]


Choose = Callable[[Sequence[ZoneOffer]], list[ZoneOffer] | None]
ByTier = Callable[[Sequence[ZoneOffer], Choose, Callable[[Sequence[ZoneOffer]], bool]], list[ZoneOffer] | None]


def plan_mixed(
    gang: MixedGang,
    offers: Sequence[ZoneOffer],
    members: Mapping[ZoneId, Sequence[MixedNode]],
    home: Sequence[MixedNode],
) -> tuple[list[ZoneOffer], list[str]] | None:
    """Rules 1–4 over the zones ``offers`` (``members``: each zone's nodes), the fewest anywhere
    (no tier walk): the zones taken beside ``home`` (the nodes of the bound siblings' zones), and
    each quota's node; None when they cannot hold the gang (:func:`zones_mixed`, then
    :func:`place_mixed`)."""
    chosen = zones_mixed(gang, offers, members, home, None)
    return None if chosen is None else place_mixed(gang, chosen, members, home)


def zones_mixed(
    gang: MixedGang,
    offers: Sequence[ZoneOffer],
    members: Mapping[ZoneId, Sequence[MixedNode]],
    home: Sequence[MixedNode],
    by_tier: ByTier | None,
    *,
    measure: Callable[[ZoneId], Frontier] | None = None,
    may: Callable[[ZoneId], bool] | None = None,
) -> list[ZoneOffer] | None:
    """Rules 1–2: the zones of ``offers`` the gang takes beside ``home``; None when they cannot
    hold it. ``by_tier`` (the planner's tier walk: a unit of the lowest tier that holds the
    gang, best fit) is asked once one zone does not do; None: the fewest zones anywhere. The
    gang's nodes lie in every zone chosen unless the choice is of several zones past
    :data:`gangplan.SEARCH_LIMIT` (then every zone that holds it is taken:
    :func:`place_mixed` keeps only those its nodes use).

    Frontiers are measured only where they can decide. For a gang with nothing bound and no
    strict order, first only those of the zones that may hold it alone (``may``, the caller's
    answer when it keeps frontiers, else :func:`mixedfrontier.may_hold`): when one does, rule 1
    takes the best fit of those — the first in rule 1's order that holds it, so the zones after
    it are never measured — and no other zone could hold it alone. Then none at all when
    the zones together fail :func:`mixedfrontier.may_hold`. (MPIJob gangs waiting in a full
    cluster: ``bench/placement.py --launchers 1.0 --seed 3``, its first 120 steps of ``sky``,
    19.5 s -> 14.3 s.)"""
    kinds, need = gang.kinds, tuple(k.count for k in gang.kinds)
    measured: dict[ZoneId, Frontier] = {}

    def front(zid: ZoneId) -> Frontier:
        if zid not in measured:
            measured[zid] = measure(zid) if measure is not None else frontier_of(members[zid], kinds)
        return measured[zid]

    def may_alone(zid: ZoneId) -> bool:
        return may(zid) if may is not None else may_hold(members[zid], kinds)

    if not home and not gang.strict:  # rule 1's best fit is the first in its order that holds it
        alone = next((z for z in sorted(offers, key=single_zone_key) if may_alone(z.id) and need in front(z.id)), None)
        if alone is not None:
            return [alone]
    if not may_hold(itertools.chain(home, *(members[z.id] for z in offers)), kinds):
        return None
    start = frontier_of(home, kinds) if home else ()

    def choose(zs: Sequence[ZoneOffer]) -> list[ZoneOffer] | None:
        in_order = (
            (lambda chosen: next_fit(_nodes_of(home, members, chosen), kinds, gang.order, gang.fences))
            if gang.strict
            else None
        )
        return choose_zones_kept([(z, front(z.id)) for z in zs], need, start, in_order)

    chosen = choose(offers)
    if chosen is not None and len(chosen) > 1 and by_tier is not None:
        chosen = by_tier(offers, choose, lambda zs: choose(zs) is not None)
    return chosen


def place_mixed(
    gang: MixedGang,
    chosen: Sequence[ZoneOffer],
    members: Mapping[ZoneId, Sequence[MixedNode]],
    home: Sequence[MixedNode],
) -> tuple[list[ZoneOffer], list[str]] | None:
    """Rules 3–4 on the zones ``chosen`` by :func:`zones_mixed` and ``home``: the zones the gang's
    nodes use (every one chosen, but past the search limit only those), and each quota's node;
    None when they do not hold it."""
    placed = nodes_and_ranks(gang, _nodes_of(home, members, chosen))
    if placed is None:
        return None
    used = set(placed)
    return [z for z in chosen if any(n.name in used for n in members[z.id])], placed


def _nodes_of(
    home: Sequence[MixedNode], members: Mapping[ZoneId, Sequence[MixedNode]], zones: Sequence[ZoneOffer]
) -> list[MixedNode]:
    return sorted([*home, *(n for z in zones for n in members[z.id])], key=lambda n: (n.index, n.name))


def nodes_and_ranks(gang: MixedGang, nodes: Sequence[MixedNode], *, run: bool = False) -> list[str] | None:
    """Rules 3–4 on ``nodes`` (index order), which hold the gang: which of them it takes, and the
    node of each quota (None: they do not hold it). ``run``: ``nodes`` are a continuity run, which
    the gang takes whole by default (its nodes stay consecutive: a shortest run has no node it
    can skip without a gap), ranks sharing in turn where they must."""
    kinds, order, fences = gang.kinds, gang.order, gang.fences
    share = gang.pack or (not run and must_share(nodes, kinds, order, gang.held))
    if gang.domains and not run and (gang.pack or not share):
        nodes = in_fewest_domains(
            nodes, kinds, order, gang.domains, held=gang.held, fences=fences, pack=gang.pack, head=gang.head
        )
    if share:
        nodes = packed(nodes, kinds, order, head=gang.head, fences=fences, held=gang.held)
    else:
        nodes = preferred(nodes, kinds, order, fences, gang.held)
    home = {n.zone for n in nodes if n.name in gang.held}
    return place(nodes, kinds, order, pack=share, fences=fences, home=home)


def must_share(nodes: Sequence[MixedNode], kinds: Sequence[Kind], order: Sequence[int], held: Collection[str]) -> bool:
    """Rule 3: whether the gang's ranks must share a node — ``nodes`` count fewer nodes with room
    for some quota of it, free of the gang (not in ``held``: its bound siblings'), than quotas.
    Then they share as ``pack_workers`` packs (:func:`packed`: the siblings' nodes first, then the
    fewest nodes that hold the gang, best fit; each quota on the previous one's node first), as a
    gang of one size does (``nodechoice.choose_ranked``), not over every node."""
    free = 0
    for n in nodes:
        if n.name not in held and takes_some(n, kinds):
            free += 1
            if free >= len(order):
                return False
    return True
