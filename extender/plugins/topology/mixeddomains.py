"""Rule 3's NVLink tier for a gang whose quotas differ in size (``mixedplan.nodes_and_ranks``), as
:func:`gangplan.domain_parts` is for a gang of one size. Pure functions: no session, no I/O.

Of the nodes of the gang's chosen zones, it takes those of the fewest NVLink domains that hold it
(a node naming none is a domain of its own), and among sets of that many the best fit — rule 1
one tier down (:func:`mixedfrontier.choose_zones_kept`: one domain by the least room, then fewer
nodes, lower first index; several by the least room taken) — in the rank order all the nodes
allow (:func:`mixedorder.order_kept`). The domains of its bound siblings come first: they cost no
domain more, and only what they cannot hold goes to further domains. A domain's room is its slots
for the gang's largest kind with ``pack_workers`` (ranks packed NVLink first); by default its
nodes free of the gang with room for some quota of it, and a set of domains holds the gang only
when those nodes take it one quota a node (distinct nodes first: a domain never makes ranks share
a node, nor a quota join a bound sibling's node; in the order kept, as
:func:`rankorder.assign_in_domains` keeps it for a gang of one size). Domains do not choose when
every node is a domain of its own and none of the siblings' names one, nor when no set holds the
gang so (by default: its ranks must share a node anyway).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from extender.plugins.topology.gangplan import ZoneOffer, domain_unit
from extender.plugins.topology.mixedfrontier import (
    Counts,
    Frontier,
    choose_zones_kept,
    combined,
    node_frontier,
    takes_some,
)
from extender.plugins.topology.mixedorder import (
    Fences,
    Kind,
    MixedNode,
    fits_apart,
    next_fit,
    order_kept,
    room_for,
    takes,
)

__all__ = ["in_fewest_domains"]


def in_fewest_domains(
    nodes: Sequence[MixedNode],
    kinds: Sequence[Kind],
    order: Sequence[int],
    domains: Mapping[str, str],
    *,
    held: Collection[str] = (),
    fences: Fences = (),
    pack: bool = False,
    head: int = 0,
) -> Sequence[MixedNode]:
    """The nodes of ``nodes`` (index order; they hold the gang of ``kinds`` in task order
    ``order``) in the fewest NVLink domains that hold it, as the module says (``domains``: node →
    its domain; ``held``: its bound siblings' nodes; ``fences``: each quota's range between them;
    ``head``: the gang's largest kind); ``nodes`` itself when domains do not choose."""
    units: dict[str, list[MixedNode]] = {}
    for n in nodes:
        units.setdefault(domain_unit(n.name, domains), []).append(n)
    home = {domain_unit(n, domains) for n in held} & units.keys()
    if len(units) <= 1 or (len(units) == len(nodes) and not any(domains.get(n) in units for n in held)):
        return nodes
    need: Counts = tuple(k.count for k in kinds)
    kept = order_kept(nodes, kinds, order, fences)
    free = {n.name for n in nodes if n.name not in held and takes_some(n, kinds)}

    def front(n: MixedNode) -> Frontier:
        if pack:
            return node_frontier(n, kinds)
        return _one_a_node(n, kinds) if n.name in free else (tuple(0 for _ in kinds),)

    def room(ns: Sequence[MixedNode]) -> int:
        if pack:
            return sum(room_for(kinds[head].request, n.room) for n in ns if n.eligible[head])
        return sum(1 for n in ns if n.name in free)

    offers = [
        (ZoneOffer(("", u), len(ns), room(ns), False, ns[0].index), combined(map(front, ns), need))
        for u, ns in units.items()
        if u not in home
    ]
    base = [n for u in sorted(home) for n in units[u]]

    def in_order(chosen: Sequence[ZoneOffer]) -> bool:
        taken = {z.id[1] for z in chosen} | home
        ns = [n for n in nodes if domain_unit(n.name, domains) in taken]
        if pack:
            return kept is not None and next_fit(ns, kinds, order, kept)
        return kept is not None and fits_apart([n for n in ns if n.name in free], kinds, order, kept)

    start = combined(map(front, base), need) if base else ()
    chosen = choose_zones_kept(offers, need, start, in_order if kept is not None else None)
    if chosen is None:
        return nodes
    keep = home | {z.id[1] for z in chosen}
    return [n for n in nodes if domain_unit(n.name, domains) in keep]


def _one_a_node(node: MixedNode, kinds: Sequence[Kind]) -> Frontier:
    """What ``node`` holds of the gang one quota a node: one of any kind it takes."""
    return tuple(tuple(int(u == t) for u in range(len(kinds))) for t in range(len(kinds)) if takes(node, kinds, t)) or (
        tuple(0 for _ in kinds),
    )
