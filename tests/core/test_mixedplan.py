"""The pure rules of ``extender/plugins/topology/mixedplan.py`` against the brute-force packer of
``test_mixed_gang_property`` (no session: random rooms, requests and predicates):

* a set of nodes holds the gang by its frontier iff some placement exists; a node takes some
  quota of it (``takes_some``) iff one quota of some kind can be placed on it alone; nodes that
  hold it pass ``may_hold`` (a necessary condition);
* ``next_fit`` says yes iff some placement in rank order exists (its exactness claim);
* ``place`` answers a valid placement whenever one exists: each node's quotas fit its room and
  pass its predicates, ranks ascend whenever an ordered placement exists, and always within a kind;
* with fences (each quota's node-index range between its bound siblings): ``next_fit`` says yes
  iff some placement in rank order inside them exists, and ``place`` then keeps inside them;
  ``order_kept`` keeps the fences then, else open ones while plain rank order is possible, and
  answers the same when it may try one quota a node first;
* ``packed`` (``pack_workers``) takes the fewest nodes that hold the gang (in rank order when all
  nodes do), and among those the least room for the gang's largest kind, counted plainly here too;
* ``preferred`` (bisecting over how many best-scored nodes it takes) takes what trying each number
  in turn takes;
* ``combined``, which skips a frontier once it added nothing, is the plain sum over every node
  (nodes drawn from a few rooms, so that frontiers repeat, as a zone's full and empty nodes do).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from hypothesis import given
from hypothesis import strategies as st

from extender.plugins.topology.gangplan import Range
from extender.plugins.topology.mixedfrontier import Frontier, combine, frontier_of, may_hold, node_frontier, takes_some
from extender.plugins.topology.mixedorder import OPEN, AloneMemo, fits_apart, order_kept, place_ordered
from extender.plugins.topology.mixedplan import Kind, MixedNode, holds_apart, next_fit, packed, place, preferred
from tests.core.mixed_oracle import packs
from tests.core.props import PROPERTY
from tests.core.topo_cluster import NODE_ROOM, Need


@dataclass
class Case:
    kinds: list[Kind]
    order: list[int]  # kind of each quota, task order
    nodes: list[MixedNode]
    pack: bool


@st.composite
def cases(draw: st.DrawFn) -> Case:
    requests = draw(
        st.lists(
            st.fixed_dictionaries(
                {"gpu": st.sampled_from([0, 1, 2, 4, 8]), "hca": st.just(1), "cpu": st.sampled_from([1, 8, 32, 48])}
            ),
            min_size=1,
            max_size=3,
            unique_by=lambda r: (r["gpu"], r["cpu"]),
        )
    )
    order = draw(st.lists(st.integers(0, len(requests) - 1), min_size=1, max_size=6))
    used = sorted(set(order))
    order = [used.index(t) for t in order]  # every kind has a quota
    kinds = [Kind(requests[t], order.count(i)) for i, t in enumerate(used)]
    nodes = []
    for i in range(draw(st.integers(1, 5))):
        room = {k: draw(st.integers(0, cap)) for k, cap in NODE_ROOM.items()}
        eligible = tuple(draw(st.integers(0, 5)) > 0 for _ in kinds)
        nodes.append(MixedNode(f"n{i}", i, ("A100", "s1"), room, eligible))
    return Case(kinds, order, nodes, draw(st.booleans()))


def brute(c: Case, *, ordered: bool, fences: list[Range] | None = None) -> bool:
    """Whether some placement exists (``ordered``: with node indices that never descend; ``fences``:
    each quota inside its node-index range), each quota on a node whose predicates take its kind:
    plain depth-first search."""
    return _brute(c, [dict(n.room) for n in c.nodes], 0, 0, ordered=ordered, fences=fences)


def _inside(index: int, fence: Range) -> bool:
    lo, hi = fence
    return (lo is None or index >= lo) and (hi is None or index <= hi)


def _brute(c: Case, left: list[Need], i: int, lo: int, *, ordered: bool, fences: list[Range] | None) -> bool:
    if i == len(c.order):
        return True
    t = c.order[i]
    request = c.kinds[t].request
    for j in range(lo if ordered else 0, len(c.nodes)):
        if fences and not _inside(c.nodes[j].index, fences[i]):
            continue
        if c.nodes[j].eligible[t] and all(left[j].get(k, 0) >= v for k, v in request.items()):
            for k, v in request.items():
                left[j][k] -= v
            if _brute(c, left, i + 1, j, ordered=ordered, fences=fences):
                return True
            for k, v in request.items():
                left[j][k] += v
    return False


@PROPERTY
@given(cases())
def test_frontiers_next_fit_and_place_agree_with_brute_force(c: Case) -> None:
    need = tuple(k.count for k in c.kinds)
    anywhere = brute(c, ordered=False)
    in_order = brute(c, ordered=True)
    assert (need in frontier_of(c.nodes, c.kinds)) == anywhere
    assert may_hold(c.nodes, c.kinds) or not anywhere, "may_hold refused nodes that hold the gang"
    for n in c.nodes:  # takes_some: the node alone takes one quota of some kind
        assert takes_some(n, c.kinds) == any(
            brute(replace(c, order=[t], nodes=[n]), ordered=False) for t in range(len(c.kinds))
        )
    assert next_fit(c.nodes, c.kinds, c.order) == in_order
    placed = place(c.nodes, c.kinds, c.order, pack=c.pack)
    assert (placed is not None) == anywhere
    if placed is None:
        return
    by_name = {n.name: n for n in c.nodes}
    held: dict[str, dict[str, int]] = {n.name: {} for n in c.nodes}
    for name, t in zip(placed, c.order, strict=True):
        assert by_name[name].eligible[t], f"kind {t} on {name}, which refuses it"
        for k, v in c.kinds[t].request.items():
            held[name][k] = held[name].get(k, 0) + v
    for name, h in held.items():
        assert all(v <= by_name[name].room.get(k, 0) for k, v in h.items()), f"{name} over its room: {h}"
    indices = [by_name[n].index for n in placed]
    if in_order:
        assert indices == sorted(indices), f"rank order broken while it was possible: {indices}"
    for t in range(len(c.kinds)):
        same = [i for i, k in zip(indices, c.order, strict=True) if k == t]
        assert same == sorted(same), f"kind {t} out of order: {indices}"


@PROPERTY
@given(cases(), st.data())
def test_combined_skipping_absorbed_frontiers_is_the_plain_sum(c: Case, data: st.DataObject) -> None:
    """What a zone holds (``frontier_of``) is the plain capped sum of every node's frontier, node
    by node, with no frontier skipped and no early end: as a set of maximal vectors, the same."""
    pool = c.nodes[: data.draw(st.integers(1, 3))]
    nodes = [
        replace(data.draw(st.sampled_from(pool)), name=f"m{i}", index=i) for i in range(data.draw(st.integers(1, 9)))
    ]
    need = tuple(k.count for k in c.kinds)
    plain: Frontier = (tuple(0 for _ in need),)
    for n in nodes:
        plain = combine(plain, node_frontier(n, c.kinds), need)
    assert set(frontier_of(nodes, c.kinds)) == set(plain)


bounds = st.one_of(st.none(), st.integers(0, 4))


@PROPERTY
@given(cases(), st.data())
def test_next_fit_and_place_keep_inside_the_fences_whenever_that_is_possible(c: Case, data: st.DataObject) -> None:
    fences: list[Range] = [data.draw(st.tuples(bounds, bounds)) for _ in c.order]
    inside = brute(c, ordered=True, fences=fences)
    assert next_fit(c.nodes, c.kinds, c.order, fences) == inside
    kept = order_kept(c.nodes, c.kinds, c.order, fences)  # the fences, open ones or none
    assert kept == (fences if inside else [OPEN] * len(c.order) if brute(c, ordered=True) else None)
    assert order_kept(c.nodes, c.kinds, c.order, fences, AloneMemo(c.nodes, c.kinds)) == kept
    placed = place(c.nodes, c.kinds, c.order, pack=c.pack, fences=fences)
    assert (placed is not None) == brute(c, ordered=False)
    if inside:
        assert placed is not None
        by_name = {n.name: n for n in c.nodes}
        indices = [by_name[n].index for n in placed]
        assert indices == sorted(indices), f"rank order broken while it was possible: {indices}"
        assert all(_inside(i, f) for i, f in zip(indices, fences, strict=True)), f"{indices} outside {fences}"


def test_packs_agrees_on_a_plain_case() -> None:
    """The brute force of the cluster property and this one's agree where both apply."""
    rooms = [{"gpu": 8, "hca": 8, "cpu": 96}, {"gpu": 8, "hca": 8, "cpu": 96}, {"gpu": 1, "hca": 8, "cpu": 96}]
    needs = [{"gpu": 1, "hca": 1, "cpu": 2}, {"gpu": 8, "hca": 1, "cpu": 8}, {"gpu": 8, "hca": 1, "cpu": 8}]
    assert packs(needs, rooms, ordered=False)
    assert not packs(needs, rooms, ordered=True)


