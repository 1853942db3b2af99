"""A Quota changes while the binder's status write binding it is in flight: its request grows (an
operator edits spec.request), or it is deleted and re-created bigger. The write's PUT meets a 409;
the writer re-reads the object, and the loop's ``mutate`` must not write the placement judged for
the old request onto the new one (the node would hold more quota than it has, DESIGN §4
invariant 1): it skips the write (``same_spec``), and the next cycle plans the quota again."""

from __future__ import annotations

import asyncio

import pytest

from extender import wellknown
from extender.simulate.cluster import LocalCluster
from tests import builders as b
from tests.binder.invariant_monitor import Monitor

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("how", ["edit", "recreate"])
async def test_a_quota_grown_during_its_binding_write_is_not_bound_as_judged(how: str) -> None:
    async with LocalCluster() as cl:
        mon = Monitor(cl.emulator)
        cl.apply(
            [
                b.node("n0"),
                b.topology("n0", ["s0"]),
                # half of n0 is held by another quota
                b.quota("q-x", gpu=4, hca=None, status={"phase": "QuotaBound", "nodeName": "n0"}),
                b.pod("px", quota="q-x", gpu=4, hca=None, node="n0", phase="Running"),
                *b.training_job("g", 1, gpu=4, hca=1),
            ]
        )
        await cl.settle()
        slow = cl.emulator.faults.add("update", "quotas/status", name="q-g-0", latency=0.8, count=1)
        assert cl.rt.loop is not None
        cycle = asyncio.ensure_future(cl.rt.loop.run_cycle())
        for _ in range(400):
            if slow.hits:
                break
            await asyncio.sleep(0.005)
        assert slow.hits, "the binder never wrote q-g-0"
        q = cl.emulator.get(wellknown.API_VERSION, wellknown.QUOTAS, "q-g-0")
        if how == "edit":
            q["spec"]["request"][wellknown.RESOURCE_GPU] = "8"
            cl.emulator.update(q)
        else:
            cl.emulator.delete(wellknown.API_VERSION, wellknown.QUOTAS, "q-g-0")
            cl.apply([b.quota("q-g-0", gpu=8, hca=1)])
        await cycle
        await cl.settle()
        assert not mon.seen, f"quota nodes {cl.quota_nodes()}\n{mon.report()}"
