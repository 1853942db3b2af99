"""Scenarios: fix_quota_binding heals a quota whose pods run elsewhere (drift), throttled, and
reports the quotas whose pods are scattered instead of moving them."""

from __future__ import annotations

from extender.framework.intents import BindQuota, ReleaseQuota
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.scenarios import (
    GPU,
    HCA,
    NOW,
    POLICY,
    binds,
    bound,
    cycle,
    drifted,
    make_cache,
    node_of,
)


def test_fix_quota_binding_moves_a_drifted_quota_to_where_its_pod_runs() -> None:
    cache = make_cache(drifted())
    assert cache.nodes["n1"].quota_allocated.keys() == {"q-train-1"}
    sched = Scheduler(POLICY)
    assert sched.memory.last_fix == 0.0
    result = cycle(cache, sched)
    assert bound(result) == {"q-train-1": "n4"}
    assert result.intents == [ReleaseQuota("q-train-1", "n1", "its pods run on n4"), BindQuota("q-train-1", "n4")]
    n1, n4 = node_of(result, "n1"), node_of(result, "n4")
    assert n1.quota_allocated == {}
    assert n1.quota_idle.get(GPU) == 8000 and n1.quota_idle.get(HCA) == 8000
    assert n4.quota_allocated.keys() == {"q-train-1"}
    assert n4.quota_idle.get(GPU) == 7000 and n4.quota_idle.get(HCA) == 7000
    n1.check()
    n4.check()
    assert cache.nodes["n1"].quota_allocated.keys() == {"q-train-1"}  # the cache moves only on write-back
    assert sched.memory.last_fix == NOW


def test_fix_quota_binding_full_rebuild_is_throttled_the_drift_a_pod_event_showed_is_not() -> None:
    cache = make_cache(drifted())
    sched = Scheduler(POLICY)
    cycle(cache, sched)
    assert sched.memory.last_fix == NOW
    # nothing written back: the drift is still there and is fixed again at once (the cache saw
    # the pod on n4), but the full rebuild waits min_interval_seconds (10)
    soon = cycle(cache, sched, NOW + 5)
    assert binds(soon) == {"q-train-1": "n4"}
    assert soon.notes["fix_quota_binding"]["ran"] is False and sched.memory.last_fix == NOW
    again = cycle(cache, sched, NOW + 11)
    assert binds(again) == {"q-train-1": "n4"}
    assert sched.memory.last_fix == NOW + 11


def test_a_quota_whose_pods_are_scattered_is_reported_not_moved() -> None:
    objs = [
        *b.seed_cluster(),
        b.podgroup("pair", min_member=2),
        b.quota("shared", gpu=2, hca=None, status={"phase": "QuotaBound", "nodeName": "n0"}),
    ]
    objs += [
        b.pod(f"pair-{i}", group="pair", quota="shared", gpu=1, hca=None, index=i, node=f"n{i + 1}", phase="Running")
        for i in range(2)
    ]
    result = cycle(make_cache(objs))
    assert result.intents == []
    assert result.notes["fix_quota_binding"]["scattered"] == [("shared", ["n1", "n2"])]
