"""An RDMA gang waiting for a storage mount point (issue 16 item 5) is told ``StorageNotReady`` —
not ``NoZoneFits`` — in ``/diagnose``, in its PodGroup condition and in the extender's filter
answer to kube-scheduler, read over HTTP from the running service on the emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from extender import wellknown
from tests import builders as b
from tests.extender.harness import harness

pytestmark = pytest.mark.anyio

Obj = dict[str, Any]


def _objects() -> list[Obj]:
    objs: list[Obj] = [b.queue("research")]
    for i in range(2):
        objs += [b.node(f"n{i}"), b.topology(f"n{i}", ["s1"])]
    job = b.training_job("train", 2, gpu=1, hca=1)
    for o in job:
        if o["kind"] == "Pod":  # the mount point no node has (no MountPoint object says it is ready)
            o["metadata"]["annotations"][wellknown.ANNO_REQUIRED_MOUNT_POINTS] = "fs1"
    return objs + job


async def test_a_topology_gang_without_its_mount_point_is_told_storage_not_ready_everywhere(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        h.apply(_objects())
        await h.cycle()
        await h.cycle()
        r = await h.ops("/diagnose/job/default/train")
        assert r.status_code == 200
        d = r.json()
        assert d["reason"] == "StorageNotReady", d
        assert d["message"] == "StorageNotReady(2 nodes: mount point fs1 not ready)", d
        pg = h.emulator.get(wellknown.API_VERSION, wellknown.PODGROUPS, "train", "default")
        (cond,) = [c for c in pg["status"]["conditions"] if c["type"] == "Unschedulable"]
        assert cond["reason"] == "StorageNotReady"
        pod = h.pod("train-worker-0")
        body = (await h.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["n0", "n1"]})).json()
        assert body["NodeNames"] == []
        # each node its own refusal (the job's summary above counts the nodes)
        why = "StorageNotReady(quota q-train-0 not bound: mount point fs1 not ready)"
        assert body["FailedAndUnresolvableNodes"] == {"n0": why, "n1": why}