def gang_slots(c: Case, node: MixedNode) -> int:
    """The most of the gang's quotas ``node`` holds on its own: every count vector, plainly."""
    best = 0
    for counts in itertools.product(*(range(k.count + 1) for k in c.kinds)):
        if any(n and not node.eligible[t] for t, n in enumerate(counts)):
            continue
        total: dict[str, int] = {}
        for kind, n in zip(c.kinds, counts, strict=True):
            for r, v in kind.request.items():
                total[r] = total.get(r, 0) + v * n
        if all(v <= node.room.get(r, 0) for r, v in total.items()):
            best = max(best, sum(counts))
    return best


def head_of(c: Case) -> int:
    """The kind of the gang's largest quota: the most GPUs, then the most CPUs."""
    return max(range(len(c.kinds)), key=lambda t: (c.kinds[t].request["gpu"], c.kinds[t].request["cpu"]))


def room_for_head(c: Case, node: MixedNode) -> int:
    """How many quotas of the head kind ``node`` takes: one more at a time, plainly."""
    t = head_of(c)
    if not node.eligible[t]:
        return 0
    n = 0
    while all(v == 0 or (n + 1) * v <= node.room.get(r, 0) for r, v in c.kinds[t].request.items()):
        n += 1
        if n > 1000:  # a request of nothing
            return 0
    return n


