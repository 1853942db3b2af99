"""What the binder loop of a replica that does not lead still does: its cache forgets what has
expired (``BinderLoop.follow``), since no cycle of its own runs to do it."""

from __future__ import annotations

import asyncio

import pytest

from extender.binder.loop import BinderLoop
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.model.task import TaskStatus
from extender.scheduler import Scheduler
from tests import builders as b

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
