"""``pack_workers`` in rank order against an exhaustive oracle (issue 16 items 1 and 2): a gang of
one size whose bound siblings sit in rank order takes, in rank order, as few nodes as any
placement in rank order can.

Small clusters (2–8 nodes in 1–3 leaves, some nodes naming NVLink domains, random load), one gang
of 2–6 workers with some quotas bound in an earlier cycle in rank order (strict order or not,
sometimes held hard to one NVLink domain), one cycle of the default policy with ``pack_workers``.
The zones and NVLink domains the planner chose are judged by the other properties; inside them,
every placement the rules allow is tried: each unbound quota on a usable node of the gang's GPU
model with room, task *i* on a node index ≥ that of task *i−1* (the bound siblings included).
The gang's quotas outside its siblings' zones must be the fewest of those placements (rule 2:
they fill their siblings' zones first), and then its distinct nodes, its siblings' among them
(they cost no node more), the fewest of those that put no more there.

Before, two rules took a node more than needed:

* a gang whose best-fit nodes broke rank order was placed in order greedily, each quota on the
  lowest-index node after the previous one: 4 workers × 4 GPU, task 2 bound on n3; n0 has room
  for one, n1 and n4 for two each. Tasks 0 and 1 took n0 and n1, task 3 n4: four nodes where n1,
  n3, n4 do;
* the siblings' zones took their shares one zone at a time, the roomiest first: 4 workers × 2
  GPU, task 0 bound on n0 (room for one more) in leaf 1 beside an empty n1, task 3 on n2 (room for
  three) in leaf 2. Leaf 1 took tasks 1 and 2, on n0 and a new n1, where n2 holds both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from tests.core.props import PROPERTY
from tests.core.scenarios import policy_with_topology, quota_node
from tests.core.topo_cluster import NodeSpec, held_to_nvlink
from tests.core.topo_gangs import Cluster, Gang, draw_bound, room, run

PACKED = policy_with_topology({"pack_workers": True})


@dataclass
class HardCluster(Cluster):
    """A cluster whose gangs may be held hard to one NVLink domain (``hard``)."""

    hard: bool = False

    def objects(self) -> list[dict[str, Any]]:
        objs = super().objects()
        return held_to_nvlink(objs) if self.hard else objs


@st.composite
def clusters(draw: st.DrawFn) -> HardCluster:
    """2–8 nodes in 1–3 leaves, each maybe in a named NVLink domain of its leaf; one gang, its
    bound siblings (if any) in rank order, held hard to one domain only in strict order."""
    count, leaves = draw(st.integers(2, 8)), draw(st.integers(1, 3))
    named = draw(st.booleans())
    nodes = []
    for i in range(count):
        leaf = 1 + i * leaves // count
        domain = draw(st.sampled_from(["", "a", "b"])) if named else ""
        busy = draw(st.sampled_from([0, 0, 2, 4, 6, 7, 8]))
        ready = draw(st.integers(0, 9)) > 0
        nodes.append(NodeSpec(f"n{i}", i, leaf, "A100", ready, False, busy, domain=f"{leaf}{domain}" * bool(domain)))
    hard = named and draw(st.integers(0, 3)) == 0  # strict then: run's order check knows no NVLink limit
    gang = Gang("g0", draw(st.integers(2, 6)), draw(st.sampled_from([1, 2, 4])), hard or draw(st.booleans()))
    if draw(st.integers(0, 3)) > 0:
        draw_bound(draw, gang, nodes, {n.name: n.busy for n in nodes})
        index = {n.name: n.index for n in nodes}  # in rank order, strict or not
        gang.bound = dict(zip(sorted(gang.bound), sorted(gang.bound.values(), key=index.__getitem__), strict=True))
    return HardCluster(nodes, [gang], hard=hard)


def unit(n: NodeSpec) -> str:
    """The NVLink domain ``n`` counts in: its own, a domain of one node, when it names none."""
    return n.domain or f"node#{n.name}"


def fewest_in_order(c: Cluster, where: list[str]) -> tuple[int, int]:
    """The least (quotas outside its siblings' zones, distinct nodes — its bound siblings'
    included) of any placement of the gang's quotas bound now in rank order, inside the zones
    and NVLink domains of its placement ``where`` (task order) — exhaustive."""
    g = c.gangs[0]
    spec = {n.name: n for n in c.nodes}
    placed = [spec[n] for n in where]
    zones, units = {n.zone for n in placed}, {unit(n) for n in placed}
    named = any(n.domain for n in c.nodes)
    home = {spec[n].zone for n in g.bound.values()}
    slots = {
        n: k
        for n, k in room(c, c.start(), g.gpu).items()
        if k and spec[n].model == placed[0].model and spec[n].zone in zones and (not named or unit(spec[n]) in units)
    }
    best = (g.workers + 1, len(spec) + 1)

    def go(task: int, low: int, taken: frozenset[str], away: int) -> None:
        nonlocal best
        if (away, len(taken)) >= best:
            return
        if task == g.workers:
            best = (away, len(taken))
            return
        if task in g.bound:
            index = spec[g.bound[task]].index
            if index >= low:
                go(task + 1, index, taken, away)
            return
        for n, k in slots.items():
            if k and spec[n].index >= low:
                slots[n] -= 1
                go(task + 1, spec[n].index, taken | {n}, away + (bool(home) and spec[n].zone not in home))
                slots[n] += 1

    go(0, -1, frozenset(g.bound.values()), 0)
    return best


def _lowest_first() -> HardCluster:
    """The module docstring's example: one leaf, n0 room for one 4-GPU worker, n1 and n4 two, n2
    full, n3 holding task 2 and room for none."""
    busy = [4, 0, 8, 4, 0]
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, b) for i, b in enumerate(busy)]
    return HardCluster(nodes, [Gang("g0", 4, 4, True, bound={2: "n3"})])


def _siblings_in_two_leaves() -> HardCluster:
    """The module docstring's second example: leaf 1 n0 (4 GPUs busy, task 0) and n1 (empty),
    leaf 2 n2 (task 3)."""
    nodes = [
        NodeSpec(f"n{i}", i, leaf, "A100", True, False, busy) for i, (leaf, busy) in enumerate([(1, 4), (1, 0), (2, 0)])
    ]
    return HardCluster(nodes, [Gang("g0", 4, 2, False, bound={0: "n0", 3: "n2"})])


def _strict_over_two_leaves() -> HardCluster:
    """5 workers × 2 GPU in strict order, task 3 bound on n4 (room for two more) in leaf 2 with
    three empty nodes; leaf 1: n0 and n3 empty, n1 and n2 (nearly) full. Ranks 0–2 must sit at
    index ≤ 4, so leaf 2 holds only two of them: ranks 1 and 2 beside rank 3, rank 0 on n0 and
    rank 4 on n5 — one quota outside leaf 2, three nodes, not ranks 0–2 on n0 (two nodes, three
    quotas outside): rule 2 before the fewest nodes, as where the order does not decide."""
    busy = [(1, 0), (1, 7), (1, 8), (1, 0), (2, 2), (2, 0), (2, 0), (2, 0)]
    nodes = [NodeSpec(f"n{i}", i, leaf, "A100", True, False, b) for i, (leaf, b) in enumerate(busy)]
    return HardCluster(nodes, [Gang("g0", 5, 2, True, bound={3: "n4"})])


@PROPERTY
@given(clusters())
@example(c=_strict_over_two_leaves())
@example(c=_lowest_first())
@example(c=_siblings_in_two_leaves())
def test_packed_gangs_in_rank_order_take_the_fewest_nodes(c: HardCluster) -> None:
    result = run(c, liveness=not c.hard, policy=PACKED, zone_rules=False)
    g = c.gangs[0]
    where = [quota_node(result.session, q) for q in g.quotas]
    if not all(where):
        return  # waits: the liveness check of ``run`` judged it (held hard: the other properties)
    index, zone = {n.name: n.index for n in c.nodes}, {n.name: n.zone for n in c.nodes}
    if [index[n] for n in where] != sorted(index[n] for n in where):
        assert not g.strict, f"out of rank order: {where}"
        return  # order is a preference of this gang: test_topology_property judges when it may break
    home = {n.zone for n in c.nodes if n.name in g.bound.values()}
    away = sum(1 for i, n in enumerate(where) if i not in g.bound and home and zone[n] not in home)
    got = (away, len(set(where)))
    assert got == fewest_in_order(c, where), f"{where} takes (quotas outside, nodes) {got}"


def test_the_lowest_index_node_gives_way_to_fewer_nodes() -> None:
    c = _lowest_first()
    result = run(c, liveness=True, policy=PACKED, zone_rules=False)
    assert [quota_node(result.session, q) for q in c.gangs[0].quotas] == ["n1", "n1", "n3", "n4"]


def test_the_siblings_nodes_in_a_smaller_leaf_come_first() -> None:
    c = _siblings_in_two_leaves()
    result = run(c, liveness=True, policy=PACKED, zone_rules=False)
    assert [quota_node(result.session, q) for q in c.gangs[0].quotas] == ["n0", "n2", "n2", "n2"]


def test_the_siblings_leaf_comes_before_fewer_nodes() -> None:
    c = _strict_over_two_leaves()
    result = run(c, liveness=True, policy=PACKED, zone_rules=False)
    assert [quota_node(result.session, q) for q in c.gangs[0].quotas] == ["n0", "n4", "n4", "n4", "n5"]
