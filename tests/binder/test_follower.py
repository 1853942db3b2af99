"""What the binder loop of a replica that does not lead still does: its cache forgets what has
expired (``BinderLoop.follow``), since no cycle of its own runs to do it; and what it no longer
does once it stops leading: export the leader's gauges and verdicts of its last cycle."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client.parser import text_string_to_metric_families

from extender.binder.loop import BinderLoop
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.model.task import TaskStatus
from extender.scheduler import Scheduler
from extender.simulate.cluster import LocalCluster
from tests import builders as b
from tests.binder.test_hold_takeover import hold_objects, hold_policy

pytestmark = pytest.mark.anyio

NOW = 1_000_000.0


async def one_round(loop: BinderLoop) -> None:
    """One round of ``loop.run``: its leadership as ``loop.is_leader`` says, then it stops."""
    stop = asyncio.Event()
    follower = loop.is_leader

    def once() -> bool:
        stop.set()
        return follower()

    loop.is_leader = once
    await loop.run(stop)
    loop.is_leader = follower


async def test_a_follower_forgets_a_bind_it_assumed_once_the_assumption_expires() -> None:
    clock = [NOW]
    cache = ClusterCache(clock=lambda: clock[0], assume_ttl=30.0)
    b.feed(cache, [b.node("n0"), b.quota("q", status={"phase": "QuotaBound", "nodeName": "n0"}), b.pod("p", quota="q")])
    (uid,) = cache.task_job
    cache.assume(uid, "n0")  # this replica's extender bound it inline; the API never showed it
    loop = BinderLoop(cache, Scheduler(default_policy()), writer=None, is_leader=lambda: False)  # type: ignore[arg-type]
    await one_round(loop)
    assert uid in cache.assumed and cache.nodes["n0"].has_task(uid)  # not expired yet
    clock[0] = NOW + 31
    await one_round(loop)
    assert cache.assumed == {}
    assert not cache.nodes["n0"].has_task(uid)
    job = cache.jobs[cache.task_job[uid]]
    assert job.tasks[uid].status is TaskStatus.ALLOCATED_TO_QUOTA and not job.tasks[uid].node  # pending again


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


async def test_a_replica_that_stops_leading_clears_the_leaders_gauges_and_verdicts() -> None:
    """``big`` holds n0–n3 after three cycles of this replica's leadership; then the Lease goes
    to another replica. This one must not go on exporting one hold of four nodes, nor pending
    jobs and quotas by phase as its last cycle saw them (the new leader exports the true values;
    a sum or a max over replicas would count the hold twice, or keep it after it ended), and its
    /diagnose and filter replies must not quote its last cycle's verdicts."""
    async with LocalCluster(policy=hold_policy()) as cl:
        cl.apply(hold_objects())
        await cl.cycles(3)
        loop = cl.rt.loop
        assert loop is not None
        before = _samples(cl.rt.metrics.render().decode())
        assert (before["sky_gang_holds", ()], before["sky_held_nodes", ()]) == (1.0, 4.0)
        assert before["sky_pending_jobs", (("reason", "HoldingNodes"),)] == 1.0
        assert loop.verdicts
        loop.is_leader = lambda: False
        await one_round(loop)
        after = _samples(cl.rt.metrics.render().decode())
        assert (after["sky_gang_holds", ()], after["sky_held_nodes", ()]) == (0.0, 0.0)
        assert not [k for k in after if k[0] in ("sky_pending_jobs", "sky_quotas")]
        assert loop.verdicts == {}
