"""Topology placement of RDMA gangs as a hypothesis property, through ``run_once`` (seed 三 3.4, 2.6).

Random clusters — 1–4 leaves of 2–6 nodes, 1–2 GPU models (possibly mixed on one leaf), some
nodes NotReady or tainted, some already holding quotas — and random gangs of RDMA jobs (every
worker asks for ``rdma/hca``, so topology scheduling is on; some also set
``enable-topology-scheduling: "true"`` for strict rank order, some name a
``topology-affinity-key`` shared with other gangs). After one cycle, on the session's
final state:

* invariant 1 on every node, invariant 3 on every quota, every ledger recomputes exactly;
* every committed gang (all its quotas bound) sits on nodes of ONE GPU model, one quota per
  node, only on Ready untainted nodes, with node index strictly ascending with task index when
  the job asks for strict order;
* it uses the fewest zones possible at the time it was placed (in particular exactly one when a
  single zone could hold it) — the time being reconstructed from the order of the intents;
* among those, the best by rule 1 (``docs/placement.md``), whatever the GPU model: one zone — the
  one with the least room that holds it (after its affinity key's zones; ties: fewer nodes, lower
  index); several — the set that breaks the least room of untouched zones, then takes the least
  room, the fewest nodes; in each zone, distinct nodes while the zone has enough of them, else
  the fewest nodes that hold its share, best fit (the least room taken);
* a gang with ``minMember`` below its size that does not fit whole places as many of its quotas
  as fit (rank order first), never fewer than ``minMember``; a gang some of whose quotas were
  bound in an earlier cycle keeps their GPU model and, when it asks for strict order, the order
  around them;
* a gang that was not committed could not have fit (checked against the final state: the
  cluster only fills up during a cycle; for its ``minMember``, in rank order around its bound
  quotas when it asks for strict order), and its verdict says it is stuck.

Under the continuity algorithm (packed or not), whose zones are not the fewest, the validity
checks and liveness.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from tests.core.props import PROPERTY
from tests.core.scenarios import quota_node
from tests.core.topo_cluster import NodeSpec
from tests.core.topo_gangs import CONTINUITY, CONTINUITY_PACKED, Cluster, Gang, clusters, fewest_zones, room, run


@PROPERTY
@given(clusters())
def test_rdma_gangs_are_placed_in_one_model_fewest_zones_rank_order(c: Cluster) -> None:
    run(c, liveness=False)


def _counterexample() -> Cluster:
    """Found by the property below: g0 and g1 take n1 and n4; g2 (2×4 GPU) then fits only on n5
    (leaf 1) and n7 (leaf 2)."""

    def ok(i: int, leaf: int) -> NodeSpec:
        return NodeSpec(f"n{i}", i, leaf, "A100", True, False, 0)

    def bad(i: int, leaf: int) -> NodeSpec:
        return NodeSpec(f"n{i}", i, leaf, "A100", False, True, 0)

    return Cluster(
        [bad(0, 1), ok(1, 1), bad(2, 1), bad(3, 1), ok(4, 1), ok(5, 1), bad(6, 2), ok(7, 2)],
        [Gang("g0", 2, 1, False), Gang("g1", 2, 4, False), Gang("g2", 2, 4, False)],
    )


def _in_order_beyond_best_fit() -> Cluster:
    """A strict gang of four whole-node workers whose rank 3 is bound on n6 (leaf 3): ranks 0–2
    must sit on nodes n0–n6. Best fit by room alone would add leaf 4 (n8, n9: after n6); the
    lowest indices in order take n0, n3, n4 over three leaves; leaf 2 (n3–n5) alone keeps the
    order beside leaf 3."""

    def node(i: int, leaf: int, busy: int = 0) -> NodeSpec:
        return NodeSpec(f"n{i}", i, leaf, "A100", True, False, busy)

    nodes = [node(0, 1), node(1, 1, 8), node(2, 1, 8), node(3, 2), node(4, 2), node(5, 2)]
    nodes += [node(6, 3), node(7, 3), node(8, 4), node(9, 4)]
    return Cluster(nodes, [Gang("g0", 4, 8, True, bound={3: "n6"})])


def _loose_rank_0_bound() -> Cluster:
    """A gang (no strict order) of three 1-GPU workers whose rank 0 is bound on n4: distinct nodes
    first would put rank 2 on n3, below rank 0, while n4 takes ranks 1 and 2 in order."""
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0) for i in (3, 4)]
    return Cluster(nodes, [Gang("g0", 3, 1, False, bound={0: "n4"})])


def _order_only_outside_home() -> Cluster:
    """Rank 1 of four 4-GPU workers is bound on n1 (leaf 1, full now); n0 (leaf 1) has room for
    two, n7 (leaf 4) for two. Siblings' zone first puts two of ranks 0, 2, 3 on n0 and one on n7;
    rank order around rank 1 would put ranks 2 and 3 on n7, one quota more outside leaf 1: for a
    gang that does not ask for strict order, locality wins, and the new ranks keep rank order
    among themselves (n0, n0, n7), as a gang of mixed sizes does (``mixedorder.order_kept``)."""

    def node(i: int, leaf: int, busy: int = 0) -> NodeSpec:
        return NodeSpec(f"n{i}", i, leaf, "A100", True, False, busy)

    return Cluster([node(0, 1), node(1, 1, 4), node(7, 4)], [Gang("g0", 4, 4, False, bound={1: "n1"})])


@PROPERTY
@given(clusters())
@example(c=_counterexample())  # a counterexample once found: always tried
@example(c=_order_only_outside_home())
@example(c=_in_order_beyond_best_fit())
@example(c=_loose_rank_0_bound())
def test_a_gang_that_fits_is_placed_even_after_other_gangs_of_its_shape(c: Cluster) -> None:
    """Liveness: a gang left unplaced must not fit the final (fullest) state of the cycle."""
    run(c, liveness=True)


@PROPERTY
@given(clusters(), st.booleans())
def test_under_continuity_every_placement_stays_valid_and_a_gang_that_fits_runs(c: Cluster, pack: bool) -> None:
    """The continuity algorithm (runs of consecutive node indices), packed or not: one GPU model,
    usable nodes, rank order, whole gangs, exact ledgers (its zones are not the fewest); and a
    gang that fits is placed, in a run if one holds it, else by the zone rules."""
    run(c, liveness=True, policy=CONTINUITY_PACKED if pack else CONTINUITY, zone_rules=False)


@PROPERTY
@given(clusters(max_gangs=1))
def test_a_single_rdma_gang_uses_one_zone_whenever_one_zone_can_hold_it(c: Cluster) -> None:
    result = run(c)
    (g,) = c.gangs
    if g.bound or g.min_member:
        return  # run() checked what such a gang gets
    fits_now = fewest_zones(c, room(c, {n.name: n.busy for n in c.nodes}, g.gpu), g.workers)
    nodes = [quota_node(result.session, q) for q in g.quotas]
    spec = {n.name: n for n in c.nodes}
    if fits_now is None:
        assert not any(nodes)
    else:
        assert all(nodes), f"{g.name} fits in {fits_now} zone(s) but was not placed"
        zones = {(spec[n].model, spec[n].leaf) for n in nodes}
        assert len(zones) == fits_now
        if fits_now == 1:
            (zone,) = zones
            assert all((spec[n].model, spec[n].leaf) == zone for n in nodes)


def test_gangs_fill_the_fullest_zone_that_holds_them_and_share_nodes_only_when_needed() -> None:
    """The counterexample as a plain regression. g0 (2×1 GPU) fits leaf 2 (one node, 8 free GPUs)
    and leaf 1 (three nodes): best fit takes leaf 2, both ranks on n7. g1 and g2 (2×4 each) then
    fill leaf 1: g1 on n1, n4 (distinct nodes, lowest index), g2 on the same two nodes, which
    binpack prefers to the empty n5 (so n5 stays whole)."""
    c = _counterexample()
    result = run(c, liveness=True)
    where = {q: quota_node(result.session, q) for g in c.gangs for q in g.quotas}
    assert where == {
        "q-g0-0": "n7",
        "q-g0-1": "n7",
        "q-g1-0": "n1",
        "q-g1-1": "n4",
        "q-g2-0": "n1",
        "q-g2-1": "n4",
    }


def test_a_strict_gang_that_must_leave_its_zones_takes_the_fewest_that_keep_rank_order() -> None:
    """Ranks 0–2 of the strict gang go to leaf 2 (n3–n5), beside their bound rank 3 in leaf 3:
    two zones, not n0, n3, n4 over three."""
    c = _in_order_beyond_best_fit()
    result = run(c, liveness=True)
    where = [quota_node(result.session, q) for q in c.gangs[0].quotas]
    assert where == ["n3", "n4", "n5", "n6"]


def test_a_partly_bound_gang_keeps_rank_order_when_its_zones_allow_it() -> None:
    """Order is a preference for a gang that does not ask for strict order, and one it keeps when
    its zones allow: ranks 1 and 2 join rank 0 on n4 rather than rank 2 taking n3 below it."""
    c = _loose_rank_0_bound()
    result = run(c, liveness=True)
    where = [quota_node(result.session, q) for q in c.gangs[0].quotas]
    assert where == ["n4", "n4", "n4"]


def test_a_partly_bound_gang_keeps_to_its_siblings_zone_before_rank_order() -> None:
    c = _order_only_outside_home()
    result = run(c, liveness=True)
    where = [quota_node(result.session, q) for q in c.gangs[0].quotas]
    assert where == ["n0", "n1", "n0", "n7"]
