"""KubeWriter against the emulator: the status of PodGroups, Queues and JobQueues, and the pool
Quotas it creates, updates and deletes with preconditions."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from extender import wellknown
from extender.emulator import Emulator
from extender.kube.errors import (
    NotFound,
)

from .writes import writer

pytestmark = pytest.mark.anyio


async def test_podgroup_status(emu: Emulator, api: Any, ns: str) -> None:
    emu.create(
        {
            "apiVersion": wellknown.API_VERSION,
            "kind": wellknown.KIND_PODGROUP,
            "metadata": {"name": "pg", "namespace": ns},
            "spec": {"minMember": 2},
        }
    )
    out = await writer(api).patch_podgroup_status(ns, "pg", lambda g: {"phase": "Running"})
    assert out["status"] == {"phase": "Running"} and out["spec"] == {"minMember": 2}
    with pytest.raises(NotFound):
        await writer(api).patch_podgroup_status(ns, "missing", lambda g: {"phase": "Running"})


async def test_queue_and_jobqueue_status(emu: Emulator, api: Any) -> None:
    name = f"q-{uuid.uuid4().hex[:6]}"
    emu.create({"apiVersion": wellknown.API_VERSION, "kind": wellknown.KIND_QUEUE, "metadata": {"name": name}})
    emu.create(
        {
            "apiVersion": wellknown.API_VERSION,
            "kind": wellknown.KIND_JOBQUEUE,
            "metadata": {"name": name},
            "spec": {"jobSelector": {}},
        }
    )
    w = writer(api)
    out = await w.update_queue_status(name, lambda q: {"running": 1, "pending": 0})
    assert out["status"] == {"running": 1, "pending": 0}
    out = await w.update_jobqueue_status(name, lambda q: {"runningJobs": 0})
    assert out["status"] == {"runningJobs": 0}


async def test_apply_quota_creates_updates_and_deletes_with_preconditions(emu: Emulator, api: Any) -> None:
    name = f"pool-{uuid.uuid4().hex[:6]}"
    body: dict[str, Any] = {
        "apiVersion": wellknown.API_VERSION,
        "kind": wellknown.KIND_QUOTA,
        "metadata": {"name": name, "labels": {"a": "1"}},
        "spec": {"queueName": "research", "request": {"nvidia.com/gpu": "8"}},
    }
    w = writer(api)
    created, wrote = await w.apply_quota(body)
    assert wrote and created["spec"] == body["spec"]
    again, wrote = await w.apply_quota(body)
    assert not wrote and again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    emu.update({**again, "metadata": {**again["metadata"], "labels": {"a": "1", "mine": "x"}}})
    changed = {**body, "spec": {**body["spec"], "request": {"nvidia.com/gpu": "4"}}}
    updated, wrote = await w.apply_quota(changed)
    assert wrote and updated["spec"]["request"] == {"nvidia.com/gpu": "4"}
    assert updated["metadata"]["labels"] == {"a": "1", "mine": "x"}  # others' labels are kept
    meta = updated["metadata"]
    # a stale resourceVersion (the quota changed since it was judged) deletes nothing
    assert not await w.delete_quota(name, uid=meta["uid"], resource_version=created["metadata"]["resourceVersion"])
    assert emu.try_get(wellknown.API_VERSION, wellknown.QUOTAS, name) is not None
    assert await w.delete_quota(name, uid=meta["uid"], resource_version=meta["resourceVersion"])
    assert emu.try_get(wellknown.API_VERSION, wellknown.QUOTAS, name) is None
    assert not await w.delete_quota(name, uid=meta["uid"], resource_version=meta["resourceVersion"])
