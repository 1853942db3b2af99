"""What a gang whose quotas differ in size (a launcher beside its workers) is told when a hold keeps
it off its bound siblings' NVLink domain (``highestTierAllowed: nvlink``, hard), as
``tests/core/test_hold_reasons.py`` says for a gang of one size: it waits for the holder
(``NodeHeldForGang``), not for a tier it would fit only above, and when first in hold order it
takes a lower hold's place there.
"""

from __future__ import annotations

from extender.cache.cache import ClusterCache
from extender.framework.status import Reason
from extender.plugins.topology.holds import Hold
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.mixed_gangs import Member, MixedCluster, MixedGang
from tests.core.scenarios import policy_with_topology
from tests.core.topo_cluster import NOW, NodeSpec, held_to_nvlink

LAUNCHER, WORKER = Member(0, 2), Member(8, 8)


def _held_in_siblings_domain(priority: int, **topology: object) -> tuple[ClusterCache, Scheduler]:
    """Domains a (n0, n1) and b (n2, n3) of one leaf, all empty; ``g0`` (a launcher and two
    whole-node workers of pod ``priority``, worker 1 bound on n0) may not leave one NVLink domain:
    the launcher would join n0 and worker 2 take n1 — but ``big`` (4 whole nodes, priority 5)
    holds n1. ``other`` (3 whole nodes, priority 0) holds n3, in domain b, which ``g0`` may not
    take."""
    nodes = [NodeSpec(f"n{i}", i, 1, "A100", True, False, 0, domain=d) for i, d in enumerate(["1a", "1a", "1b", "1b"])]
    objs = MixedCluster(nodes, [MixedGang("g0", [LAUNCHER, WORKER, WORKER], bound={1: "n0"})]).objects()
    for o in objs:
        if o["kind"] == "Pod":
            o["spec"]["priority"] = priority
    held_to_nvlink(objs)
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    for name, workers, prio in (("big", 4, 5), ("other", 3, 0)):
        job = b.training_job(name, workers, gpu=8, hca=1)
        for o in job:
            if o["kind"] == "Pod":
                o["spec"]["priority"] = prio
        b.feed(cache, job)
    sched = Scheduler(policy_with_topology({**topology, "max_holds": 2}))
    sched.memory.holds.update({"default/big": Hold(("n1",), NOW), "default/other": Hold(("n3",), NOW)})
    return cache, sched


def test_a_mixed_gang_held_to_its_siblings_nvlink_domain_is_told_the_holder_of_the_node_it_would_take() -> None:
    """Were nothing held, ``g0`` would run in a at once: it waits for ``big`` — not for ``other``,
    whose node it may never take (before, every holder in the leaf was named)."""
    cache, sched = _held_in_siblings_domain(10, reserve_after_cycles=5)
    result = sched.run_once(cache.snapshot(NOW))
    status = result.verdicts["default/g0"].status
    assert status.reason is Reason.NODE_HELD_FOR_GANG, status.message()
    assert "held for default/big)" in status.message(), status.message()


def test_a_mixed_gang_held_to_its_siblings_nvlink_domain_takes_the_place_of_a_lower_hold_there() -> None:
    """``g0`` first in hold order, having waited as long as a gang waits for a hold: it takes
    ``big``'s place and runs in a in that cycle; ``other`` keeps its hold on n3, which ``g0``
    never needed (before, the keeper ended both: ``other`` lost its place)."""
    cache, sched = _held_in_siblings_domain(10, reserve_after_cycles=1)
    sched.memory.gang_waits["default/g0"] = 1
    result = sched.run_once(cache.snapshot(NOW))
    nodes = [q.node_name if (q := result.session.quota(f"q-g0-{i}")) else "" for i in range(3)]
    assert nodes == ["n0", "n0", "n1"], (nodes, result.verdicts["default/g0"].status.message())
    assert "default/big" not in sched.memory.holds
    other = sched.memory.holds.get("default/other")
    assert other is not None and "n3" in other.nodes, sched.memory.holds
