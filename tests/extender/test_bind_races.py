"""Binds whose quota bindings race on one node: two inline binds (single-pod jobs whose quotas
are not bound yet), sent together as kube-scheduler's parallel binding cycles send them, and an
inline bind while a binder cycle's write binding a gang's quota there is in flight. Each judges
the node's quota room on the cache; the other's binding must count there from the moment it was
decided (``extender/cache/bindings.py``), else both land and Σ request of the quotas bound to the
node exceeds its allocatable (DESIGN §4 invariant 1). And a pod whose quota's binding is still
being written must wait for it (invariant 2). The invariants are checked after every write the
emulator commits (``tests/binder/invariant_monitor.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from extender.emulator.faults import Fault
from tests import builders as b
from tests.binder.invariant_monitor import Monitor
from tests.extender.harness import Harness, harness

pytestmark = pytest.mark.anyio

# one node of 8 GPUs; quota qa of 8 GPUs and qb of 4, both unbound; two lone pods of 4 GPUs claiming them
TWO_LONE_PODS = [
    b.node("n0"),
    b.quota("qa", gpu=8, hca=None),
    b.quota("qb", gpu=4, hca=None),
    b.pod("a", quota="qa", gpu=4, hca=None),
    b.pod("b", quota="qb", gpu=4, hca=None),
]


async def _bind(h: Harness, name: str, node: str) -> str:
    """kube-scheduler's bind of pod ``name`` to ``node``: the extender's Error ("" when bound)."""
    pod = h.pod(name)
    args = {"PodName": name, "PodNamespace": "default", "PodUID": pod["metadata"]["uid"], "Node": node}
    return str((await h.post("bind", args)).json()["Error"])


async def _hit(fault: Fault) -> None:
    """Wait until the slowed write has been sent (it is in flight now)."""
    for _ in range(400):
        if fault.hits:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the write the fault slows was never sent")


async def test_a_slow_inline_bind_keeps_its_room_from_the_next(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        mon = Monitor(h.emulator)
        h.apply(TWO_LONE_PODS)
        await h.cl.settle()
        # the first quota binding is slow to answer (the API is busy): the second bind runs meanwhile
        slow = h.emulator.faults.add("update", "quotas/status", name="qa", latency=0.5, count=1)
        first = asyncio.ensure_future(_bind(h, "a", "n0"))
        await _hit(slow)
        second = await _bind(h, "b", "n0")
        assert await first == "" and second != "", second  # the first binds; the second is told why not
        await h.cl.settle()
        assert not mon.seen, mon.report()


async def test_two_inline_binds_sent_together_never_overcommit_a_node(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        mon = Monitor(h.emulator)
        h.apply(TWO_LONE_PODS)
        await h.cl.settle()
        errors = await asyncio.gather(_bind(h, "a", "n0"), _bind(h, "b", "n0"))
        assert errors.count("") == 1, errors  # one of them binds, the other is told why not
        await h.cl.settle()
        assert not mon.seen, mon.report()


async def test_an_inline_bind_during_a_binder_write_keeps_off_its_room(tmp_path: Path) -> None:
    """The binder planned q-t-0 → n0 and its status write is in flight (a slow API); kube-scheduler
    binds a lone pod inline onto n0 meanwhile: the extender must see n0's room taken."""
    async with harness(tmp_path) as h:
        mon = Monitor(h.emulator)
        objs: list[dict[str, Any]] = [b.node("n0"), b.topology("n0", ["s0"]), *b.training_job("t", 1, gpu=8, hca=1)]
        h.apply([*objs, b.quota("qa", gpu=4, hca=None), b.pod("a", quota="qa", gpu=4, hca=None)])
        await h.cl.settle()
        slow = h.emulator.faults.add("update", "quotas/status", name="q-t-0", latency=0.6, count=1)
        cycle = asyncio.ensure_future(h.cycle())
        await _hit(slow)
        assert await _bind(h, "a", "n0") != ""
        await cycle
        await h.cl.settle()
        assert h.cl.quota_nodes()["q-t-0"] == "n0"
        assert not mon.seen, mon.report()


@pytest.mark.parametrize("workers", [1, 2])
async def test_no_pod_goes_to_a_node_before_the_api_shows_its_quota_bound_there(tmp_path: Path, workers: int) -> None:
    """The binder's write binding a gang's quota is in flight (its room already counts in the
    cache): the gang's pods wait — the filter passes no node, a bind is refused — until the API
    shows the binding, so no instant has a pod on a node its quota is not bound to (invariant 2);
    then they bind."""
    async with harness(tmp_path) as h:
        mon = Monitor(h.emulator)
        h.apply([b.node("n0"), b.node("n1"), *(b.topology(n, ["s0"]) for n in ("n0", "n1"))])
        h.apply(b.training_job("t", workers, gpu=8, hca=1))
        await h.cl.settle()
        slow = h.emulator.faults.add("update", "quotas/status", name="q-t-0", latency=0.8, count=1)
        cycle = asyncio.ensure_future(h.cycle())
        await _hit(slow)
        pod = h.pod("t-worker-0")
        reply = (await h.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["n0", "n1"]})).json()
        assert reply["NodeNames"] == []
        assert all("is being written" in why for why in reply["FailedAndUnresolvableNodes"].values()), reply
        error = await _bind(h, "t-worker-0", "n0")
        assert "is being written" in error, error
        await cycle
        await h.cl.settle()
        assert h.cl.quota_nodes()["q-t-0"] == "n0"
        assert await _bind(h, "t-worker-0", "n0") == ""
        assert not mon.seen, mon.report()
