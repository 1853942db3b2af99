"""Binds whose quota bindings race on one node: two inline binds (single-pod jobs whose quotas
are not bound yet), sent together as kube-scheduler's parallel binding cycles send them, and an
inline bind while a binder cycle's write binding a gang's quota there is in flight. Each judges
the node's quota room on the cache; the other's binding must count there from the moment it was
decided (``extender/cache/bindings.py``), else both land and Σ request of the quotas bound to the
node exceeds its allocatable (DESIGN §4 invariant 1)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from extender import wellknown
from extender.model.resources import Resource
from tests import builders as b
from tests.binder.invariant_monitor import Monitor
from tests.extender.harness import Harness, harness

pytestmark = pytest.mark.anyio


def _bind_args(h: Harness, name: str, node: str) -> dict[str, Any]:
    pod = h.pod(name)
    return {"PodName": name, "PodNamespace": "default", "PodUID": pod["metadata"]["uid"], "Node": node}


def _per_node(h: Harness) -> dict[str, Resource]:
    out: dict[str, Resource] = {}
    for q in h.emulator.list(wellknown.API_VERSION, wellknown.QUOTAS):
        node = (q.get("status") or {}).get("nodeName")
        if node:
            out.setdefault(node, Resource.empty()).iadd(Resource.from_list(q["spec"]["request"]))
    return out


async def test_a_slow_inline_bind_keeps_its_room_from_the_next(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        # one node of 8 GPUs; quota qa of 8 GPUs and qb of 4, both unbound; two lone pods of 4 GPUs claiming them
        h.apply(
            [
                b.node("n0"),
                b.quota("qa", gpu=8, hca=None),
                b.quota("qb", gpu=4, hca=None),
                b.pod("a", quota="qa", gpu=4, hca=None),
                b.pod("b", quota="qb", gpu=4, hca=None),
            ]
        )
        await h.cl.settle()
        # the first quota binding is slow to answer (the API is busy): the second bind runs meanwhile
        h.emulator.faults.add("update", "quotas/status", name="qa", latency=0.5, count=1)
        ra = asyncio.ensure_future(h.post("bind", _bind_args(h, "a", "n0")))
        await asyncio.sleep(0.15)
        rb = await h.post("bind", _bind_args(h, "b", "n0"))
        ea = (await ra).json()["Error"]
        eb = rb.json()["Error"]
        await h.cl.settle()
        alloc = Resource.from_list(h.emulator.get("v1", "nodes", "n0")["status"]["allocatable"])
        total = _per_node(h).get("n0", Resource.empty())
        assert total.less_equal(alloc), (
            f"invariant 1 broken on n0: quotas bound there ask {total} > allocatable {alloc}"
            f" (bind a: {ea!r}, bind b: {eb!r})"
        )


async def test_an_inline_bind_during_a_binder_write_keeps_off_its_room(tmp_path: Path) -> None:
    """The binder planned q-t-0 → n0 and its status write is in flight (a slow API); kube-scheduler
    binds a lone pod inline onto n0 meanwhile: the extender must see n0's room taken."""
    async with harness(tmp_path) as h:
        h.apply(
            [
                b.node("n0"),
                b.topology("n0", ["s0"]),
                *b.training_job("t", 1, gpu=8, hca=1),
                b.quota("qa", gpu=4, hca=None),
                b.pod("a", quota="qa", gpu=4, hca=None),
            ]
        )
        await h.cl.settle()
        fault = h.emulator.faults.add("update", "quotas/status", name="q-t-0", latency=0.6, count=1)
        cycle = asyncio.ensure_future(h.cycle())
        for _ in range(400):
            if fault.hits:
                break
            await asyncio.sleep(0.005)
        assert fault.hits, "the binder never wrote q-t-0"
        ea = (await h.post("bind", _bind_args(h, "a", "n0"))).json()["Error"]
        await cycle
        await h.cl.settle()
        nodes = h.cl.quota_nodes()
        alloc = Resource.from_list(h.emulator.get("v1", "nodes", "n0")["status"]["allocatable"])
        total = _per_node(h).get("n0", Resource.empty())
        assert total.less_equal(alloc), (
            f"invariant 1 broken on n0: quotas bound there ask {total} > allocatable {alloc}"
            f" (inline bind: {ea!r}; quota nodes {nodes})"
        )


async def test_two_inline_binds_sent_together_never_overcommit_a_node(tmp_path: Path) -> None:
    """The same as the first test without an injected latency: two binds sent together."""
    async with harness(tmp_path) as h:
        h.apply(
            [
                b.node("n0"),
                b.quota("qa", gpu=8, hca=None),
                b.quota("qb", gpu=4, hca=None),
                b.pod("a", quota="qa", gpu=4, hca=None),
                b.pod("b", quota="qb", gpu=4, hca=None),
            ]
        )
        await h.cl.settle()
        ra, rb = await asyncio.gather(
            h.post("bind", _bind_args(h, "a", "n0")), h.post("bind", _bind_args(h, "b", "n0"))
        )
        await h.cl.settle()
        alloc = Resource.from_list(h.emulator.get("v1", "nodes", "n0")["status"]["allocatable"])
        total = _per_node(h).get("n0", Resource.empty())
        assert total.less_equal(alloc), (
            f"invariant 1 broken on n0: quotas bound there ask {total} > allocatable {alloc}"
            f" (bind a: {ra.json()!r}, bind b: {rb.json()!r})"
        )


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
        fault = h.emulator.faults.add("update", "quotas/status", name="q-t-0", latency=0.8, count=1)
        cycle = asyncio.ensure_future(h.cycle())
        for _ in range(400):
            if fault.hits:
                break
            await asyncio.sleep(0.005)
        assert fault.hits, "the binder never wrote q-t-0"
        pod = h.pod("t-worker-0")
        reply = (await h.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["n0", "n1"]})).json()
        assert reply["NodeNames"] == []
        assert all("is being written" in why for why in reply["FailedAndUnresolvableNodes"].values()), reply
        error = (await h.post("bind", _bind_args(h, "t-worker-0", "n0"))).json()["Error"]
        assert "is being written" in error, error
        await cycle
        await h.cl.settle()
        assert h.cl.quota_nodes()["q-t-0"] == "n0"
        assert (await h.post("bind", _bind_args(h, "t-worker-0", "n0"))).json()["Error"] == ""
        assert not mon.seen, mon.report()
