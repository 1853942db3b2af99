"""Under the ``continuity`` policy, a gang held to one NVLink domain (``highestTierAllowed: nvlink``,
``mode: hard``) runs whenever one named domain holds it, as it does under the zone rules
(``test_nvlink_domains_property``, ``test_mixed_gang_nvlink_hard``): a run of consecutive nodes
inside one domain is within the limit, and a run beyond it is no answer, so the zone rules (one
NVLink domain first) place the gang. Before, every run counted as a leaf-wide span and the gang
waited for ever with ``FitsOnlyAboveAllowedTier`` — for gangs of one size and of several alike.
"""

from __future__ import annotations

from hypothesis import example, given

from extender.cache.cache import ClusterCache
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.mixed_gangs import MixedCluster, MixedGang
from tests.core.props import PROPERTY
from tests.core.test_mixed_gang_nvlink_hard import LAUNCHER, WORKER, _leaf
from tests.core.test_nvlink_domains_property import domain_clusters
from tests.core.topo_cluster import NOW, NodeSpec, check_ledgers, held_to_nvlink
from tests.core.topo_gangs import CONTINUITY, Cluster, Gang, check_in_one_domain, domain_room, room

Objects = list[dict[str, object]]


def within_nvlink(objs: Objects, quotas: list[str]) -> list[str]:
    """One cycle of the continuity policy with the PodGroups held hard to one NVLink domain: the
    nodes of ``quotas`` ("" for one left unbound)."""
    held_to_nvlink(objs)
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    result = Scheduler(CONTINUITY).run_once(cache.snapshot(NOW))
    check_ledgers(result.session)
    return [result.session.quota(q).node_name or "" for q in quotas]  # type: ignore[union-attr]


def _two_workers_over_two_domains() -> Cluster:
    """Domains a (n0, n1) and b (n2, n3), all empty; two whole-node workers: the run n0–n1 lies in
    a (it waited, told it fits only across a leaf)."""
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(["1a", "1a", "1b", "1b"])]
    return Cluster(nodes, [Gang("g0", 2, 8, False)])


def _the_shortest_run_crosses_domains() -> Cluster:
    """Domains a, b, b, a by index, all empty; two whole-node workers: of the shortest runs, n1–n2
    lies in one domain (b)."""
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(["1a", "1b", "1b", "1a"])]
    return Cluster(nodes, [Gang("g0", 2, 8, False)])


def _runs_only_across_domains() -> Cluster:
    """Domains a, b, a, b by index, all empty; two whole-node workers: every run of two crosses a
    domain; a holds them (n0, n2), not consecutive: the zone rules place them there."""
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(["1a", "1b", "1a", "1b"])]
    return Cluster(nodes, [Gang("g0", 2, 8, False)])


def test_a_gang_held_to_one_domain_runs_under_continuity() -> None:
    for c, want in (
        (_two_workers_over_two_domains(), ["n0", "n1"]),
        (_the_shortest_run_crosses_domains(), ["n1", "n2"]),
        (_runs_only_across_domains(), ["n0", "n2"]),
    ):
        assert within_nvlink(c.objects(), c.gangs[0].quotas) == want


def test_a_mixed_gang_held_to_one_domain_runs_under_continuity() -> None:
    c = MixedCluster(_leaf("aabb"), [MixedGang("g0", [LAUNCHER, WORKER])])
    objs = c.objects()
    assert within_nvlink(objs, c.gangs[0].quotas) == ["n0", "n0"]  # the shortest run: n0 alone


@PROPERTY
@given(domain_clusters())
@example(c=_two_workers_over_two_domains())
@example(c=_runs_only_across_domains())
def test_under_continuity_a_gang_held_to_one_nvlink_domain_runs_whenever_one_holds_it(c: Cluster) -> None:
    """As ``test_nvlink_domains_property``'s oracle: it runs in one named domain whenever one has
    room for all its quotas, and otherwise waits."""
    g = c.gangs[0]
    rooms = domain_room(c, room(c, c.start(), g.gpu))
    check_in_one_domain(c, within_nvlink(c.objects(), g.quotas), rooms)
