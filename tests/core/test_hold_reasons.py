"""What a gang kept off held nodes is told (issue 16 item 4: "jobs kept off those nodes
(``NodeHeldForGang``)", ``extender/plugins/topology/verdicts.py``): every gang holding nodes it
would take, whatever else keeps it waiting — a hard tier limit it would keep were nothing held.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bench.cache_writes import bumped
from extender.cache.cache import ClusterCache
from extender.diagnose import diagnose_job
from extender.framework.session import Session
from extender.framework.status import Reason
from extender.plugins.topology.holds import Hold
from extender.scheduler import CycleResult, Scheduler
from tests import builders as b
from tests.core.scenarios import policy_with_topology
from tests.core.test_holds import Cluster as Cluster4
from tests.core.topo_cluster import NOW, NodeSpec, held_to_nvlink
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
    held_to_nvlink(objs)
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
    quota = result.session.quota("q-g0-1")
    assert quota is not None
    assert quota.node_name == "n1", result.verdicts["default/g0"].status.message()
    assert "default/big" not in sched.memory.holds


def _two_holds_on_s1(mid_priority: int) -> tuple[Cluster4, CycleResult]:
    """``test_holds``' cluster (s1 = n0–n3, n0 busy): ``other`` (priority 0) and ``big`` (priority
    10), 4 whole nodes each, both hold n0–n3 — as the binder leaves them when it cannot write the
    binds of a gang placed in the cycle another took its hold's place in
    (:meth:`~extender.scheduler.Scheduler.writes_failed` gives the placed gang its hold back).
    ``mid`` (3 whole nodes, ``mid_priority``, waiting long enough to hold) would take n1–n3 were
    nothing held; one cycle."""
    c = Cluster4(reserve_after_cycles=1, max_holds=2)
    for name, priority in (("other", 0), ("mid", mid_priority)):
        objs = b.training_job(name, 4 if name == "other" else 3, gpu=8, hca=1)
        for o in objs:
            if o["kind"] == "Pod":
                o["spec"]["priority"] = priority
        b.feed(c.cache, objs)
    for pod in filter(None, (c.cache.pod_by_name("default", f"big-worker-{i}") for i in range(4))):
        c.cache.on_pod_update(pod, bumped(pod, spec={**pod["spec"], "priority": 10}))
    s1 = ("n0", "n1", "n2", "n3")
    c.scheduler.memory.holds.update({"default/big": Hold(s1, c.now), "default/other": Hold(s1, c.now)})
    c.scheduler.memory.gang_waits["default/mid"] = 1  # it has waited long enough to hold
    return c, c.cycle()


def test_a_job_kept_off_two_holds_of_the_same_nodes_is_told_both_holders_and_diagnose_agrees() -> None:
    """``mid`` and a one-pod job ``solo`` (one whole node, no topology) are kept off n1–n3, held
    for ``big`` and ``other``: each is told both, in its verdict and in ``/diagnose``."""
    c, _ = _two_holds_on_s1(0)
    c.submit_single("solo")
    result = c.cycle()
    ssn = Session(dataclasses.replace(c.cache.snapshot(), holds=dict(c.scheduler.memory.holds)), c.scheduler.policy)
    for key, told in (("default/mid", "held for default/big, default/other"), ("default/solo", "held for gangs")):
        verdict = result.verdicts[key]
        job = ssn.job(key)
        assert job is not None
        doc = diagnose_job(ssn, job, verdict)
        for message in (verdict.status.message(), doc["message"]):
            assert "NodeHeldForGang" in message and told in message, (key, message)
    assert "held for gangs default/big, default/other" in result.verdicts["default/solo"].status.message()


def test_a_gang_kept_off_two_holds_waits_for_the_one_before_it_though_the_other_is_after_it() -> None:
    """``mid`` (priority 5) comes after ``big`` and before ``other`` in hold order: it may take
    ``other``'s place, never ``big``'s — it waits, and ``big`` keeps n0–n3."""
    c, result = _two_holds_on_s1(5)
    assert [c.node_of(f"q-mid-{i}") for i in range(3)] == ["", "", ""]
    assert c.holds()["default/big"] == ("n0", "n1", "n2", "n3")
    status = result.verdicts["default/mid"].status
    assert "held for default/big, default/other" in status.message()
