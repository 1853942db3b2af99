"""Invariant 1 mid-drift (issue 18 §2), on the cache and the session: a node carrying a pod of
a quota bound elsewhere takes no quota that its pods plus its bound quotas could not hold, and
the drift is fixed in the next cycle whatever fix_quota_binding's throttle says."""

from __future__ import annotations

import pytest

from extender.framework.intents import BindQuota
from extender.framework.session import Session
from extender.model.node import LedgerError
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.scenarios import NOW, POLICY, cycle, drifted, make_cache


def test_a_node_with_a_drifted_pod_has_that_much_less_room_for_quotas() -> None:
    cache = make_cache([*drifted(), b.quota("q-big", gpu=8, hca=8)])
    n4 = cache.nodes["n4"]
    assert n4.quota_allocated == {}  # q-train-1 is still bound to n1 in the API
    assert n4.stray().get("nvidia.com/gpu") == 1000
    big = cache.quotas["q-big"]
    assert not n4.takes_quota("q-big", big.request)
    assert [str(s) for s in n4.quota_fits(big.request)] == ["nvidia.com/gpu 8 > 7", "rdma/hca 8 > 7"]
    ssn = Session(cache.snapshot(NOW), POLICY)
    stmt = ssn.statement()
    with pytest.raises(LedgerError):
        stmt.allocate_quota_to_node("q-big", "n4")
    stmt.discard()
    # a node without strays is unaffected, and the quota's own node does not count its pods twice
    assert cache.nodes["n5"].takes_quota("q-big", big.request)
    assert cache.nodes["n0"].stray().q == {}


def test_a_drift_seen_on_a_pod_event_is_fixed_next_cycle_despite_the_throttle() -> None:
    cache = make_cache(drifted())
    sched = Scheduler(POLICY)
    sched.memory.last_fix = NOW - 1  # the full rebuild ran a second ago: throttled for 9 s more
    result = cycle(cache, sched)
    assert [i for i in result.intents if isinstance(i, BindQuota)] == [BindQuota("q-train-1", "n4")]
    assert sched.memory.last_fix == NOW - 1, "the full rebuild is still throttled"