def brute_pack(c: Case) -> tuple[int, int]:
    """(fewest nodes, least room for the head kind among sets of that many) over every set of
    nodes that holds the gang (in rank order when all nodes do)."""
    ordered = brute(c, ordered=True)
    for k in range(1, len(c.nodes) + 1):
        costs = [
            sum(room_for_head(c, n) for n in subset)
            for subset in itertools.combinations(c.nodes, k)
            if brute(replace(c, nodes=list(subset)), ordered=ordered)
        ]
        if costs:
            return k, min(costs)
    raise AssertionError("called only for gangs the nodes hold")


@PROPERTY
@given(cases())
def test_packed_takes_the_fewest_nodes_then_the_least_capacity(c: Case) -> None:
    if not brute(c, ordered=False):
        return
    ordered = brute(c, ordered=True)
    fewest, least = brute_pack(c)
    chosen = packed(c.nodes, c.kinds, c.order, head=head_of(c))
    assert brute(replace(c, nodes=chosen), ordered=ordered), "the chosen nodes do not hold the gang"
    assert len(chosen) == fewest
    assert sum(room_for_head(c, n) for n in chosen) == least
    placed = place(chosen, c.kinds, c.order, pack=True)
    assert placed is not None and set(placed) == {n.name for n in chosen}
    greedy = packed(c.nodes, c.kinds, c.order, head=head_of(c), limit=0)  # beyond the exact search's limit
    assert brute(replace(c, nodes=greedy), ordered=ordered), "the greedy's nodes do not hold the gang"
    for n in greedy:  # and it takes no node it could do without
        rest = [m for m in greedy if m is not n]
        assert not rest or not brute(replace(c, nodes=rest), ordered=ordered), f"{n.name} is not needed"


def _node(i: int, gpu: int) -> MixedNode:
    return MixedNode(f"n{i}", i, ("A100", "s1"), {"gpu": gpu, "hca": 8, "cpu": 96}, (True, True))


def test_a_packed_launcher_and_workers_take_the_two_whole_nodes_not_the_fragments() -> None:
    """A launcher (no GPU) and four 4-GPU workers on nodes with 4 / 4 / 8 / 8 GPUs free: the
    fewest nodes are the two whole ones. Quota by quota from the lowest index (the rule before)
    took n0, n1 and n2: three nodes where two do."""
    kinds = [Kind({"gpu": 0, "hca": 1, "cpu": 1}, 1), Kind({"gpu": 4, "hca": 1, "cpu": 8}, 4)]
    order = [0, 1, 1, 1, 1]
    nodes = [_node(0, 4), _node(1, 4), _node(2, 8), _node(3, 8)]
    for limit in (4096, 0):  # the exact search and the greedy beyond it agree here
        chosen = packed(nodes, kinds, order, head=1, limit=limit)
        assert [n.name for n in chosen] == ["n2", "n3"]
        assert place(chosen, kinds, order, pack=True) == ["n2", "n2", "n2", "n3", "n3"]


def test_beyond_its_limit_packed_drops_the_nodes_a_late_one_makes_needless() -> None:
    """Only n7 takes the launcher, and it holds the least of the gang, so the roomiest-first
    prefix reaches it last, after every other node. The launcher and three 8-GPU workers need
    n7 and two of the 16-GPU nodes; the greedy drops the rest."""
    kinds = [Kind({"gpu": 1, "hca": 1, "cpu": 1}, 1), Kind({"gpu": 8, "hca": 1, "cpu": 8}, 3)]
    order = [0, 1, 1, 1]
    nodes = [MixedNode(f"n{i}", i, ("A100", "s1"), {"gpu": 16, "hca": 8, "cpu": 96}, (False, True)) for i in range(7)]
    nodes.append(MixedNode("n7", 7, ("A100", "s1"), {"gpu": 1, "hca": 8, "cpu": 96}, (True, True)))
    chosen = packed(nodes, kinds, order, head=1, limit=0)
    assert len(chosen) == 3 and "n7" in {n.name for n in chosen}
    assert len(packed(nodes, kinds, order, head=1)) == 3  # the exact search agrees on the count


