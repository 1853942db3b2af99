"""``pack_workers: true`` against an exhaustive oracle (issue 16 item 2): a gang's ranks on as few
nodes as possible instead of distinct ones.

The clusters and gangs of ``test_topology_property`` run through one cycle of the default policy
with ``pack_workers`` set. Every check of that property holds (one GPU model, usable nodes,
capacity, minMember, rank order, the fewest zones and rule 1's best fit — packing changes which
nodes of the chosen zones, never which zones), and each gang placed whole or in part without
bound siblings takes the fewest nodes of its chosen zones that hold it, and among sets of that
many the least room (best fit: a roomier node stays whole for a wider worker), whether it spans
one zone or several.
"""

from __future__ import annotations

from hypothesis import example, given

from tests.core.props import PROPERTY
from tests.core.scenarios import policy_with_topology, quota_node
from tests.core.topo_cluster import NodeSpec
from tests.core.topo_gangs import Cluster, Gang, clusters, run

PACKED = policy_with_topology({"pack_workers": True})


def _two_leaves() -> Cluster:
    """4 workers × 4 GPU; leaf 1: n0–n2 with 4 GPUs free each (one worker each), leaf 2: n3 empty
    (two workers), n4 full. No leaf holds the gang; of both, n3 and two of n0–n2 do: three nodes,
    not the four that taking leaf 1's room first gives."""

    def n(i: int, leaf: int, busy: int) -> NodeSpec:
        return NodeSpec(f"n{i}", i, leaf, "A100", True, False, busy)

    return Cluster([n(0, 1, 4), n(1, 1, 4), n(2, 1, 4), n(3, 2, 0), n(4, 2, 8)], [Gang("g0", 4, 4, False)])


@PROPERTY
@given(clusters())
@example(c=_two_leaves())
def test_packed_gangs_take_the_fewest_nodes_of_their_fewest_zones(c: Cluster) -> None:
    run(c, liveness=True, policy=PACKED, pack=True)


def test_a_gang_over_two_leaves_packs_across_both() -> None:
    c = _two_leaves()
    result = run(c, liveness=True, policy=PACKED, pack=True)
    nodes = [quota_node(result.session, q) for q in c.gangs[0].quotas]
    assert nodes == ["n0", "n1", "n3", "n3"]


def test_a_strict_gang_packs_around_its_bound_sibling() -> None:
    """Strict order, 4 workers × 1 GPU, task 0 bound on n2 in an earlier cycle; n0 has 4 GPUs
    free, n1–n3 are empty. Packing best fit picks n0, below the sibling: out of rank order, so the
    three go to nodes after n2 — with ``pack_workers`` beside their sibling, all on n2 (one node),
    not spread over n2 and n3."""

    def n(i: int, busy: int) -> NodeSpec:
        return NodeSpec(f"n{i}", i, 1, "A100", True, False, busy)

    g = Gang("g0", 4, 1, True, bound={0: "n2"})
    c = Cluster([n(0, 4), n(1, 0), n(2, 0), n(3, 0)], [g])
    result = run(c, liveness=True, policy=PACKED, pack=True)
    nodes = [quota_node(result.session, q) for q in g.quotas]
    assert nodes == ["n2", "n2", "n2", "n2"]


def test_a_strict_gang_packs_onto_a_sibling_inside_its_rank_range() -> None:
    """Strict order, 3 workers × 1 GPU, task 1 bound on n1 and task 2 on n2 in an earlier cycle;
    n0 and n1 are empty, n2 has 4 GPUs busy. Task 0 may sit on any node index ≤ 1, n1 included:
    with ``pack_workers`` it goes beside its sibling on n1 (no node more), not onto n0 — best fit
    over the siblings' nodes picks n2, out of order, and the ordered fallback used to take the
    lowest index instead of the siblings' nodes first."""

    def n(i: int, busy: int) -> NodeSpec:
        return NodeSpec(f"n{i}", i, 1, "A100", True, False, busy)

    g = Gang("g0", 3, 1, True, bound={1: "n1", 2: "n2"})
    c = Cluster([n(0, 0), n(1, 0), n(2, 4)], [g])
    result = run(c, liveness=True, policy=PACKED, pack=True)
    nodes = [quota_node(result.session, q) for q in g.quotas]
    assert nodes == ["n1", "n1", "n2"]
