"""KubeWriter against the emulator: quota status writes (read-modify-write, stale copies,
conflicts, retries, timeouts, concurrent writers) and the declared API calls (what RBAC must
grant) checked against the emulator's journal. The other writes have a test_kube_writer_* each."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from extender import wellknown
from extender.emulator import Emulator
from extender.kube import client as kube_client
from extender.kube.calls import API_CALLS
from extender.kube.errors import (
    GiveUp,
    NotLeading,
    WriteConflict,
)
from extender.kube.writer import MIN_FENCED_WRITE, KubeWriter

from .writes import QUOTA_STATUS_PATH, bump, pod, quota, writer

pytestmark = pytest.mark.anyio


async def test_quota_status_read_modify_write(emu: Emulator, api: Any) -> None:
    name = quota(emu)
    w = writer(api)
    out = await w.update_quota_status(name, lambda q: {"phase": "QuotaBound", "nodeName": "n1"})
    assert out["status"] == {"phase": "QuotaBound", "nodeName": "n1"}
    assert (
        out["metadata"]["resourceVersion"]
        == emu.get(wellknown.API_VERSION, "quotas", name)["metadata"]["resourceVersion"]
    )
    rv = emu.resource_version
    same = await w.update_quota_status(name, lambda q: dict(q["status"]))  # equal status: no write
    none = await w.update_quota_status(name, lambda q: None)  # nothing to change: no write
    assert emu.resource_version == rv
    assert same["status"] == none["status"] == out["status"]


async def test_a_fenced_write_carries_the_fence_as_its_deadline_and_is_refused_past_it(emu: Emulator, api: Any) -> None:
    """``KubeWriter.fenced``: reads go as they are; a write carries the time the fence leaves as
    the API server's deadline (``?timeout=``), and with less than ``MIN_FENCED_WRITE`` left it is
    not sent (``NotLeading``) — the write a leader must not make once its lease may be lost."""
    name = quota(emu)
    left = [3.0]
    w = writer(api).fenced(lambda: left[0])
    emu.journal.clear()
    await w.update_quota_status(name, lambda q: {"phase": "QuotaBound", "nodeName": "n1"})
    sent = [(r.verb, r.query) for r in emu.journal.records() if r.name == name]
    assert sent == [("get", ""), ("update", "timeout=3000ms")]
    left[0] = MIN_FENCED_WRITE / 2
    rv = emu.resource_version
    with pytest.raises(NotLeading):
        await w.update_quota_status(name, lambda q: {"phase": "QuotaBound", "nodeName": "n2"})
    assert emu.resource_version == rv
    unfenced = await writer(api).update_quota_status(name, lambda q: {"phase": "QuotaBound", "nodeName": "n2"})
    assert unfenced["status"]["nodeName"] == "n2"  # the writer it was made from is not fenced


def _quota_calls(emu: Emulator, name: str) -> list[tuple[str, int]]:
    return [(r.verb, r.code) for r in emu.journal.records() if r.resource == "quotas" and r.name == name]


async def test_quota_status_from_an_up_to_date_copy_is_one_request(emu: Emulator, api: Any) -> None:
    name = quota(emu, {"phase": "QuotaEmpty"})
    seen = emu.get(wellknown.API_VERSION, "quotas", name)
    emu.journal.clear()
    out = await writer(api).update_quota_status(name, lambda q: {"phase": "QuotaBound", "nodeName": "n1"}, current=seen)
    assert _quota_calls(emu, name) == [("update", 200)]  # no read first
    assert out == emu.get(wellknown.API_VERSION, "quotas", name)
    assert out["status"] == {"phase": "QuotaBound", "nodeName": "n1"}
    assert seen["status"] == {"phase": "QuotaEmpty"}, "the caller's copy is not changed"


async def test_quota_status_from_a_stale_copy_is_refused_then_re_read(emu: Emulator, api: Any) -> None:
    name = quota(emu, {"tasks": ["default/a"]})
    stale = emu.get(wellknown.API_VERSION, "quotas", name)
    other = writer(api)
    await other.update_quota_status(name, lambda q: {"tasks": [*q["status"]["tasks"], "default/b"]})
    emu.journal.clear()

    def claim(q: dict[str, Any]) -> dict[str, Any]:
        return {"tasks": sorted({*q["status"]["tasks"], "default/c"})}

    # retries=1: the copy's round does not count against the fresh reads
    out = await writer(api, retries=1).update_quota_status(name, claim, current=stale)
    assert _quota_calls(emu, name) == [("update", 409), ("get", 200), ("update", 200)]
    assert out["status"] == {"tasks": ["default/a", "default/b", "default/c"]}, "the other write is kept"
    assert out == emu.get(wellknown.API_VERSION, "quotas", name)


async def test_nothing_to_write_is_decided_on_a_fresh_read_not_on_the_copy(emu: Emulator, api: Any) -> None:
    name = quota(emu, {"phase": "QuotaEmpty"})
    stale = emu.get(wellknown.API_VERSION, "quotas", name)
    await writer(api).update_quota_status(name, lambda q: {"phase": "QuotaBound", "nodeName": "n9"})
    emu.journal.clear()
    # by the copy the status is already what is wanted; the stored object says otherwise
    out = await writer(api).update_quota_status(name, lambda q: {"phase": "QuotaEmpty"}, current=stale)
    assert _quota_calls(emu, name) == [("get", 200), ("update", 200)]
    assert emu.get(wellknown.API_VERSION, "quotas", name)["status"] == out["status"] == {"phase": "QuotaEmpty"}
    emu.journal.clear()
    fresh = emu.get(wellknown.API_VERSION, "quotas", name)
    same = await writer(api).update_quota_status(name, lambda q: {"phase": "QuotaEmpty"}, current=fresh)
    assert _quota_calls(emu, name) == [("get", 200)] and same == fresh  # read, found equal, nothing written


async def test_quota_status_conflicts_are_re_read_and_re_applied(emu: Emulator, api: Any) -> None:
    name = quota(emu, {"n": 0})
    emu.faults.add("update", QUOTA_STATUS_PATH, code=409, count=2)
    calls = 0

    def mutate(q: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        return {"n": q["status"]["n"] + 1}

    out = await writer(api).update_quota_status(name, mutate)
    assert out["status"] == {"n": 1} and calls == 3


async def test_quota_status_gives_up_with_a_warning_event(emu: Emulator, api: Any) -> None:
    name = quota(emu)
    emu.faults.add("update", QUOTA_STATUS_PATH, code=409)
    with pytest.raises(WriteConflict):
        await writer(api, retries=3).update_quota_status(name, lambda q: {"phase": "QuotaBound"})
    events = [e for e in emu.list("v1", "events", namespace="default") if e["involvedObject"]["name"] == name]
    assert len(events) == 1
    ev = events[0]
    assert (ev["type"], ev["reason"], ev["involvedObject"]["kind"]) == ("Warning", "StatusUpdateConflict", "Quota")
    assert ev["involvedObject"]["uid"] == emu.get(wellknown.API_VERSION, "quotas", name)["metadata"]["uid"]


async def test_concurrent_writers_lose_no_update(emu: Emulator, api: Any) -> None:
    name = quota(emu, {})
    emu.faults.seed(7)
    emu.faults.add("update", QUOTA_STATUS_PATH, code=500, rate=0.2)
    emu.faults.add("get", "quotas", code=503, rate=0.1)
    other = kube_client.from_url(emu.url)
    try:
        a, b = writer(api, retries=100), writer(other, retries=100)

        async def hammer(w: KubeWriter, counter: str) -> None:
            for _ in range(15):
                await w.update_quota_status(name, bump(counter))
                await w.update_quota_status(name, bump("total"))

        await asyncio.gather(hammer(a, "a"), hammer(b, "b"))
    finally:
        await other.close()
    status = emu.get(wellknown.API_VERSION, "quotas", name)["status"]
    assert status == {"a": 15, "b": 15, "total": 30}
    conflicts = [r for r in emu.journal.records() if r.subresource == "status" and r.code == 409]
    assert conflicts, "the two writers really did race"


async def test_transient_failures_are_retried_then_given_up(emu: Emulator, api: Any) -> None:
    name = quota(emu)
    emu.faults.add("update", QUOTA_STATUS_PATH, code=503, count=2)
    emu.faults.add("get", "quotas", code=429, retry_after=0, count=1)
    out = await writer(api).update_quota_status(name, lambda q: {"phase": "QuotaBound"})
    assert out["status"] == {"phase": "QuotaBound"}
    emu.faults.add("get", "quotas", code=500)
    with pytest.raises(GiveUp) as err:
        await writer(api, retries=3).update_quota_status(name, lambda q: {"phase": "QuotaEmpty"})
    assert err.value.attempts == 3


async def test_a_write_that_landed_before_a_timeout_is_not_applied_twice(emu: Emulator, api: Any) -> None:
    name = quota(emu, {"tasks": []})
    # the first PUT is slow: the client times out, the server applies it anyway (and its answer,
    # a 504, is never read)
    emu.faults.add("update", QUOTA_STATUS_PATH, latency=5.0, code=504, after=True, count=1)

    def claim(q: dict[str, Any]) -> dict[str, Any]:  # a function of the current object: idempotent
        return {"tasks": sorted({*q["status"]["tasks"], "default/t1"})}

    out = await writer(api, request_timeout=0.3).update_quota_status(name, claim)
    stored = emu.get(wellknown.API_VERSION, "quotas", name)
    assert stored["status"] == out["status"] == {"tasks": ["default/t1"]}
    puts = [r.code for r in emu.journal.records() if r.subresource == "status"]
    assert puts == [504, 409], "the retry met its own landed write (409), re-read, and wrote nothing more"


async def test_declared_api_calls_are_exactly_the_ones_used(emu: Emulator, api: Any, ns: str) -> None:
    """The list RBAC is generated from: every method exercised, the journal must match it."""
    w = writer(api)
    q = quota(emu)
    p = pod(emu, ns)
    emu.create(
        {
            "apiVersion": wellknown.API_VERSION,
            "kind": wellknown.KIND_PODGROUP,
            "metadata": {"name": "pg", "namespace": ns},
            "spec": {},
        }
    )
    node = f"node-{uuid.uuid4().hex[:6]}"
    emu.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    qname = f"q-{uuid.uuid4().hex[:6]}"
    emu.create({"apiVersion": wellknown.API_VERSION, "kind": wellknown.KIND_QUEUE, "metadata": {"name": qname}})
    emu.create(
        {
            "apiVersion": wellknown.API_VERSION,
            "kind": wellknown.KIND_JOBQUEUE,
            "metadata": {"name": qname},
            "spec": {"jobSelector": {}},
        }
    )
    emu.journal.clear()
    await w.update_quota_status(q, lambda obj: {"phase": "QuotaBound"})
    await w.patch_podgroup_status(ns, "pg", lambda obj: {"phase": "Running"})
    await w.update_queue_status(qname, lambda obj: {"running": 0})
    await w.update_jobqueue_status(qname, lambda obj: {"runningJobs": 0})
    pool: dict[str, Any] = {
        "apiVersion": wellknown.API_VERSION,
        "kind": wellknown.KIND_QUOTA,
        "metadata": {"name": f"{qname}-p-0"},
        "spec": {"queueName": qname, "request": {"nvidia.com/gpu": "1"}},
    }
    await w.apply_quota(pool)
    made, _ = await w.apply_quota({**pool, "spec": {**pool["spec"], "request": {"nvidia.com/gpu": "2"}}})
    await w.delete_quota(
        made["metadata"]["name"], uid=made["metadata"]["uid"], resource_version=made["metadata"]["resourceVersion"]
    )
    await w.bind_pod(ns, "p", p["metadata"]["uid"], node)
    await w.patch_pod_annotations(ns, "p", {"a": "b"})
    assert (await w.get_pod(ns, "p") or {})["metadata"]["annotations"]["a"] == "b"
    assert await w.get_pod(ns, "gone") is None  # a 404 is an answer, not an error
    involved = {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": ns, "uid": p["metadata"]["uid"]}
    await w.post_event(involved, "Normal", "Test", "once")
    await w.post_event(involved, "Normal", "Test", "once")  # aggregated: a patch
    await w.apply_node_topology(node, {"net": {}})
    await w.apply_node_topology(node, {"net": {"ib": []}})
    await w.update_node_topology_status(node, {"observedAt": "2027-01-15T08:00:00Z", "agent": "roce/a"})
    await w.patch_node_labels(node, {"zone": "z"})
    lease = await w.create_lease(ns, "l", {"holderIdentity": "me"})
    await w.get_lease(ns, "l")
    await w.update_lease(lease)

    used = emu.journal.calls()
    assert used == {tuple(c) for c in API_CALLS}
    assert KubeWriter.API_CALLS is API_CALLS
    with pytest.raises(RuntimeError, match="not declared"):
        await w._call("delete", "", "v1", "pods", namespace=ns, name="p")
