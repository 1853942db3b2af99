"""KubeWriter against the emulator: binding pods (idempotent, typed conflicts, no double binding),
their annotations, and Events (aggregated, never duplicated by a retry)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from extender import wellknown
from extender.emulator import Emulator
from extender.kube.errors import (
    BindConflict,
    NotFound,
)

from .writes import pod, writer

pytestmark = pytest.mark.anyio


async def test_bind_pod_is_idempotent_and_conflicts_are_typed(emu: Emulator, api: Any, ns: str) -> None:
    p = pod(emu, ns)
    uid = p["metadata"]["uid"]
    w = writer(api)
    status = await w.bind_pod(ns, "p", uid, "n1", {wellknown.ANNO_BIND_DECISION: "quota"})
    assert status["status"] == "Success"
    bound = emu.get("v1", "pods", "p", ns)
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["metadata"]["annotations"] == {wellknown.ANNO_BIND_DECISION: "quota"}
    again = await w.bind_pod(ns, "p", uid, "n1")  # kube-scheduler retried a bind that had succeeded
    assert again["status"] == "Success"
    with pytest.raises(BindConflict) as err:
        await w.bind_pod(ns, "p", uid, "n2")
    assert err.value.node == "n1"
    other = pod(emu, ns, "q")
    with pytest.raises(BindConflict):
        await w.bind_pod(ns, "q", "not-" + other["metadata"]["uid"], "n1")
    with pytest.raises(NotFound):
        await w.bind_pod(ns, "gone", "x", "n1")


async def test_bind_retried_after_a_lost_answer_is_success(emu: Emulator, api: Any, ns: str) -> None:
    p = pod(emu, ns)
    emu.faults.add("bind", code=500, after=True, count=1)
    status = await writer(api).bind_pod(ns, "p", p["metadata"]["uid"], "n1")
    assert status["status"] == "Success"
    binds = [r.code for r in emu.journal.records() if r.subresource == "binding"]
    assert binds == [500, 409]


async def test_no_double_binding_when_two_binders_race(emu: Emulator, api: Any, ns: str) -> None:
    for i in range(10):
        p = pod(emu, ns, f"p{i}")
        results = await asyncio.gather(
            writer(api).bind_pod(ns, f"p{i}", p["metadata"]["uid"], "n1"),
            writer(api).bind_pod(ns, f"p{i}", p["metadata"]["uid"], "n2"),
            return_exceptions=True,
        )
        ok = [r for r in results if isinstance(r, dict)]
        conflicts = [r for r in results if isinstance(r, BindConflict)]
        assert len(ok) == 1 and len(conflicts) == 1
        assert conflicts[0].node == emu.get("v1", "pods", f"p{i}", ns)["spec"]["nodeName"]


async def test_patch_pod_annotations(emu: Emulator, api: Any, ns: str) -> None:
    p = pod(emu, ns)
    w = writer(api)
    out = await w.patch_pod_annotations(ns, "p", {wellknown.ANNO_QUOTA_NAME: "q1", wellknown.ANNO_QUOTA_NODE: "n1"})
    assert out["metadata"]["annotations"] == {wellknown.ANNO_QUOTA_NAME: "q1", wellknown.ANNO_QUOTA_NODE: "n1"}
    out = await w.patch_pod_annotations(ns, "p", {wellknown.ANNO_QUOTA_NODE: None}, uid=p["metadata"]["uid"])
    assert out["metadata"]["annotations"] == {wellknown.ANNO_QUOTA_NAME: "q1"}
    emu.delete("v1", "pods", "p", ns)
    pod(emu, ns)  # same name, new uid
    with pytest.raises(NotFound):
        await w.patch_pod_annotations(ns, "p", {"a": "b"}, uid=p["metadata"]["uid"])


async def test_events_are_aggregated(emu: Emulator, api: Any, ns: str) -> None:
    p = pod(emu, ns)
    involved = {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": ns, "uid": p["metadata"]["uid"]}
    w = writer(api)
    first = await w.post_event(involved, "Warning", "FailedScheduling", "0/8 nodes: quota q1 is full")
    again = await w.post_event(involved, "Warning", "FailedScheduling", "0/8 nodes: quota q1 is full")
    other = await w.post_event(involved, "Normal", "Scheduled", "bound to n1")
    events = {e["metadata"]["name"]: e for e in emu.list("v1", "events", namespace=ns)}
    assert set(events) == {first["metadata"]["name"], other["metadata"]["name"]}
    assert again["metadata"]["name"] == first["metadata"]["name"]
    agg = events[first["metadata"]["name"]]
    assert agg["count"] == 2 and agg["source"] == {"component": wellknown.COMPONENT}
    assert agg["involvedObject"] == involved
    emu.delete("v1", "events", first["metadata"]["name"], ns)
    fresh = await w.post_event(involved, "Warning", "FailedScheduling", "0/8 nodes: quota q1 is full")
    assert fresh["count"] == 1 and fresh["metadata"]["name"] != first["metadata"]["name"]


async def test_event_create_retried_after_a_lost_answer_is_not_duplicated(emu: Emulator, api: Any, ns: str) -> None:
    emu.faults.add("create", "events", code=503, after=True, count=1)
    involved = {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": ns, "uid": "u"}
    await writer(api).post_event(involved, "Normal", "Scheduled", "bound")
    assert len(emu.list("v1", "events", namespace=ns)) == 1
