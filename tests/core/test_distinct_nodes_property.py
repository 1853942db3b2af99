"""The default's "distinct nodes while the chosen zone has enough of them" (issue 16 item 2) held
across a gang's chosen zones and around its bound siblings, against an exhaustive oracle; and
``pack_workers`` counting the siblings' nodes as already taken.

Across zones, ``test_topology_property`` checks it for every gang without siblings: while its
chosen zones together have a free node per quota, no two share one (the example below).

A gang some of whose quotas are bound (a worker re-created after a node failure, a released
quota) is placed around them: locality first (its siblings' zones before any other), then rank
order (kept whenever it costs no zone more), then distinct nodes — and a node that holds a
sibling is not a distinct one. One gang with bound siblings in the clusters of
``test_topology_property``, one cycle of the default policy, every check of that property, and:

* placed out of rank order (a loose gang whose zones allow no order), each zone's new quotas sit
  on distinct nodes that hold no sibling whenever that zone has enough such nodes with room;
* placed in rank order (each new quota inside the node-index range its siblings leave it, none
  below the one before) within its one siblings' zone, its new quotas sit on distinct nodes that
  hold no sibling whenever some placement in rank order there does so (exhaustive search).
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from tests.core.props import PROPERTY
from tests.core.scenarios import policy_with_topology, quota_node
from tests.core.topo_cluster import NodeSpec
from tests.core.topo_gangs import Cluster, Gang, clusters, draw_bound, room, run

PACKED = policy_with_topology({"pack_workers": True})


def node(i: int, leaf: int = 1, busy: int = 0) -> NodeSpec:
    return NodeSpec(f"n{i}", i, leaf, "A100", True, False, busy)


@st.composite
def partly_bound(draw: st.DrawFn) -> Cluster:
    """A cluster of ``test_topology_property`` with one gang of ≥ 2 workers, some of them bound."""
    c = draw(clusters(max_gangs=1))
    g = c.gangs[0]
    if g.workers == 1:
        g.workers = 2
    if g.min_member > g.workers:
        g.min_member = 0
    if not g.bound:
        draw_bound(draw, g, c.nodes, {n.name: n.busy for n in c.nodes})
    return c


def fences(c: Cluster) -> dict[int, tuple[int, int]]:
    """Each unbound task index of the gang → the closed node-index range its bound siblings leave
    it (the largest index bound below it in rank, the smallest above): the seed's
    ``[preNode, lastNode]``."""
    g = c.gangs[0]
    index = {n.name: n.index for n in c.nodes}
    out = {}
    for i in range(g.workers):
        if i not in g.bound:
            lo = max((index[n] for j, n in g.bound.items() if j < i), default=-1)
            hi = min((index[n] for j, n in g.bound.items() if j > i), default=len(c.nodes))
            out[i] = (lo, hi)
    return out


def distinct_in_order(new: list[int], ranges: dict[int, tuple[int, int]], nodes: list[tuple[int, str]]) -> bool:
    """Whether the quotas ``new`` (task order) fit ``nodes`` ((index, name), ascending), one per
    node, each inside its range and none below the one before it (exhaustive)."""

    def go(k: int, low: int, used: frozenset[str]) -> bool:
        if k == len(new):
            return True
        lo, hi = ranges[new[k]]
        return any(
            go(k + 1, index, used | {name}) for index, name in nodes if name not in used and max(low, lo) <= index <= hi
        )

    return go(0, -1, frozenset())


def check_distinct(c: Cluster, where: list[str]) -> None:
    """The module docstring's two checks for the one gang of ``c`` (``where``: its quotas' nodes)."""
    g = c.gangs[0]
    spec = {n.name: n for n in c.nodes}
    new = [i for i, n in enumerate(where) if n and i not in g.bound]
    if not g.bound or not new:
        return
    held = set(g.bound.values())
    slots = room(c, c.start(), g.gpu)
    model = spec[next(iter(held))].model
    fresh = [n for n in c.nodes if n.model == model and slots.get(n.name, 0) > 0 and n.name not in held]
    shared = [i for i in new if where[i] in held or sum(where[j] == where[i] for j in new) > 1]
    ranges = fences(c)
    at = [spec[where[i]].index for i in new]
    home = {spec[n].zone for n in held}
    if at != sorted(at) or any(not ranges[i][0] <= a <= ranges[i][1] for i, a in zip(new, at, strict=True)):
        for z in {spec[where[i]].zone for i in new}:
            mine = [i for i in new if spec[where[i]].zone == z]
            if len(mine) <= sum(1 for n in fresh if n.zone == z):
                assert not set(mine) & set(shared), f"{g.name} shares nodes in {z} while enough are free: {where}"
        return
    spans = {spec[n].zone for n in where if n}
    if spans != home or len(home) != 1:
        return
    nodes = sorted((n.index, n.name) for n in fresh if n.zone in home)
    if distinct_in_order(new, ranges, nodes):
        assert not shared, f"{g.name} shares nodes {where} while distinct free nodes in rank order exist"


def _ranks_share_anyway() -> Cluster:
    """Seven 4-GPU workers, rank 1 bound on n1; leaf 1 = n0–n2, leaf 2 = n3, n4, all empty. Four
    free nodes for six new ranks: they share anyway, so leaf 1 gives its whole room first, as
    ranks that must share take the siblings' nodes first, and one rank goes to leaf 2 (no rank
    order keeps to that: rank 6 goes back to n0). Counting free nodes first here sent two ranks
    to leaf 2, where an order exists that the order repair (greedy, blind to how many quotas it
    puts outside leaf 1) did not find: n0, n1, n2, n3, n4 and rank 6 on n0 again."""
    return Cluster([node(i, 1 + i // 3) for i in range(5)], [Gang("g0", 7, 4, False, bound={1: "n1"})])


@PROPERTY
@given(partly_bound())
@example(c=Cluster([node(0), node(1), node(2), node(3)], [Gang("g0", 4, 1, False, bound={0: "n0", 1: "n1", 2: "n2"})]))
@example(c=Cluster([node(i) for i in range(5)], [Gang("g0", 4, 1, False, bound={0: "n0", 2: "n2", 3: "n3"})]))
@example(c=Cluster([node(i) for i in range(6)], [Gang("g0", 4, 1, True, bound={0: "n0", 3: "n5"})]))
@example(c=_ranks_share_anyway())
def test_a_partly_bound_gang_takes_distinct_nodes_beside_its_siblings(c: Cluster) -> None:
    result = run(c, liveness=True)
    check_distinct(c, [quota_node(result.session, q) for q in c.gangs[0].quotas])


def test_a_re_created_last_worker_takes_the_free_node_not_its_siblings() -> None:
    """Ranks 0–2 of four 1-GPU workers are bound on n0–n2 (rank 3's node failed and was replaced
    by n3): rank 3 goes to n3, not beside rank 2 on n2."""
    c = Cluster([node(0), node(1), node(2), node(3)], [Gang("g0", 4, 1, False, bound={0: "n0", 1: "n1", 2: "n2"})])
    result = run(c, liveness=True)
    assert [quota_node(result.session, q) for q in c.gangs[0].quotas] == ["n0", "n1", "n2", "n3"]


def test_with_pack_workers_the_siblings_nodes_come_first() -> None:
    """Three 2-GPU workers, rank 0 bound on n0 (6 GPUs free: room for the other two); n1 has 4
    GPUs free. Packing best fit by room alone takes n1 (the tighter node) and spreads the gang over
    two nodes; the siblings' node costs no node more: all three on n0."""
    c = Cluster([node(0), node(1, busy=4)], [Gang("g0", 3, 2, False, bound={0: "n0"})])
    result = run(c, liveness=True, policy=PACKED, pack=True)
    assert [quota_node(result.session, q) for q in c.gangs[0].quotas] == ["n0", "n0", "n0"]


