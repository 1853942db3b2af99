"""A gang's hold (issue 16 item 4) survives a leader change: the leader records it in the
PodGroup's ``status.hold``, and a new leader — a fresh process, its scheduler's memory empty —
continues it from there, with its start time. Through the real service runtime and binder loop
on the emulator over HTTP.

The cluster (as ``tests/core/test_holds.py``): leaf s1 = n0–n3, leaf s2 = n4–n5, 8 GPUs each;
one-pod jobs fill n0, n4 and n5, so the gang ``big`` of 4 whole-node workers fits nowhere, and
only s1 could ever hold it.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from extender import wellknown
from extender.conf import default_policy_text, load_policy_text
from extender.framework.policy import Policy
from extender.simulate.cluster import LocalCluster
from tests import builders as b

pytestmark = pytest.mark.anyio

Obj = dict[str, Any]
HELD = ["n0", "n1", "n2", "n3"]


def hold_policy() -> Policy:
    doc = yaml.safe_load(default_policy_text())
    doc["plugins"]["topology"].update(reserve_after_cycles=2)
    return load_policy_text(yaml.safe_dump(doc))


def hold_objects() -> list[Obj]:
    objs: list[Obj] = [b.queue("research")]
    for i in range(6):
        n = f"n{i}"
        objs += [b.node(n, index=i), b.topology(n, ["s1" if i < 4 else "s2"])]
    for n, gpu in {"n0": 8, "n4": 8, "n5": 4}.items():
        objs.append(b.quota(f"q-fill-{n}", gpu=gpu, hca=None, status={"phase": "QuotaBound", "nodeName": n}))
        objs.append(b.pod(f"fill-{n}", quota=f"q-fill-{n}", gpu=gpu, hca=None, node=n, phase="Running"))
    return objs + b.training_job("big", 4, gpu=8, hca=1)


def _recorded_hold(cl: LocalCluster) -> Obj | None:
    status = cl.emulator.get(wellknown.API_VERSION, wellknown.PODGROUPS, "big", namespace="default").get("status")
    hold: Obj | None = (status or {}).get("hold")
    return hold


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "status-lost"])
async def test_a_new_leader_continues_the_hold_its_predecessor_recorded(recorded: bool) -> None:
    policy = hold_policy()
    async with LocalCluster(policy=policy) as cl:
        cl.apply(hold_objects())
        await cl.cycles(3)  # the gang's plan failed twice: the third cycle holds
        hold = _recorded_hold(cl)
        assert hold is not None and hold["nodes"] == HELD and hold["since"]
        if not recorded:  # control: the same change of leader without the record
            group = cl.emulator.get(wellknown.API_VERSION, wellknown.PODGROUPS, "big", namespace="default")
            del group["status"]["hold"]
            cl.emulator.update(group, subresource="status")

        await cl.restart()  # the leader's process is gone; a fresh one leads from its first cycle
        cl.apply([b.quota("q-solo", gpu=8, hca=None), b.pod("solo", quota="q-solo", gpu=8, hca=None)])
        await cl.cycles(2)
        solo = cl.quota_nodes()["q-solo"]
        if not recorded:
            assert solo == "n1"  # nothing held: the one-pod job takes a node the gang needs
            return
        assert solo == ""  # n1–n3 are free, but held for the gang
        assert _recorded_hold(cl) == hold  # the same hold, the same start: hold_seconds counts on
        assert cl.rt.loop is not None
        held = cl.rt.loop.scheduler.memory.holds["default/big"]
        assert list(held.nodes) == HELD


# --- a job of one pod: no PodGroup, the hold is recorded on the quota its pod claims ------------
def _lone_objects() -> list[Obj]:
    """Leaf s1 = n0–n3, each with 4 of its 8 GPUs taken: the one-pod job ``big`` (8 GPUs, RDMA)
    fits no node, and holds n0 once it has waited."""
    objs: list[Obj] = [b.queue("research")]
    for i in range(4):
        n = f"n{i}"
        objs += [b.node(n, index=i), b.topology(n, ["s1"])]
        objs.append(b.quota(f"q-fill-{n}", gpu=4, hca=None, status={"phase": "QuotaBound", "nodeName": n}))
        objs.append(b.pod(f"fill-{n}", quota=f"q-fill-{n}", gpu=4, hca=None, node=n, phase="Running"))
    return [*objs, b.quota("q-big", gpu=8, hca=1), b.pod("big", quota="q-big", gpu=8, hca=1)]


def _quota_hold(cl: LocalCluster, name: str = "q-big") -> Obj | None:
    status = cl.emulator.get(wellknown.API_VERSION, wellknown.QUOTAS, name).get("status")
    hold: Obj | None = (status or {}).get("hold")
    return hold


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "status-lost"])
async def test_a_new_leader_continues_the_hold_of_a_job_of_one_pod(recorded: bool) -> None:
    async with LocalCluster(policy=hold_policy()) as cl:
        cl.apply(_lone_objects())
        await cl.cycles(3)
        hold = _quota_hold(cl)
        assert hold is not None and hold["job"] == "default/big" and hold["nodes"] == ["n0"] and hold["since"]
        if not recorded:
            quota = cl.emulator.get(wellknown.API_VERSION, wellknown.QUOTAS, "q-big")
            del quota["status"]["hold"]
            cl.emulator.update(quota, subresource="status")

        await cl.restart()
        cl.apply([b.quota("q-solo", gpu=4, hca=None), b.pod("solo", quota="q-solo", gpu=4, hca=None)])
        await cl.cycles(2)
        solo = cl.quota_nodes()["q-solo"]
        if not recorded:
            assert solo == "n0"  # nothing held: the 4-GPU job takes the node big waits for
            return
        assert solo == "n1"  # n0 has room, but it is held for big
        assert _quota_hold(cl) == hold
        assert cl.rt.loop is not None
        assert list(cl.rt.loop.scheduler.memory.holds["default/big"].nodes) == ["n0"]


@pytest.mark.parametrize("end", ["placed", "pod-deleted"])
async def test_the_record_goes_when_the_hold_ends(end: str) -> None:
    """No stale record is left for a next leader to honour: the hold ends when big is placed
    (the job on n0 ends and its quota goes) or when big's pod is deleted."""
    async with LocalCluster(policy=hold_policy()) as cl:
        cl.apply(_lone_objects())
        await cl.cycles(3)
        assert _quota_hold(cl) is not None
        if end == "placed":
            cl.emulator.delete("v1", "pods", "fill-n0", namespace="default")
            cl.emulator.delete(wellknown.API_VERSION, wellknown.QUOTAS, "q-fill-n0")
        else:
            cl.emulator.delete("v1", "pods", "big", namespace="default")
        await cl.cycles(2)
        assert _quota_hold(cl) is None
        assert cl.rt.loop is not None
        assert "default/big" not in cl.rt.loop.scheduler.memory.holds
        if end == "placed":
            assert cl.quota_nodes()["q-big"] == "n0"


