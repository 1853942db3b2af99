"""Rank order for a gang whose quotas differ in size (``mixedplan.py``): what a node offers such a
gang, and placements in which node indices never descend as task indices ascend. Pure functions:
no session, no I/O.

A quota's **fence** is its closed node-index range ``[lo, hi]`` between its gang's bound siblings
(``siblings.rank_ranges``: the seed's ``[preNode, lastNode]``; None: open). The rules:

1. **Whether** (:func:`next_fit`): the quotas fit the nodes in rank order, each inside its fence,
   iff each, in task order, fits on the node of the one before or else on the next node inside its
   fence where it fits; the greedy is exact.
2. **Which order to keep** (:func:`order_kept`): rank order inside the fences when the nodes
   allow it (the only order a strict-order gang commits in), else plain rank order among the
   gang's own quotas, else none (:func:`mixedplan.place` then places from the frontiers).
3. **Where** (:func:`place_ordered`): quotas in task order, each on the lowest-index node inside
   its fence after the previous quota's (with ``pack_workers``: the previous quota's node first)
   from which :func:`next_fit` still places the rest.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from extender.plugins.topology.gangplan import Range, ZoneId

__all__ = [
    "OPEN",
    "Alone",
    "AloneMemo",
    "Fences",
    "Kind",
    "MixedNode",
    "Room",
    "fits_apart",
    "fits_more",
    "next_fit",
    "order_kept",
    "place_apart",
    "place_ordered",
    "repelled",
    "room_for",
    "takes",
    "takes_alone",
]

Room = Mapping[str, int]
Fences = Sequence[Range]  # per quota in task order; empty: every quota open
OPEN: Range = (None, None)


@dataclass(frozen=True, slots=True)
class Kind:
    request: Room  # resource name → amount, as the quota ledger counts it
    count: int
    # the kinds (positions in the gang's kinds) that may not share a node with this one: quota
    # anti-affinity between the gang's own quotas (``gangparts.kinds_of``); symmetric. Its own
    # position when two of its quotas may not share a node (a merged kind: ``gangparts.coarsen``)
    apart: frozenset[int] = frozenset()


def repelled(kinds: Sequence[Kind], t: int, here: Collection[int]) -> bool:
    """Whether a quota of kind ``t`` may not join a node holding quotas of the kinds ``here``."""
    return bool(kinds[t].apart) and any(k in kinds[t].apart for k in here)


@dataclass(frozen=True, slots=True)
class MixedNode:
    """A node of a zone the gang may use: its room, and per kind whether its predicates allow it."""

    name: str
    index: int
    zone: ZoneId
    room: Room
    eligible: tuple[bool, ...]
    score: float = 0.0  # the QN score of the node for the gang's largest kind: higher is preferred


def room_for(request: Room, room: Room) -> int:
    """How many of ``request`` fit ``room`` (the ledger's rule; a request of nothing: 0)."""
    counts = [room.get(name, 0) // v for name, v in request.items() if v > 0]
    return max(0, min(counts)) if counts else 0


def fits(total: Mapping[str, int], room: Room) -> bool:
    """The ledger's rule: a requested name the node does not advertise fits none."""
    return all(v <= 0 or room.get(name, -1) >= v for name, v in total.items())


def fits_more(total: Mapping[str, int], request: Room, room: Room, times: int = 1) -> bool:
    """Whether ``times`` more of ``request`` fit ``room`` beside ``total``, which fits it:
    :func:`fits` of the sum, asked only of the names ``request`` asks for (no other can
    overflow), without making the sum."""
    return all(v <= 0 or room.get(name, -1) >= total.get(name, 0) + v * times for name, v in request.items())


def add(total: Mapping[str, int], request: Room, times: int) -> dict[str, int]:
    out = dict(total)
    for name, v in request.items():
        out[name] = out.get(name, 0) + v * times
    return out


def _within(index: int, fence: Range) -> bool:
    lo, hi = fence
    return (lo is None or index >= lo) and (hi is None or index <= hi)


def next_fit(nodes: Sequence[MixedNode], kinds: Sequence[Kind], order: Sequence[int], fences: Fences = ()) -> bool:
    """Rule 1: whether quotas of kinds ``order`` (task order) fit ``nodes`` (index order) with
    node indices that never descend, each inside its fence (``fences``; empty: open): each on the
    node of the one before if it fits there, else on the next node at or above its ``lo`` where it
    fits, and no placement exists when that node lies above its ``hi``. Exact: by induction on the
    quotas, no ordered placement puts a quota on a lower node than this one does (a block that
    fits a node still fits without its first quotas, and the node is inside the quota's fence)."""
    at, total, here = 0, dict[str, int](), set[int]()
    for i, t in enumerate(order):
        lo, hi = fences[i] if fences else OPEN
        while at < len(nodes):
            node = nodes[at]
            if (
                node.eligible[t]
                and fits_more(total, kinds[t].request, node.room)
                and (lo is None or node.index >= lo)
                and not repelled(kinds, t, here)
            ):
                total = add(total, kinds[t].request, 1)
                here.add(t)
                break
            at, total, here = at + 1, {}, set()
        if at == len(nodes) or (hi is not None and nodes[at].index > hi):
            return False
    return True


def takes(node: MixedNode, kinds: Sequence[Kind], t: int) -> bool:
    """Whether ``node`` takes a quota of kind ``t`` alone (its predicates allow it, its room holds it)."""
    return node.eligible[t] and kinds[t].count > 0 and fits(kinds[t].request, node.room)


def takes_alone(node: MixedNode, kinds: Sequence[Kind]) -> tuple[bool, ...]:
    """:func:`takes` of ``node`` for each kind."""
    return tuple(takes(node, kinds, t) for t in range(len(kinds)))


Alone = Mapping[str, Sequence[bool]]  # node name → takes_alone(node, kinds)


class AloneMemo(dict[str, tuple[bool, ...]]):
    """:func:`takes_alone` of each of ``nodes`` by name, worked out when first asked: a caller
    trying many subsets of a zone's nodes pays once a node, and nothing for nodes never tried."""

    def __init__(self, nodes: Sequence[MixedNode], kinds: Sequence[Kind]) -> None:
        super().__init__()
        self._nodes = {n.name: n for n in nodes}
        self._kinds = kinds

    def __missing__(self, name: str) -> tuple[bool, ...]:
        got = self[name] = takes_alone(self._nodes[name], self._kinds)
        return got


def place_apart(
    nodes: Sequence[MixedNode],
    kinds: Sequence[Kind],
    order: Sequence[int],
    fences: Fences = (),
    alone: Alone | None = None,
) -> list[str] | None:
    """:func:`next_fit` one quota a node (distinct nodes): the node of each quota, in task order,
    the first node after the previous quota's, at or above its ``lo``, that takes it alone; None
    when that node lies above its ``hi`` (no placement one quota a node exists). Exact, as
    :func:`next_fit` (no placement one a node puts a quota on a lower node than this one does).
    ``alone``: :func:`takes_alone` of the nodes, when a caller asks of many subsets of them."""
    at, out = 0, []
    for i, t in enumerate(order):
        lo, hi = fences[i] if fences else OPEN
        while at < len(nodes):
            node = nodes[at]
            ok = alone[node.name][t] if alone is not None else takes(node, kinds, t)
            if ok and (lo is None or node.index >= lo):
                break
            at += 1
        if at == len(nodes) or (hi is not None and nodes[at].index > hi):
            return None
        out.append(nodes[at].name)
        at += 1
    return out


def fits_apart(
    nodes: Sequence[MixedNode],
    kinds: Sequence[Kind],
    order: Sequence[int],
    fences: Fences = (),
    alone: Alone | None = None,
) -> bool:
    """Whether ``nodes`` hold the quotas one a node in rank order (:func:`place_apart`)."""
    return place_apart(nodes, kinds, order, fences, alone) is not None


def order_kept(
    nodes: Sequence[MixedNode],
    kinds: Sequence[Kind],
    order: Sequence[int],
    fences: Fences,
    alone: Alone | None = None,
) -> Fences | None:
    """Rule 2: the fences a placement on ``nodes`` keeps — ``fences`` if the nodes hold the gang
    in rank order inside them, else open ones if in plain rank order; None: in no order.
    ``alone``: :func:`takes_alone` of the nodes, kept by a caller who asks it again; then a
    placement one quota a node (:func:`place_apart`, which reads only that) answers first, for
    it is a placement in rank order (``bench/cycle_instructions.py --launchers --nodes 5000
    --leaves 40 --jobs 2000``: 23.31 G -> 22.24 G instructions a cycle)."""
    opened = [OPEN] * len(order)
    for kept in (fences, opened) if any(f != OPEN for f in fences) else (opened,):
        if alone is not None and fits_apart(nodes, kinds, order, kept, alone):
            return kept
        if next_fit(nodes, kinds, order, kept):
            return kept
    return None


def place_ordered(
    nodes: Sequence[MixedNode],
    kinds: Sequence[Kind],
    order: Sequence[int],
    fences: Fences,
    *,
    pack: bool,
    home: Collection[ZoneId] = (),
) -> list[str] | None:
    """Rule 3: the node of each quota (kinds ``order``, task order) on ``nodes`` (index order),
    each inside its fence, after the previous quota's (``pack``: that one first) and such that
    :func:`next_fit` still places the rest; None when no such placement exists. Packed, a node of
    the bound siblings' zones (``home``) comes before one outside them: the fewest quotas outside
    the siblings' zones, as for a gang of one size (ranks 1, 2, 2, 4 GPUs, rank 2 bound on n3 with
    6 GPUs left, n0 empty in another leaf: n0, n3, n3, n3, not n0, n0, n3, n3). Beyond their
    zones, unlike ``rankorder.assign_in_order``, no preference for the siblings' own nodes: packed, ``nodes``
    are :func:`mixedplan.packed`'s — its siblings' nodes first (they cost no node more; rank 0
    before a rank 1 bound on n1 goes beside it, not onto a new n0), only those when they hold the
    rest, and no node it can do without (``tests/core/test_mixed_pack_siblings.py``).

    By default (not ``pack``), when the nodes hold the quotas one a node, this rule gives
    :func:`place_apart`'s placement, which is taken at once: each quota's first candidate that
    takes it alone is the node :func:`place_apart` gives it, and the rest still follow apart from
    there (``bench/binder_cycle.py --launchers``, 5,000 nodes, 2,000 MPIJobs: cycle 3.31 s -> 2.70 s
    with :class:`AloneMemo` in ``mixedplan.preferred``)."""
    fences = fences or [OPEN] * len(order)
    if not pack and (apart := place_apart(nodes, kinds, order, fences)) is not None:
        return apart
    if not next_fit(nodes, kinds, order, fences):
        return None
    out: list[str] = []
    at, used, on = 0, dict[str, int](), set[int]()  # the previous quota's node: what it holds, of which kinds
    for i, t in enumerate(order):
        here = [at] if out else []
        tail = list(range(at + 1 if out else 0, len(nodes)))
        cands = (here + tail) if pack else (tail + here)
        if pack and home:
            cands.sort(key=lambda c: nodes[c].zone not in home)  # stable: previous node, then index
        for cand in cands:
            node = nodes[cand]
            same = cand == at and bool(out)
            before = used if same else {}
            kinds_on = {*on, t} if same else {t}
            if not (
                _within(node.index, fences[i]) and node.eligible[t] and fits_more(before, kinds[t].request, node.room)
            ):
                continue
            total = add(before, kinds[t].request, 1)
            if same and repelled(kinds, t, on):
                continue
            # what is left of the node for the rest: its room less this, and no kind these repel
            left = tuple(e and not repelled(kinds, k, kinds_on) for k, e in enumerate(node.eligible))
            rest_room = MixedNode(node.name, node.index, node.zone, _less(node.room, total), left)
            if next_fit([rest_room, *nodes[cand + 1 :]], kinds, order[i + 1 :], fences[i + 1 :]):
                at, used, on = cand, total, kinds_on
                out.append(node.name)
                break
        else:  # unreachable: next_fit's own choice is among the candidates
            return None
    return out


def _less(room: Room, used: Mapping[str, int]) -> dict[str, int]:
    return {name: v - used.get(name, 0) for name, v in room.items()}
