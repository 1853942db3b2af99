"""The sylas eviction-cost score prices only the spot pods that may go for the quota's pods.

Binding a quota to a node whose GPUs spot pods use means evicting them later (reclaim, when the
quota's pod preempts); the score (``qn.node_order``) predicts those victims and prefers the
cheapest eviction. But reclaim evicts only what :func:`extender.framework.victims.may_go` allows
for the preemptor: spot pods of lower priority, not kept by the policy's ``job.victims`` stage
(conformance keeps kube-system pods). Before, the prediction chose among every spot pod of the
node, so a node whose spot pods can never go for this pod scored as a cheap eviction: the quota
was bound there and its pod waited (``InsufficientIdle``) until those spot pods ended by
themselves, while on the other node a preemption would have freed the room at once.

Cluster: n0 and n1, 8 GPUs each, each full with one 8-GPU spot pod. On n0 the spot pod cannot go
for a 100-priority training pod (priority 1000, or kube-system) but is cheap to evict by the four
strategies (it started a minute ago); on n1 a 0-priority spot pod that has run for a day (dear).
The training job's one 8-GPU quota must go to n1.
"""

from __future__ import annotations

from typing import Any

import pytest

from extender import wellknown
from extender.cache.convert import format_time
from tests import builders as b
from tests.core.scenarios import NOW, binds, cycle, make_cache


def _objects(keeper: str) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [b.queue("research")]
    for n in ("n0", "n1"):
        objs += [b.node(n, extra_allocatable={wellknown.RESOURCE_SPOT_GPU: "8"}), b.topology(n, ["s1"])]
    namespace, priority = ("batch", 1000) if keeper == "higher-priority" else ("kube-system", 0)
    kept = b.running_spot_pod("kept", namespace=namespace, group="g-kept", gpu=8, priority=priority, node="n0")
    kept["status"]["startTime"] = format_time(NOW - 60)
    old = b.running_spot_pod("old", namespace="batch", group="g-old", gpu=8, priority=0, node="n1")
    old["status"]["startTime"] = format_time(NOW - 86_000)
    objs += [kept, old, b.podgroup("g-kept", namespace=namespace, min_member=1)]
    objs.append(b.podgroup("g-old", namespace="batch", min_member=1))
    job = b.training_job("t", 1, gpu=8, hca=None)
    for o in job:
        if o["kind"] == "Pod":
            o["spec"]["priority"] = 100
    return objs + job


@pytest.mark.parametrize("keeper", ["higher-priority", "kube-system"])
def test_the_quota_goes_where_its_pod_can_preempt(keeper: str) -> None:
    assert binds(cycle(make_cache(_objects(keeper)))) == {"q-t-0": "n1"}
