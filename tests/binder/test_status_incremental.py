"""The status reconciler between resyncs: only what the cache marked changed is looked at, and
that is enough to follow a job from Inqueue to Running to Completed (and its queue's counts)."""

from __future__ import annotations

from typing import Any

import pytest

from extender import wellknown
from extender.simulate.cluster import LocalCluster
from tests import builders as b

pytestmark = pytest.mark.anyio


def _status(cl: LocalCluster, plural: str, name: str, ns: str | None = None) -> dict[str, Any]:
    return dict(cl.emulator.get(wellknown.API_VERSION, plural, name, ns).get("status") or {})


def _set_pod(cl: LocalCluster, name: str, **status: Any) -> None:
    pod = cl.emulator.get("v1", "pods", name, "default")
    if "node" in status:
        cl.emulator.bind("default", name, status.pop("node"))
        pod = cl.emulator.get("v1", "pods", name, "default")
    pod["status"] = {**pod["status"], **status}
    cl.emulator.update(pod, subresource="status")


async def test_a_job_is_followed_without_a_resync() -> None:
    async with LocalCluster() as cl:
        loop = cl.rt.loop
        assert loop is not None
        loop.statuses.resync = 3600.0  # no full pass after the first one in this test
        cl.apply([*b.seed_cluster(), b.queue("research"), *b.training_job("train", 2, hca=None)])
        await cl.cycle()
        await cl.cycle()
        assert _status(cl, wellknown.PODGROUPS, "train", "default")["phase"] == "Inqueue"
        assert (
            _status(cl, wellknown.QUEUES, "research")["pending"],
            _status(cl, wellknown.QUEUES, "research")["running"],
        ) == (1, 0)
        nodes = cl.quota_nodes()
        for i in range(2):
            _set_pod(cl, f"train-worker-{i}", node=nodes[f"q-train-{i}"], phase="Running")
        await cl.cycle()
        await cl.cycle()
        pg = _status(cl, wellknown.PODGROUPS, "train", "default")
        assert (pg["phase"], pg["running"], pg["boundQuotas"]) == ("Running", 2, 2)
        queue = _status(cl, wellknown.QUEUES, "research")
        assert (queue["running"], queue["pending"], queue["allocated"]["nvidia.com/gpu"]) == (1, 0, "2")
        for i in range(2):
            _set_pod(cl, f"train-worker-{i}", phase="Succeeded")
        await cl.cycle()
        await cl.cycle()
        pg = _status(cl, wellknown.PODGROUPS, "train", "default")
        assert (pg["phase"], pg["running"], pg["succeeded"]) == ("Completed", 0, 2)
        queue = _status(cl, wellknown.QUEUES, "research")
        assert (queue["running"], queue["pending"], queue.get("allocated")) == (0, 0, {}), queue
