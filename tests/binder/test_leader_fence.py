"""Two replicas with leader election on one emulator. The leader A plans q-g1-0 → n0; its status
write is slow (the API would do it after 4 s) and its Lease renewals fail meanwhile, so A steps
down and B takes the Lease; B's first cycle binds the higher-priority gang g2 to n0. A's write must
not land after that (the quota's resourceVersion did not change, so its precondition would pass,
and n0 would hold 16 GPUs of quotas for 8: DESIGN §4 invariant 1): the leader's writes carry the
API server's own deadline, the time left of its lease (``KubeWriter.fenced``), and the emulator,
as kube-apiserver, does not do a write past its deadline."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from extender import wellknown
from extender.emulator import Emulator
from extender.kube import client as kube_client
from extender.service import Runtime
from extender.simulate.cluster import crd_directory, local_settings, strip_server_fields
from tests import builders as b
from tests.binder.invariant_monitor import Monitor

pytestmark = pytest.mark.anyio


def _settings(identity: str) -> Any:
    return local_settings(
        leader_elect=True,
        identity=identity,
        lease_namespace="default",
        lease_duration=1.5,
        renew_deadline=1.0,
        retry_period=0.25,
        binder_period=0.2,
    )


async def _replica(emu: Emulator, identity: str) -> tuple[Runtime, Any]:
    api = kube_client.from_url(emu.url, token=emu.token, user_agent=f"sky-scheduler/{identity}")
    rt = Runtime(_settings(identity), api=api)
    await rt.start(serve=False, run_loop=True)
    await rt.wait_synced()
    return rt, api


async def _until(cond: Any, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


def _gang(name: str, priority: int) -> list[dict[str, Any]]:
    objs = b.training_job(name, 1, gpu=8, hca=1)
    for o in objs:
        if o["kind"] == "Pod":
            o["spec"]["priority"] = priority
    return [strip_server_fields(o) for o in objs]


async def test_an_old_leaders_write_never_lands_after_the_new_leader_bound_the_node() -> None:
    emu = Emulator()
    await emu.start_async()
    emu.load_yaml(crd_directory())
    emu.load([strip_server_fields(o) for o in (b.node("n0"), b.topology("n0", ["s0"]))])
    mon = Monitor(emu)
    a, api_a = await _replica(emu, "a")
    rt_b = api_b = None
    try:
        await _until(a.is_leader)
        rt_b, api_b = await _replica(emu, "b")
        assert not rt_b.is_leader()
        slow = emu.faults.add("update", "quotas/status", user_agent="sky-scheduler/a", latency=4.0, count=1)
        emu.load(_gang("g1", 0))
        await _until(lambda: slow.hits > 0)  # A's cycle planned q-g1-0 → n0; the write hangs
        emu.faults.add("*", "leases", user_agent="sky-scheduler/a", code=503)  # A cannot renew
        emu.load(_gang("g2", 100))  # a more important gang arrives
        await _until(rt_b.is_leader, timeout=10)
        await asyncio.sleep(4.0)  # B's cycles run; A's write would land now (4 s)
        nodes = {
            q["metadata"]["name"]: (q.get("status") or {}).get("nodeName")
            for q in emu.list(wellknown.API_VERSION, wellknown.QUOTAS)
        }
        assert not mon.seen, f"quota nodes {nodes}\n{mon.report()}"
    finally:
        for rt in (a, rt_b):
            if rt is not None:
                await rt.stop()
        for api in (api_a, api_b):
            if api is not None:
                await kube_client.close(api)
        await emu.stop_async()
