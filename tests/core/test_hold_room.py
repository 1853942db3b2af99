"""Where a gang whose quotas differ in size holds, and when its hold moves (issue 16 item 4, "a
hold on the zone(s) that would fit it soonest"; ``holds.choose_hold`` and ``holds.better_hold``):
room is counted in its quotas, as the hold itself is sized, not in copies of its largest quota.
"""

from __future__ import annotations

from typing import Any

import pytest

from extender.cache.cache import ClusterCache
from extender.plugins.topology.holds import Hold
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.scenarios import policy_with_topology
from tests.core.topo_cluster import NOW, NodeSpec, held_to_nvlink
from tests.core.topo_gangs import Cluster, Gang

S1, S2 = ("n0", "n1", "n2"), ("n3", "n4", "n5")
BUSY = {"n1": 1, "n2": 1, "n5": 8}  # node → GPUs of the one-pod job running there


def _mixed_gang_between_two_leaves(held: tuple[str, ...] | None) -> Scheduler:
    """Leaves s1 = n0–n2 and s2 = n3–n5 (8 GPUs each); one-pod jobs run as ``BUSY`` says: s1 has
    8 + 7 + 7 GPUs free, s2 8 + 8 + 0. ``mix`` (one 8-GPU launcher and fifteen 1-GPU workers, 23
    GPUs, kept to one leaf) fits neither now: s1 takes fifteen of its sixteen quotas (one GPU
    short), s2 nine (seven short). Counted in 8-GPU copies, s1 has room for one, s2 for two.
    ``held``: ``mix`` holds these nodes already. The scheduler, after one cycle."""
    cache = ClusterCache(clock=lambda: NOW)
    objs: list[dict[str, Any]] = [b.queue("research")]
    for i, n in enumerate((*S1, *S2)):
        objs += [b.node(n, index=i), b.topology(n, ["s1" if n in S1 else "s2"])]
    for n, gpu in BUSY.items():
        bound = {"phase": "QuotaBound", "nodeName": n}
        objs.append(b.quota(f"q-fill-{n}", gpu=gpu, hca=None, status=bound))
        objs.append(b.pod(f"fill-{n}", quota=f"q-fill-{n}", gpu=gpu, hca=None, node=n, phase="Running"))
    objs.append(b.podgroup("mix", min_member=16, topology={"highestTierAllowed": "leaf", "mode": "hard"}))
    for i in range(16):
        gpu = 8 if i == 0 else 1
        objs += [
            b.quota(f"q-mix-{i}", gpu=gpu),
            b.pod(f"mix-worker-{i}", group="mix", quota=f"q-mix-{i}", gpu=gpu, index=i),
        ]
    b.feed(cache, objs)
    sched = Scheduler(policy_with_topology({"reserve_after_cycles": 1}))
    sched.memory.gang_waits["default/mix"] = 1
    if held is not None:
        sched.memory.holds["default/mix"] = Hold(held, NOW)
    result = sched.run_once(cache.snapshot(NOW))
    assert not any(cache.quotas[f"q-mix-{i}"].node_name for i in range(16)), result.verdicts["default/mix"]
    return sched


@pytest.mark.parametrize("held", [None, S1, S2], ids=["new", "on-s1", "on-s2"])
def test_a_mixed_gang_holds_the_leaf_with_room_for_more_of_its_quotas(held: tuple[str, ...] | None) -> None:
    """``mix`` holds s1, one GPU short, not s2, seven short: a new hold goes there, a hold there
    stays, and a hold on s2 moves there (keeping its start)."""
    assert {job: h.nodes for job, h in _mixed_gang_between_two_leaves(held).memory.holds.items()} == {"default/mix": S1}


def test_a_gang_held_to_one_nvlink_domain_holds_nodes_of_one_domain() -> None:
    """Domains a (n0, n1) and b (n2, n3) of one leaf; one-pod jobs fill n0 and n3. ``g`` (two
    whole-node workers, ``highestTierAllowed: nvlink``, hard) fits no domain now. Its hold must
    lie within one domain — it can never run across two — not on n1 and n2, the roomiest nodes
    of the leaf, which would keep others off two nodes it cannot use together."""
    doms = ["1a", "1a", "1b", "1b"]
    nodes = [
        NodeSpec(f"n{i}", i, 1, "A100", True, False, 8 if i in (0, 3) else 0, domain=d) for i, d in enumerate(doms)
    ]
    objs = Cluster(nodes, [Gang("g", 2, 8, False)]).objects()
    held_to_nvlink(objs)
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    sched = Scheduler(policy_with_topology({"reserve_after_cycles": 1}))
    sched.memory.gang_waits["default/g"] = 1
    result = sched.run_once(cache.snapshot(NOW))
    held = sched.memory.holds["default/g"].nodes
    assert held in (("n0", "n1"), ("n2", "n3")), result.verdicts["default/g"].status.message()


def test_a_partly_bound_gang_with_a_hard_leaf_limit_holds_in_its_siblings_leaf() -> None:
    """Leaves s1 (n0, n1) and s2 (n2, n3); ``g`` (two whole-node workers, kept hard to one leaf)
    has rank 0 bound on n0, and a one-pod job fills n1; s2 is empty. Rank 1 can only ever run in
    s1, beside its sibling: its hold is n1, not a node of s2, where it would keep others off a
    node the gang can never use."""
    nodes = [NodeSpec(f"n{i}", i, 1 if i < 2 else 2, "A100", True, False, 8 if i == 1 else 0) for i in range(4)]
    objs = Cluster(nodes, [Gang("g", 2, 8, False, bound={0: "n0"})]).objects()
    for o in objs:
        if o["kind"] == "PodGroup":
            o["spec"]["topology"] = {"highestTierAllowed": "leaf", "mode": "hard"}
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    sched = Scheduler(policy_with_topology({"reserve_after_cycles": 1}))
    sched.memory.gang_waits["default/g"] = 1
    result = sched.run_once(cache.snapshot(NOW))
    assert sched.memory.holds["default/g"].nodes == ("n1",), result.verdicts["default/g"].status.message()