def test_a_gang_over_two_leaves_takes_distinct_nodes_while_they_have_enough() -> None:
    """Three 4-GPU workers; leaf 1: n0 empty (room for two), leaf 2: n1, n2 with 4 GPUs free each.
    No leaf holds three, both do, on three nodes: n0, n1, n2 — not n0 twice (leaf 1's room
    first) while n2 stays free."""
    c = _two_leaves_three_nodes()
    result = run(c, liveness=True)
    assert [quota_node(result.session, q) for q in c.gangs[0].quotas] == ["n0", "n1", "n2"]


def _two_leaves_three_nodes() -> Cluster:
    return Cluster([node(0, 1), node(1, 2, busy=4), node(2, 2, busy=4)], [Gang("g0", 3, 4, False)])


def _order_short_of_the_siblings_leaf() -> Cluster:
    """Six 4-GPU workers, ranks 0 and 1 bound on n1 (full); leaf 1 has room on n0 (one, below the
    siblings) and n3 (two), leaf 2 on n5 and n7 (two each). Placing the other four on distinct
    nodes (n3, n5, n7, n0) breaks rank order and keeps no more of the gang in leaf 1 than the
    order does (two outside either way): order comes before distinct nodes."""
    nodes = [node(0, 1, busy=4), node(1, 1), node(3, 1), node(5, 2), node(7, 2)]
    return Cluster(nodes, [Gang("g0", 6, 4, False, bound={0: "n1", 1: "n1"})])


@PROPERTY
@given(clusters())
@example(c=_two_leaves_three_nodes())
@example(c=_order_short_of_the_siblings_leaf())
def test_gangs_share_nodes_only_when_their_zones_run_out(c: Cluster) -> None:
    run(c, liveness=True)
