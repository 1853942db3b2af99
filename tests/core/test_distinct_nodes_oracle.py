"""Issue 16 item 2, one rule for gangs of one size and of several: by default a gang's new
quotas share a node — with one another, or with a bound sibling — only when needed, that is when
no placement on the usable nodes of the leaves the gang spans avoids it, in the rank order those
leaves allow (around its bound siblings, else among its new quotas, else any: rank order comes
before distinct nodes, and the leaves before both).

Against an exhaustive oracle (``mixed_gangs.order_due_for``, ``mixed_gangs.distinct_exists``) over
the small clusters of ``test_mixed_gang_property`` — at most 8 nodes in at most 3 leaves, some
nodes in NVLink domains — and one whole gang, of one size or of several, some of its quotas
bound in an earlier cycle or none.

Before, a gang of one size followed a per-zone rule: each chosen zone's share went to distinct
nodes while that zone had enough, and the siblings' zones took their whole room first. A gang
bound over two leaves put its last rank beside a sibling in one leaf while the other leaf, which
it spans already, had a free node; and a rank the siblings' leaf could hold only beside a sibling
joined it while the further leaf the gang took anyway had free nodes. A gang of several sizes
already counted free nodes over all its chosen leaves (``mixedplan.preferred``), but took one
NVLink domain that holds it only with ranks sharing a node while the domain's own leaf held it
one quota a node, whenever the best-fit leaf would make its ranks share too.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from tests.core.mixed_gangs import (
    Member,
    MixedCluster,
    MixedGang,
    distinct_exists,
    draw_bound,
    members,
    mixed_clusters,
    order_due_for,
)
from tests.core.props import PROPERTY
from tests.core.test_mixed_gang_siblings_nodes import placed
from tests.core.topo_cluster import NodeSpec, free_room

ONE_GPU, HALF, WHOLE, LAUNCHER = Member(1, 1), Member(4, 1), Member(8, 8), Member(0, 2)


@st.composite
def gangs(draw: st.DrawFn) -> MixedCluster:
    """One whole gang (``minMember`` its size) on a cluster of ``mixed_clusters``: of one size
    (two to five quotas) half the time, some of its quotas bound most of the time; nodes in NVLink
    domains of their leaf (some in none); the default policy (no ``pack_workers``)."""
    c = draw(mixed_clusters(max_gangs=1))
    g = c.gangs[0]
    g.min_member = 0
    if draw(st.booleans()):
        g.members, g.bound = [draw(members)] * draw(st.integers(2, 5)), {}
        if draw(st.integers(0, 3)):
            draw_bound(draw, g, c.nodes, {n.name: n.load() for n in c.nodes})
    for n in c.nodes:
        d = draw(st.sampled_from(["", "", "a", "b"]))
        n.domain = f"{n.leaf}{d}" if d else ""
    c.pack = False
    return c


def node(i: int, leaf: int, busy: int = 0, domain: str = "") -> NodeSpec:
    return NodeSpec(f"n{i}", i, leaf, "A100", True, False, busy, domain=domain)


def _last_rank_over_two_leaves() -> MixedCluster:
    """Four 1-GPU workers; ranks 0–2 bound on n0 (leaf 1), n2 and n3 (leaf 2; n3 holds 2 GPUs of
    another job). Leaf 2 has the more room, all of it on the siblings' nodes; leaf 1 has n4 free
    (4 GPUs). Rank 3 (at or above n3's index) goes to n4, not beside rank 2 on n3."""
    nodes = [node(0, 1), node(1, 1, busy=8), node(2, 2), node(3, 2, busy=2), node(4, 1, busy=4)]
    return MixedCluster(nodes, [MixedGang("g0", [ONE_GPU] * 4, bound={0: "n0", 1: "n2", 2: "n3"})])


def _siblings_leaf_only_beside_them() -> MixedCluster:
    """Three 4-GPU workers, rank 0 bound on n3, the only usable node of leaf 1 (room for one more
    beside it); leaf 2 (n4, n5 empty) is needed anyway: ranks 1 and 2 go to n4 and n5, not rank 1
    beside rank 0 on n3."""
    nodes = [node(3, 1), node(4, 2), node(5, 2)]
    return MixedCluster(nodes, [MixedGang("g0", [HALF] * 3, bound={0: "n3"})])


def _launcher_before_two_whole_workers() -> MixedCluster:
    """One NVLink domain, free GPUs 8, 8, 4 on n0–n2; a GPU-less launcher (rank 0) and two 8-GPU
    workers. No placement on distinct nodes keeps rank order: the workers take n0 and n1 (only
    they have 8 GPUs free), and the launcher would have to sit below n0. So the launcher shares
    n0 with worker 0 (n0, n0, n1): rank order before distinct nodes, as for any gang."""
    nodes = [node(0, 1, domain="1a"), node(1, 1, domain="1a"), node(2, 1, busy=4, domain="1a")]
    return MixedCluster(nodes, [MixedGang("g0", [LAUNCHER, WHOLE, WHOLE])])


def _domain_that_would_share() -> MixedCluster:
    """Leaf 1: n0 (empty) and n1 (2 GPUs free) in NVLink domain a, n2 (empty) in none; leaf 2: n3
    (empty). A GPU-less launcher (rank 0) and a 4-GPU worker: a has a node per quota but holds
    them only together on n0 (the worker fits no node after the launcher's), while leaf 1 holds
    them apart (n0 or n1, then n2). Leaf 2, the best fit, holds them only together on n3: the
    gang shares a node wherever it goes, but in leaf 1 it need not; so the zone rules place it
    (n3, n3, as a gang of one size), not the domain (n0, n0)."""
    nodes = [node(0, 1, domain="1a"), node(1, 1, busy=6, domain="1a"), node(2, 1), node(3, 2)]
    return MixedCluster(nodes, [MixedGang("g0", [LAUNCHER, HALF])])


@PROPERTY
@given(gangs())
@example(c=_last_rank_over_two_leaves())
@example(c=_siblings_leaf_only_beside_them())
@example(c=_launcher_before_two_whole_workers())
@example(c=_domain_that_would_share())
def test_a_gang_shares_a_node_only_when_its_leaves_hold_it_no_other_way(c: MixedCluster) -> None:
    g = c.gangs[0]
    where = placed(c)
    if not all(where):
        return  # not placed: the other properties judge whether it should have been
    spec = {n.name: n for n in c.nodes}
    room = free_room(c.nodes, c.start())
    index = {n.name: n.index for n in c.nodes}
    held = set(g.bound.values())
    leaves = {spec[n].zone for n in where}
    nodes = sorted((n for n in c.nodes if n.zone in leaves and n.name in room), key=lambda n: n.index)
    order = order_due_for(c, g, [where[i] for i in g.unbound], nodes, room)
    free = [n for n in nodes if n.name not in held]
    if distinct_exists(g, len(g.unbound), free, room, order, index):
        new = [where[i] for i in g.unbound]
        assert len(set(new)) == len(new) and not held & set(new), (
            f"{g.name} shares a node ({new} beside bound {sorted(held)}) where its leaves {sorted(leaves)} "
            f"hold it on distinct free nodes in {order} order: {where}"
        )


def test_the_last_rank_of_a_gang_over_two_leaves_takes_a_free_node_of_either() -> None:
    assert placed(_last_rank_over_two_leaves()) == ["n0", "n2", "n3", "n4"]


def test_a_rank_takes_a_free_node_of_a_further_leaf_the_gang_takes_anyway() -> None:
    assert placed(_siblings_leaf_only_beside_them()) == ["n3", "n4", "n5"]


def test_a_launcher_ranked_before_two_whole_workers_shares_rather_than_break_rank_order() -> None:
    assert placed(_launcher_before_two_whole_workers()) == ["n0", "n0", "n1"]


def test_a_domain_that_would_make_ranks_share_where_its_leaf_need_not_yields_to_the_zone_rules() -> None:
    assert placed(_domain_that_would_share()) == ["n3", "n3"]
