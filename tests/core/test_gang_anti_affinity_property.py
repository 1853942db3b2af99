"""A gang whose quotas repel one another (quota anti-affinity between its own quotas: one worker
per node) against an exhaustive oracle: ``qn.predicate`` (``quotaaffinity``) decides which nodes
can take a quota of the gang, so the plan never puts two of them on one node, and a gang that
fits on distinct nodes is never refused — packed (``pack_workers``) or not, whichever zone would
hold it were its quotas allowed to share nodes.

The clusters of ``test_topology_property`` with one gang, none of it bound yet, all of it needed;
one cycle. The gang is placed iff some GPU model's usable nodes with room for one of its quotas
are at least as many as its workers; then on that many distinct usable nodes of one model, in
the fewest zones that have that many such nodes, in rank order.
"""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

from hypothesis import example, given
from hypothesis import strategies as st

from extender.cache.cache import ClusterCache
from extender.framework.policy import Policy
from extender.plugins.topology import gangparts
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.props import PROPERTY
from tests.core.scenarios import policy_with_topology, quota_node
from tests.core.topo_cluster import NOW, NodeSpec, check_ledgers
from tests.core.topo_gangs import Cluster, Gang, clusters, fewest_zones, room

POLICIES: dict[bool, Policy] = {pack: policy_with_topology({"pack_workers": pack}) for pack in (False, True)}


def repelling(c: Cluster) -> list[dict[str, object]]:
    """The cluster's objects, each gang quota's anti-affinity naming its siblings."""
    objs = c.objects()
    for g in c.gangs:
        for obj in objs:
            name = obj["metadata"]["name"]
            if obj["kind"] == "Quota" and name in g.quotas:
                obj["spec"]["affinity"] = {"quotaAntiAffinity": [{"quotaNames": [q for q in g.quotas if q != name]}]}
    return objs


def _two_leaves() -> Cluster:
    """4 workers of 1 GPU; leaf 1 has two empty nodes (room for 16, but only 2 apart), leaf 2
    four: best fit by room would pick leaf 1, where the gang cannot run."""

    def n(i: int, leaf: int) -> NodeSpec:
        return NodeSpec(f"n{i}", i, leaf, "A100", True, False, 0)

    return Cluster([n(0, 1), n(1, 1), n(2, 2), n(3, 2), n(4, 2), n(5, 2)], [Gang("g0", 4, 1, False)])


@PROPERTY
@given(clusters(max_gangs=1), st.booleans())
@example(c=_two_leaves(), pack=False)
@example(c=_two_leaves(), pack=True)
def test_a_gang_of_repelling_quotas_takes_distinct_nodes_and_runs_when_they_exist(c: Cluster, pack: bool) -> None:
    check_repelling(c, pack)


def check_repelling(c: Cluster, pack: bool) -> None:
    """One cycle of ``c``'s one gang, its quotas repelling one another, and the checks of the
    module docstring."""
    (g,) = c.gangs
    c = Cluster(c.nodes, [replace(g, bound={}, min_member=0)])
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, repelling(c))
    assert not cache.conversion_errors
    result = Scheduler(POLICIES[pack]).run_once(cache.snapshot(NOW))
    ssn = result.session
    check_ledgers(ssn)
    (g,) = c.gangs
    nodes = [quota_node(ssn, q) for q in g.quotas]
    one_each = {n: min(1, k) for n, k in room(c, {n.name: n.busy for n in c.nodes}, g.gpu).items()}
    fewest = fewest_zones(c, one_each, g.workers)
    if fewest is None:
        assert not any(nodes), f"{g.name} placed on {nodes} though no model has {g.workers} nodes with room"
        return
    assert all(nodes), f"{g.name} fits on {g.workers} distinct nodes but was refused: {result.verdicts}"
    spec = {n.name: n for n in c.nodes}
    placed = [spec[n] for n in nodes]
    assert len(set(nodes)) == len(nodes), f"{g.name} shares a node: {nodes}"
    assert all(n.usable for n in placed) and len({n.model for n in placed}) == 1, nodes
    assert [n.index for n in placed] == sorted(n.index for n in placed), f"{g.name} breaks rank order: {nodes}"
    assert len({n.zone for n in placed}) == fewest, f"{g.name} spans more zones than {fewest}: {nodes}"


@PROPERTY
@given(clusters(max_gangs=1), st.booleans())
@example(c=_two_leaves(), pack=False)
@example(c=_two_leaves(), pack=True)
def test_repelling_quotas_beyond_the_state_limit_still_take_distinct_nodes(c: Cluster, pack: bool) -> None:
    """The same property with ``mixedfrontier.STATE_LIMIT`` at 0: every gang of two or more repelling
    quotas (each a kind of its own) is one the exact planner does not enumerate."""
    with mock.patch.object(gangparts, "STATE_LIMIT", 0):
        check_repelling(c, pack)


def test_thirteen_repelling_workers_take_the_leaf_with_thirteen_nodes() -> None:
    """One worker per node, 13 workers of 1 GPU: 2**13 count vectors, past ``STATE_LIMIT``. Leaf 1
    has 2 empty nodes (room for 16 workers, but only 2 apart), leaf 2 has 13: the gang runs in
    leaf 2, one worker per node, rather than wait for ever on leaf 1."""
    nodes = [NodeSpec(f"n{i}", i, 1 if i < 2 else 2, "A100", True, False, 0) for i in range(15)]
    for pack in (False, True):
        c = Cluster(nodes, [Gang("g0", 13, 1, False)])
        cache = ClusterCache(clock=lambda: NOW)
        b.feed(cache, repelling(c))
        result = Scheduler(POLICIES[pack]).run_once(cache.snapshot(NOW))
        check_ledgers(result.session)
        placed = [quota_node(result.session, q) for q in c.gangs[0].quotas]
        assert placed == [f"n{i}" for i in range(2, 15)], (pack, placed, result.verdicts)