async def test_a_gang_whose_binds_fail_to_be_written_keeps_its_hold_and_its_wait() -> None:
    """``big`` holds n0–n3; the job on n0 ends, and the cycle places ``big`` there — but the API
    refuses every quota status write of that cycle (500). ``big`` is not placed: it must keep its
    hold (its nodes, its start, its record in ``status.hold``, which the other replicas honour)
    and its count of failed cycles, not wait ``reserve_after_cycles`` anew with its nodes open to
    anyone. With the API well again, the next cycle places it and the hold ends."""
    async with LocalCluster(policy=hold_policy()) as cl:
        cl.apply(hold_objects())
        await cl.cycles(3)
        assert cl.rt.loop is not None
        memory = cl.rt.loop.scheduler.memory
        hold, waited = memory.holds["default/big"], memory.gang_waits["default/big"]
        record = _recorded_hold(cl)
        cl.emulator.delete("v1", "pods", "fill-n0", namespace="default")
        cl.emulator.delete(wellknown.API_VERSION, wellknown.QUOTAS, "q-fill-n0")
        fault = cl.emulator.faults.add("update", "quotas/status", code=500)
        report = await cl.cycle()
        assert any("q-big-" in f for f in report.failed)
        assert [cl.quota_nodes()[f"q-big-{i}"] for i in range(4)] == ["", "", "", ""]
        memory = cl.rt.loop.scheduler.memory
        assert memory.holds.get("default/big") == hold
        assert memory.gang_waits.get("default/big", 0) >= waited
        assert _recorded_hold(cl) == record
        cl.emulator.faults.remove(fault)
        await cl.cycle()
        assert sorted(cl.quota_nodes()[f"q-big-{i}"] for i in range(4)) == HELD
        assert "default/big" not in cl.rt.loop.scheduler.memory.holds
        assert _recorded_hold(cl) is None
