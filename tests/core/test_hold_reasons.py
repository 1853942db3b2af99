"""What a gang kept off held nodes is told (issue 16 item 4: "jobs kept off those nodes
(``NodeHeldForGang``)", ``extender/plugins/topology/verdicts.py``): every gang holding nodes it
would take, whatever else keeps it waiting — a hard tier limit it would keep were nothing held.
"""

from __future__ import annotations

from typing import Any

from extender.cache.cache import ClusterCache
from extender.framework.status import Reason
from extender.plugins.topology.holds import Hold
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.scenarios import policy_with_topology
from tests.core.topo_cluster import NOW, NodeSpec
from tests.core.topo_gangs import Cluster, Gang


def test_a_gang_held_to_its_siblings_nvlink_domain_is_told_the_holder_of_the_node_it_would_take() -> None:
    """Domains a (n0, n1) and b (n2, n3), all empty; ``g0`` (two whole-node workers, rank 0 bound
    on n0) may not leave one NVLink domain. n1 would take rank 1 — but ``big`` holds it. ``g0``
    waits for ``big`` (``NodeHeldForGang``), not for a tier it would fit only above: were nothing
    held it would run in a at once."""
    cache, sched = _held_in_siblings_domain(10, reserve_after_cycles=5)  # planned first: big holds n1 only
    result = sched.run_once(cache.snapshot(NOW))
    status = result.verdicts["default/g0"].status
    assert status.reason is Reason.NODE_HELD_FOR_GANG, status.message()
    assert "held for default/big" in status.message()


def _held_in_siblings_domain(priority: int, **topology: Any) -> tuple[ClusterCache, Scheduler]:
    """Domains a (n0, n1) and b (n2, n3) of one leaf, all empty; ``g0`` (two whole-node workers of
    pod ``priority``, rank 0 bound on n0) may not leave one NVLink domain; ``big`` (4 whole nodes)
    holds n1, the node rank 1 would take."""
    doms = ["1a", "1a", "1b", "1b"]
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(doms)]
    objs = Cluster(nodes, [Gang("g0", 2, 8, False, bound={0: "n0"})]).objects()
    for o in objs:
        if o["kind"] == "Pod":
            o["spec"]["priority"] = priority
        if o["kind"] == "PodGroup":
            o["spec"]["topology"] = {"highestTierAllowed": "nvlink", "mode": "hard"}
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, [*objs, *b.training_job("big", 4, gpu=8, hca=1)])
    sched = Scheduler(policy_with_topology(topology))
    sched.memory.holds["default/big"] = Hold(("n1",), NOW)
    return cache, sched


def test_a_gang_held_to_its_siblings_nvlink_domain_takes_the_place_of_a_lower_hold_there() -> None:
    """The same, ``g0`` first in hold order: once it has waited as long as a gang waits for a
    hold, it takes ``big``'s place and runs on n1 in that cycle."""
    cache, sched = _held_in_siblings_domain(10, reserve_after_cycles=1)
    sched.memory.gang_waits["default/g0"] = 1
    result = sched.run_once(cache.snapshot(NOW))
    assert result.session.quota("q-g0-1").node_name == "n1", result.verdicts["default/g0"].status.message()
    assert "default/big" not in sched.memory.holds
