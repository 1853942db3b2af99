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


def _policy() -> Policy:
    doc = yaml.safe_load(default_policy_text())
    doc["plugins"]["topology"].update(reserve_after_cycles=2)
    return load_policy_text(yaml.safe_dump(doc))


def _objects() -> list[Obj]:
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
    policy = _policy()
    async with LocalCluster(policy=policy) as cl:
        cl.apply(_objects())
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
        held = cl.rt.loop.scheduler.memory.holds["default/big"]
        assert list(held.nodes) == HELD
