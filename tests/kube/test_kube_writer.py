"""KubeWriter against the emulator: idempotence, retries, optimistic concurrency, typed errors,
and the declared API calls (what RBAC must grant) checked against the emulator's journal."""

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
    AlreadyExists,
    BindConflict,
    Conflict,
    EvictionBlocked,
    GiveUp,
    NotFound,
    WriteConflict,
)
from extender.kube.writer import KubeWriter

pytestmark = pytest.mark.anyio

QUOTA_STATUS_PATH = "quotas/status"


def writer(api: Any, **kw: Any) -> KubeWriter:
    kw.setdefault("backoff", 0.001)
    kw.setdefault("backoff_max", 0.01)
    kw.setdefault("request_timeout", 2.0)
    return KubeWriter(api, **kw)


def quota(emu: Emulator, status: dict[str, Any] | None = None) -> str:
    name = f"q-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": wellknown.API_VERSION,
        "kind": wellknown.KIND_QUOTA,
        "metadata": {"name": name},
        "spec": {"request": {"nvidia.com/gpu": "8"}},
    }
    if status is not None:
        body["status"] = status
    emu.create(body, with_status=status is not None)
    return name


def pod(emu: Emulator, ns: str, name: str = "p") -> dict[str, Any]:
    return emu.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "i"}], "schedulerName": "sky-scheduler"},
        }
    )


