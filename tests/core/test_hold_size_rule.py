"""Which of a waiting gang's quotas a hold counts as its largest (issue 16 item 4, "a hold on the
zone(s) that would fit it soonest"; ``holds.choose_hold``, ``holdroom.need_of``): the planner's one
size rule (``gangparts.size``: GPUs first, then all units), not the sum of all request values, in
which memory in bytes outweighs any GPU count. Before, a GPU-less launcher asking much memory was
the gang's "largest": the hold gave each node that launcher first, so a node the gang's 8-GPU
worker alone could use took the launcher instead, and the gang was never held.
"""

from __future__ import annotations

from typing import Any

from extender.cache.cache import ClusterCache
from extender.framework.intents import BindQuota
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.scenarios import policy_with_topology
from tests.core.topo_cluster import NOW

MEMORY_HEAVY = {"cpu": "8", "memory": "200Gi"}  # a GPU-less launcher: 200Gi outweighs 8 GPUs in a sum


def _objects() -> list[dict[str, Any]]:
    """Leaf s0: n0 of 8 GPUs runs an 8-GPU job; n1 of 4 GPUs runs a job of 200Gi memory (both
    nodes of 256Gi). ``mix`` is a GPU-less launcher of 200Gi and an 8-GPU worker of 100Gi: once
    empty, n0 takes the worker (not the launcher too: 300Gi), n1 the launcher."""
    objs: list[dict[str, Any]] = [b.queue("research")]
    for i, gpu in enumerate((8, 4)):
        n = f"n{i}"
        objs += [b.node(n, gpu=gpu, memory="256Gi", index=i), b.topology(n, ["s0"])]
    fills: dict[str, tuple[dict[str, str], int | None]] = {
        "n0": ({"memory": "1Gi"}, 8),
        "n1": ({"memory": "200Gi"}, None),
    }
    for n, (request, busy) in fills.items():
        bound = {"phase": "QuotaBound", "nodeName": n}
        objs.append(b.quota(f"q-fill-{n}", gpu=busy, hca=None, request=request, status=bound))
        objs.append(b.pod(f"fill-{n}", quota=f"q-fill-{n}", gpu=busy, hca=None, node=n, phase="Running"))
    objs.append(b.podgroup("mix", min_member=2))
    objs += [
        b.quota("q-mix-0", gpu=None, hca=None, request=MEMORY_HEAVY),
        b.pod("mix-launcher-0", group="mix", quota="q-mix-0", gpu=None, hca=None, memory="200Gi", index=0),
        b.quota("q-mix-1", gpu=8, hca=8, request={"memory": "100Gi"}),
        b.pod("mix-worker-1", group="mix", quota="q-mix-1", gpu=8, hca=8, memory="100Gi", index=1),
    ]
    return objs


def test_a_memory_heavy_launcher_is_not_the_gangs_largest_quota_in_its_hold() -> None:
    """``mix`` waits (n0 is busy) and would fit n0 and n1 once empty: it holds both. Before, the
    hold counted the launcher as the largest quota and gave it n0 first, which then had no room
    for the worker: no node set held the gang, and it held nothing."""
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, _objects())
    sched = Scheduler(policy_with_topology({"reserve_after_cycles": 1, "max_holds": 1}))
    sched.memory.gang_waits["default/mix"] = 1
    result = sched.run_once(cache.snapshot(NOW))
    assert not any(isinstance(i, BindQuota) and i.quota.startswith("q-mix-") for i in result.intents)
    hold = sched.memory.holds.get("default/mix")
    assert hold is not None and hold.nodes == ("n0", "n1"), sched.memory.holds
