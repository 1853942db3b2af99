"""The binder writes the releases of a cycle before the binds that use their room (invariant 1
at every instant on the API objects): the default policy gives an idle quota back before hop ②
plans (``release_idle_quota``), so a gang may be bound in the room it freed in the same cycle.

Every instant is checked on the quotas' watch stream (the order every client sees): a watch is
open from before the cycle and its events are replayed one by one."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import pytest

from extender import wellknown
from extender.binder.plan import QuotaStatusWrite, after_freeing
from extender.emulator.selection import Selection
from extender.emulator.watch import Watcher
from extender.model.resources import Resource
from extender.simulate.cluster import LocalCluster
from tests import builders as b

pytestmark = pytest.mark.anyio

GPU_PER_NODE = 8000  # milli-GPUs


def _objects() -> list[dict[str, Any]]:
    """Leaf s0: n0, n1; leaf s1: n2. 4 GPUs of n1 are held by done-0, an idle quota the scheduler
    bound; a gang of four 4-GPU workers fits s0 whole only once done-0 is released."""
    objs: list[dict[str, Any]] = []
    for i, leaf in enumerate(["s0", "s0", "s1"]):
        objs += [b.node(f"n{i}"), b.topology(f"n{i}", [leaf])]
    objs.append(b.quota("done-0", queue="other", gpu=4, hca=None, status={"phase": "QuotaBound", "nodeName": "n1"}))
    return objs + b.training_job("big", 4, gpu=4)


def _watch(cl: LocalCluster) -> Watcher:
    rt = cl.emulator.resource(wellknown.API_VERSION, wellknown.QUOTAS)
    return cl.emulator.store.watch(rt, Selection(), asyncio.get_running_loop(), resource_version="0")


async def _over_commits(w: Watcher) -> list[dict[str, int]]:
    """Replay the watch: after each event, the nodes whose bound quotas exceed 8 GPUs."""
    await asyncio.sleep(0)  # the watcher's items are delivered through the loop
    quotas: dict[str, dict[str, Any]] = {}
    broken = []
    while not w.queue.empty():
        item = w.queue.get_nowait()
        if item.obj is None or item.type not in ("ADDED", "MODIFIED", "DELETED"):
            continue
        name = item.obj["metadata"]["name"]
        if item.type == "DELETED":
            quotas.pop(name, None)
        else:
            quotas[name] = item.obj
        on: defaultdict[str, int] = defaultdict(int)
        for q in quotas.values():
            node = (q.get("status") or {}).get("nodeName")
            if node:
                on[node] += Resource.from_list(q["spec"]["request"]).get(wellknown.RESOURCE_GPU)
        over = {n: v for n, v in on.items() if v > GPU_PER_NODE}
        if over:
            broken.append(over)
    w.stop()
    return broken


async def test_a_gang_bound_in_the_room_an_idle_quota_freed_is_written_after_the_release() -> None:
    """done-0's release is slow to land (200 ms of latency): the binds onto n1 wait for it."""
    async with LocalCluster() as cl:
        cl.apply(_objects())
        await cl.settle()
        w = _watch(cl)
        cl.emulator.faults.add("update", "quotas/status", name="done-0", latency=0.2)
        await cl.cycle()
        assert await _over_commits(w) == []
        nodes = cl.quota_nodes()
        assert nodes["done-0"] == ""
        assert sorted(nodes[f"q-big-{i}"] for i in range(4)) == ["n0", "n0", "n1", "n1"]


async def test_a_gang_whose_release_failed_waits_whole_for_the_next_cycle() -> None:
    """done-0's release fails (the API answers 500 to every try this cycle): the binds onto n1
    are not written, and neither are the gang's binds onto n0 (else two of its quotas would hold
    n0's room for a gang whose pods hop ③ keeps back until all four are bound); the next cycle,
    with the API well again, binds the whole gang in s0 — and no instant shows n1 over-committed."""
    async with LocalCluster() as cl:
        cl.apply(_objects())
        await cl.settle()
        w = _watch(cl)
        fault = cl.emulator.faults.add("update", "quotas/status", name="done-0", code=500)
        report = await cl.cycle()
        nodes = cl.quota_nodes()
        assert nodes["done-0"] == "n1"
        assert [nodes[f"q-big-{i}"] for i in range(4)] == ["", "", "", ""]
        assert any("done-0" in f for f in report.failed)
        for i in range(4):  # nor is any of its pods told a node
            pod = cl.emulator.get("v1", "pods", f"big-worker-{i}", namespace="default")
            assert wellknown.ANNO_QUOTA_NODE not in (pod["metadata"].get("annotations") or {})
        cl.emulator.faults.remove(fault)
        await cl.cycle()
        assert await _over_commits(w) == []
        nodes = cl.quota_nodes()
        assert nodes["done-0"] == ""
        assert sorted(nodes[f"q-big-{i}"] for i in range(4)) == ["n0", "n0", "n1", "n1"]


def _write(name: str, *, frees: str = "", takes: str = "", gang: str = "") -> QuotaStatusWrite:
    return QuotaStatusWrite(name, {}, False, frees, takes, gang)


def test_after_a_failed_release_the_binds_of_the_gang_it_blocks_wait_and_other_gangs_go() -> None:
    freeing = [_write("done-0", frees="n1"), _write("done-1", frees="n5")]
    rest = [
        _write("q-a-0", takes="n0", gang="default/a"),
        _write("q-a-1", takes="n1", gang="default/a"),  # onto the node done-0 was to free
        _write("q-b-0", takes="n2", gang="default/b"),
        _write("q-c-0", takes="n5", gang="default/c"),  # onto the node done-1 freed
        _write("q-idle"),  # a status-only write
    ]
    ready, waiting = after_freeing(rest, freeing, {"done-0"})
    assert [w.name for w in waiting] == ["q-a-0", "q-a-1"]
    assert [w.name for w in ready] == ["q-b-0", "q-c-0", "q-idle"]
    # a gang whose own move failed waits whole too
    moved = [_write("q-d-0", frees="n7", takes="n8", gang="default/d")]
    ready, waiting = after_freeing([_write("q-d-1", takes="n9", gang="default/d"), *rest], moved, {"q-d-0"})
    assert [w.name for w in waiting] == ["q-d-1"]