def test_packed_best_fit_keeps_the_roomiest_node_whole() -> None:
    """A 2-GPU master and two 4-GPU workers (10 GPUs) fit n0 (12 free) or n2 (10) alone, or n1 (4)
    + n3 (6); one node is fewer, and best fit takes n2 (room for two workers, not three), so the
    roomier n0 stays whole though its index is lower."""
    kinds = [Kind({"gpu": 2, "hca": 1, "cpu": 1}, 1), Kind({"gpu": 4, "hca": 1, "cpu": 8}, 2)]
    order = [0, 1, 1]
    nodes = [_node(0, 12), _node(1, 4), _node(2, 10), _node(3, 6)]
    for limit in (4096, 0):
        assert [n.name for n in packed(nodes, kinds, order, head=1, limit=limit)] == ["n2"]


def linear_preferred(c: Case, nodes: list[MixedNode], held: set[str]) -> list[MixedNode]:
    """``preferred`` as its rule reads, one length at a time: the shortest prefix of the nodes by
    (held last, best score, index) that holds the gang one quota a node, free of the gang; else
    the shortest that holds it at all (in the rank order all nodes allow); else every node."""
    kept = order_kept(nodes, c.kinds, c.order, ())
    ranked = sorted(nodes, key=lambda n: (n.name in held, -n.score, n.index, n.name))
    free = sum(1 for n in ranked if n.name not in held)
    need = tuple(k.count for k in c.kinds)
    for k in range(len(c.order), free + 1):
        subset = sorted(ranked[:k], key=lambda n: n.index)
        if holds_apart(subset, c.kinds, c.order) if kept is None else fits_apart(subset, c.kinds, c.order, kept):
            return subset
    for k in range(len(c.order), len(ranked)):
        subset = sorted(ranked[:k], key=lambda n: n.index)
        if next_fit(subset, c.kinds, c.order, kept) if kept is not None else need in frontier_of(subset, c.kinds):
            return subset
    return sorted(nodes, key=lambda n: n.index)


@PROPERTY
@given(cases(), st.data())
def test_preferred_finds_the_shortest_prefix_the_rule_asks_for(c: Case, data: st.DataObject) -> None:
    """``preferred`` bisects over the prefix length (the question is monotone in it): the same
    nodes as trying each length in turn."""
    nodes = [replace(n, score=float(data.draw(st.integers(0, 3)))) for n in c.nodes]
    held = {n.name for n in nodes if data.draw(st.booleans())}
    got = preferred(nodes, c.kinds, c.order, (), held)
    assert [n.name for n in got] == [n.name for n in linear_preferred(c, nodes, held)]


def literal_place_ordered(c: Case, fences: list[Range]) -> list[str] | None:
    """``place_ordered``'s rule 3 by default (not ``pack_workers``), as it reads: quotas in task
    order, each on the first node inside its fence after the previous quota's — a node after it
    first, then that node itself — from which some placement of the rest in rank order inside
    their fences exists (the brute force decides)."""
    if not brute(c, ordered=True, fences=fences):
        return None
    left = [dict(n.room) for n in c.nodes]
    out: list[str] = []
    at: int | None = None
    for i, t in enumerate(c.order):
        request = c.kinds[t].request
        tried = [*range(at + 1, len(c.nodes)), at] if at is not None else list(range(len(c.nodes)))
        for j in tried:
            node = c.nodes[j]
            if not (_inside(node.index, fences[i]) and node.eligible[t]):
                continue
            if not all(left[j].get(k, 0) >= v for k, v in request.items()):
                continue
            for k, v in request.items():
                left[j][k] -= v
            if _brute(c, [dict(r) for r in left], i + 1, j, ordered=True, fences=fences):  # it keeps what it takes
                out.append(node.name)
                at = j
                break
            for k, v in request.items():
                left[j][k] += v
        else:
            raise AssertionError("an ordered placement exists, yet no node took the quota")
    return out


@PROPERTY
@given(cases(), st.data())
def test_place_ordered_by_default_is_its_rule_as_it_reads(c: Case, data: st.DataObject) -> None:
    """``place_ordered`` takes ``place_apart``'s placement at once when the nodes hold the gang
    one quota a node (the rule's own choice then); either way it places as the rule reads."""
    fences: list[Range] = [data.draw(st.tuples(bounds, bounds)) for _ in c.order]
    assert place_ordered(c.nodes, c.kinds, c.order, fences, pack=False) == literal_place_ordered(c, fences)