def bump(counter: str) -> Any:
    def mutate(q: dict[str, Any]) -> dict[str, Any]:
        status = dict(q.get("status") or {})
        status[counter] = int(status.get(counter, 0)) + 1
        return status

    return mutate


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
    body = {
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


async def test_evict_pod(emu: Emulator, api: Any, ns: str) -> None:
    p = pod(emu, ns)
    w = writer(api)
    out = await w.evict_pod(ns, "p", "Preempted by default/big on node n1", uid=p["metadata"]["uid"])
    assert out["status"] == "Success"
    assert emu.try_get("v1", "pods", "p", ns) is None
    events = emu.list("v1", "events", namespace=ns)
    assert [(e["reason"], e["message"]) for e in events] == [("Evicted", "Preempted by default/big on node n1")]
    assert (await w.evict_pod(ns, "p", "again"))["status"] == "Success"  # already gone
    pod(emu, ns, "guarded")
    emu.faults.add(
        "evict", code=429, message="Cannot evict pod as it would violate the pod's disruption budget.", retry_after=10
    )
    with pytest.raises(EvictionBlocked) as err:
        await w.evict_pod(ns, "guarded", "x")
    assert err.value.retry_after == 10
    assert emu.try_get("v1", "pods", "guarded", ns) is not None


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


async def test_apply_node_topology(emu: Emulator, api: Any) -> None:
    name = f"node-{uuid.uuid4().hex[:6]}"
    spec = {"net": {"roce": [{"name": "eth0", "switchName": "leaf1"}]}}
    w = writer(api)
    obj, changed = await w.apply_node_topology(name, spec, labels={"zone": "abc"})
    assert changed and obj["spec"] == spec and obj["metadata"]["labels"] == {"zone": "abc"}
    rv = emu.resource_version
    obj, changed = await w.apply_node_topology(name, spec, labels={"zone": "abc"})
    assert not changed and emu.resource_version == rv
    spec2 = {"net": {"roce": [{"name": "eth0", "switchName": "leaf2"}]}}
    emu.faults.add("update", "nodetopologies", code=409, count=1)
    obj, changed = await w.apply_node_topology(name, spec2)
    assert changed and obj["spec"] == spec2 and obj["metadata"]["labels"] == {"zone": "abc"}


async def test_node_topology_status_is_its_own_write_and_a_missing_object_is_skipped(emu: Emulator, api: Any) -> None:
    name = f"node-{uuid.uuid4().hex[:6]}"
    w = writer(api)
    assert await w.update_node_topology_status(name, {"observedAt": "2027-01-15T08:00:00Z"}) is None  # no object
    spec = {"net": {"roce": [{"name": "eth0", "switchName": "leaf1"}]}}
    await w.apply_node_topology(name, spec)
    emu.journal.clear()
    beat = {"observedAt": "2027-01-15T08:00:00Z", "agent": "roce/pod-a"}
    out = await w.update_node_topology_status(name, beat)
    assert out is not None and out["status"] == beat and out["spec"] == spec
    assert [(r.verb, r.resource, r.subresource) for r in emu.journal.records()] == [
        ("get", wellknown.NODETOPOLOGIES, ""),
        ("update", wellknown.NODETOPOLOGIES, "status"),
    ]
    stored = emu.get(wellknown.API_VERSION, wellknown.NODETOPOLOGIES, name)
    assert stored["status"] == beat and stored["spec"] == spec
    # the same heartbeat again (a retry): nothing written
    emu.journal.clear()
    await w.update_node_topology_status(name, beat)
    assert [r.verb for r in emu.journal.records()] == ["get"]
    # a conflict is re-read and re-applied; other status fields are kept
    emu.update({**stored, "status": {**beat, "other": "x"}}, subresource="status")
    emu.faults.add("update", "nodetopologies/status", code=409, count=1)
    out = await w.update_node_topology_status(name, {"observedAt": "2027-01-15T08:05:00Z"})
    assert out is not None and out["status"] == {
        "observedAt": "2027-01-15T08:05:00Z",
        "agent": "roce/pod-a",
        "other": "x",
    }
    # and a spec update does not touch it
    await w.apply_node_topology(name, {"net": {}})
    assert emu.get(wellknown.API_VERSION, wellknown.NODETOPOLOGIES, name)["status"] == out["status"]


async def test_node_topology_status_conflicts_give_up_without_an_event(emu: Emulator, api: Any) -> None:
    name = f"node-{uuid.uuid4().hex[:6]}"
    w = writer(api, retries=3)
    await w.apply_node_topology(name, {"net": {}})
    emu.faults.add("update", "nodetopologies/status", code=409)
    with pytest.raises(WriteConflict):
        await w.update_node_topology_status(name, {"observedAt": "2027-01-15T08:00:00Z"})
    assert not [r for r in emu.journal.records() if r.resource == "events"]  # the agents may not post Events


async def test_patch_node_labels(emu: Emulator, api: Any) -> None:
    name = f"node-{uuid.uuid4().hex[:6]}"
    emu.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"old": "x"}}})
    out = await writer(api).patch_node_labels(name, {wellknown.LABEL_ZONE: "0123abcd", "old": None})
    assert out["metadata"]["labels"] == {wellknown.LABEL_ZONE: "0123abcd"}
    with pytest.raises(NotFound):
        await writer(api).patch_node_labels("no-such-node", {"a": "b"})


async def test_lease_operations(emu: Emulator, api: Any, ns: str) -> None:
    w = writer(api)
    assert await w.get_lease(ns, "l") is None
    lease = await w.create_lease(ns, "l", {"holderIdentity": "a", "leaseDurationSeconds": 15})
    with pytest.raises(AlreadyExists):
        await w.create_lease(ns, "l", {})
    updated = await w.update_lease({**lease, "spec": {**lease["spec"], "holderIdentity": "b"}})
    assert updated["spec"]["holderIdentity"] == "b"
    with pytest.raises(Conflict):
        await w.update_lease({**lease, "spec": {"holderIdentity": "c"}})  # stale resourceVersion
    got = await w.get_lease(ns, "l")
    assert got is not None and got["spec"]["holderIdentity"] == "b"


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
    pool = {
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
    await w.evict_pod(ns, "p", "done")

    used = emu.journal.calls()
    assert used == {tuple(c) for c in API_CALLS}
    assert KubeWriter.API_CALLS is API_CALLS
    with pytest.raises(RuntimeError, match="not declared"):
        await w._call("delete", "", "v1", "pods", namespace=ns, name="p")
