"""``release_quota`` on a stuck job (issue 18 §3–4), through the real conversion, cache and
scheduler: every path — claims on unbound quotas, bound quotas, statically bound quotas kept,
quotas a running pod still uses kept — and the back-off growing with each release.

A pod with a nodeSelector no node has can never be placed: its quota's node filters read it
(the quota then never binds), or a quota already bound somewhere waits for it in vain.
"""

from __future__ import annotations

from typing import Any

from extender import wellknown
from extender.framework.intents import ReleaseClaim, ReleaseQuota
from extender.framework.status import Reason
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.scenarios import NOW, POLICY, cycle, make_cache, write_back

NOWHERE = {"pool": "nowhere"}  # no node has this label
CYCLES = 30  # the default policy's unschedulable_cycles
JOB = "default/stuck"
OPS = {wellknown.ANNO_QUEUE_NAME: "ops"}


def bound(node: str) -> dict[str, Any]:
    return {"phase": "QuotaBound", "nodeName": node}


def test_claims_on_unbound_quotas_of_a_job_stuck_past_its_cycles_are_released() -> None:
    objs = [
        *b.seed_cluster(),
        b.podgroup("stuck", min_member=2),
        *(b.quota(f"q{i}", gpu=1, hca=None) for i in range(2)),
        *(
            b.pod(f"stuck-{i}", group="stuck", quota=f"q{i}", gpu=1, hca=None, index=i, node_selector=NOWHERE)
            for i in range(2)
        ),
    ]
    cache = make_cache(objs)
    sched = Scheduler(POLICY)
    for i in range(CYCLES - 1):
        result = cycle(cache, sched, NOW + i)
        assert not [x for x in result.intents if isinstance(x, ReleaseClaim)], f"released early, cycle {i}"
        assert not cache.quotas["q0"].node_name, "test precondition: the quota cannot be bound"
    result = cycle(cache, sched, NOW + CYCLES)
    released = sorted(x.name for x in result.intents if isinstance(x, ReleaseClaim))
    assert released == ["stuck-0", "stuck-1"]
    reasons = {x.reason for x in result.intents if isinstance(x, ReleaseClaim)}
    assert all(r.startswith(Reason.RELEASED_UNSCHEDULABLE.value + "(") for r in reasons), reasons
    write_back(cache, result)
    assert cache.quotas["q0"].claims == {} and cache.quotas["q1"].claims == {}
    # another job of the queue may have the quotas now
    assert sched.memory.backoff[JOB] == NOW + CYCLES + 10


def test_a_stuck_job_gives_back_bound_quotas_but_keeps_static_ones_and_those_its_running_pods_use() -> None:
    objs = [
        *b.seed_cluster(),
        b.podgroup("stuck", min_member=1),
        b.quota("q-run", gpu=2, hca=None, status=bound("n0")),  # a running pod and a pending one share it
        b.quota("q-bound", gpu=1, hca=None, status=bound("n1")),
        b.quota("q-static", gpu=1, hca=None, static_bind_node="n2", status=bound("n2")),
        b.pod("stuck-0", group="stuck", quota="q-run", gpu=1, hca=None, index=0, node="n0", phase="Running"),
        b.pod("stuck-1", group="stuck", quota="q-run", gpu=1, hca=None, index=1, node_selector=NOWHERE),
        b.pod("stuck-2", group="stuck", quota="q-bound", gpu=1, hca=None, index=2, node_selector=NOWHERE),
        b.pod("stuck-3", group="stuck", quota="q-static", gpu=1, hca=None, index=3, node_selector=NOWHERE),
    ]
    cache = make_cache(objs)
    sched = Scheduler(POLICY)
    intents = []
    for i in range(CYCLES):
        intents += cycle(cache, sched, NOW + i).intents
    released = [x.quota for x in intents if isinstance(x, ReleaseQuota)]
    assert released == ["q-bound"], released
    assert not [x for x in intents if isinstance(x, ReleaseClaim)], "claims on bound quotas are kept"


def test_the_release_back_off_doubles_with_each_release() -> None:
    objs = [
        *b.seed_cluster(),
        b.podgroup("stuck", min_member=1),
        b.quota("q0", gpu=1, hca=None),
        b.pod("stuck-0", group="stuck", gpu=1, hca=None, index=0, node_selector=NOWHERE),
    ]
    cache = make_cache(objs)
    sched = Scheduler(POLICY)
    waits: list[float] = []
    claimed_during_backoff = False
    for i in range(200):
        now = NOW + i
        result = cycle(cache, sched, now)
        if any(isinstance(x, ReleaseClaim) for x in result.intents):
            waits.append(sched.memory.backoff[JOB] - now)
        elif JOB in sched.memory.backoff and cache.quotas["q0"].claims:
            claimed_during_backoff = True
        write_back(cache, result)
        if len(waits) == 3:
            break
    assert waits == [10.0, 20.0, 40.0], waits
    assert not claimed_during_backoff, "the job claimed quotas again before its back-off ended"


def test_an_unclaimed_quota_another_controller_bound_is_left_bound_ours_is_released() -> None:
    objs = [
        *b.seed_cluster(),
        b.quota("q-external", gpu=1, hca=None, status={**bound("n3"), "boundBy": None}),
        b.quota("q-ours", gpu=1, hca=None, status=bound("n4")),
    ]
    cache = make_cache(objs)
    sched = Scheduler(POLICY)
    released: list[str] = []
    for i in range(5):
        result = cycle(cache, sched, NOW + i)
        released += [x.quota for x in result.intents if isinstance(x, ReleaseQuota)]
        write_back(cache, result)
    assert released == ["q-ours"]
    assert cache.quotas["q-external"].node_name == "n3"


def test_a_gang_that_only_waits_for_room_keeps_its_claims_past_its_cycles() -> None:
    """Unlike a job no node takes, a gang waiting for capacity (NoZoneFits: others hold the room it
    needs) keeps its claims, its place in line and any hold: it is not unplaceable."""
    objs = [
        *b.seed_cluster(),  # 8 nodes of 8 GPUs
        *(b.quota(f"busy{i}", queue="ops", gpu=8, hca=None, status=bound(f"n{i}")) for i in range(6)),
        *(
            b.pod(f"busy{i}", quota=f"busy{i}", gpu=8, hca=None, node=f"n{i}", phase="Running", annotations=OPS)
            for i in range(6)
        ),
        *b.training_job("wait", 3, gpu=8, hca=1),  # needs three whole nodes of one leaf: two are free
    ]
    cache = make_cache(objs)
    sched = Scheduler(POLICY)
    for i in range(CYCLES + 5):
        result = cycle(cache, sched, NOW + i)
        assert not [x for x in result.intents if isinstance(x, ReleaseClaim)], f"claims released, cycle {i}"
        write_back(cache, result)
    assert result.verdicts["default/wait"].status.reason is Reason.NO_ZONE_FITS
    assert all(cache.quotas[f"q-wait-{i}"].claims for i in range(3))
