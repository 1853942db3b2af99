"""List: label and field selectors, limit/continue pagination, list resourceVersion."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from extender.emulator import Emulator
from extender.kube.client import request
from tests.emulator.builders import call_unparsed, pod

pytestmark = pytest.mark.anyio


@pytest.fixture
def pods(emu: Emulator, ns: str) -> str:
    specs = [
        ("a0", {"app": "a", "tier": "web"}, {"nodeName": "n1", "schedulerName": "sky-scheduler"}, "Running"),
        ("a1", {"app": "a", "tier": "db"}, {"schedulerName": "sky-scheduler"}, "Pending"),
        ("b0", {"app": "b"}, {"nodeName": "n2"}, "Running"),
        ("c0", {"app": "c", "gpu": "true"}, {}, "Succeeded"),
    ]
    for name, labels, spec, phase in specs:
        body = pod(name, ns, labels=labels, **spec)
        body["status"] = {"phase": phase}
        emu.create(body, with_status=True)
    return ns


async def _names(core: Any, ns: str, **kw: Any) -> list[str]:
    return [p.metadata.name for p in (await core.list_namespaced_pod(ns, **kw)).items]


async def test_label_selectors_equality_and_set_based(api: Any, pods: str) -> None:
    core = client.CoreV1Api(api)
    assert await _names(core, pods, label_selector="app=a") == ["a0", "a1"]
    assert await _names(core, pods, label_selector="app==a,tier!=web") == ["a1"]
    assert await _names(core, pods, label_selector="app in (b, c)") == ["b0", "c0"]
    assert await _names(core, pods, label_selector="app notin (a)") == ["b0", "c0"]
    assert await _names(core, pods, label_selector="gpu") == ["c0"]
    assert await _names(core, pods, label_selector="!tier,app") == ["b0", "c0"]
    resp = await request(api, "GET", f"/api/v1/namespaces/{pods}/pods", query={"labelSelector": "app in (a"})
    assert resp.status == 400 and resp.json()["reason"] == "BadRequest"


async def test_field_selectors(api: Any, pods: str) -> None:
    core = client.CoreV1Api(api)
    assert await _names(core, pods, field_selector="spec.nodeName=") == ["a1", "c0"]
    assert await _names(core, pods, field_selector="spec.nodeName!=") == ["a0", "b0"]
    assert await _names(core, pods, field_selector="spec.nodeName==n2") == ["b0"]
    assert await _names(core, pods, field_selector="spec.schedulerName=sky-scheduler,status.phase=Pending") == ["a1"]
    assert await _names(core, pods, field_selector="status.phase!=Running") == ["a1", "c0"]
    assert await _names(core, pods, field_selector="metadata.name=c0") == ["c0"]
    assert [
        p.metadata.name
        for p in (await core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={pods}")).items
    ] == [
        "a0",
        "a1",
        "b0",
        "c0",
    ]
    resp = await request(api, "GET", f"/api/v1/namespaces/{pods}/pods", query={"fieldSelector": "spec.hostname=x"})
    assert resp.status == 400 and "field label not supported" in resp.json()["message"]


async def test_limit_and_continue_page_through_a_consistent_snapshot(emu: Emulator, api: Any, pods: str) -> None:
    core = client.CoreV1Api(api)
    first = await core.list_namespaced_pod(pods, limit=3)
    assert [p.metadata.name for p in first.items] == ["a0", "a1", "b0"]
    assert first.metadata._continue and first.metadata.remaining_item_count == 1
    # changes after the first page do not show in later pages (etcd serves them at the list's revision)
    emu.delete("v1", "pods", "c0", namespace=pods)
    emu.create(pod("d0", pods))
    second = await core.list_namespaced_pod(pods, limit=3, _continue=first.metadata._continue)
    assert [p.metadata.name for p in second.items] == ["c0"]
    assert second.metadata.to_dict()["_continue"] is None  # the stubs type it str
    assert second.metadata.resource_version == first.metadata.resource_version
    resp = await request(api, "GET", f"/api/v1/namespaces/{pods}/pods", query={"continue": "garbage!"})
    assert resp.status == 400


async def test_expired_continue_token_is_410(emu: Emulator, api: Any, pods: str) -> None:
    core = client.CoreV1Api(api)
    first = await core.list_namespaced_pod(pods, limit=1)
    token = first.metadata._continue
    rest = await core.list_namespaced_pod(pods, limit=10, _continue=token)  # consumes the snapshot
    assert len(rest.items) == 3
    resp = await request(api, "GET", f"/api/v1/namespaces/{pods}/pods", query={"continue": token})
    assert resp.status == 410 and resp.json()["reason"] == "Expired"


async def test_cluster_wide_list_of_namespaced_resource_and_list_kind(api: Any, pods: str) -> None:
    body = (await request(api, "GET", "/api/v1/pods", query={"labelSelector": "app=b"})).json()
    assert body["kind"] == "PodList" and body["apiVersion"] == "v1"
    found = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in body["items"]]
    assert (pods, "b0") in found  # other tests' namespaces may hold more
    assert all(i["metadata"]["labels"]["app"] == "b" for i in body["items"])
    assert found == sorted(found)
    assert int(body["metadata"]["resourceVersion"]) > 0


async def test_large_list_round_trips(emu: Emulator, api: Any, ns: str) -> None:
    for i in range(2000):
        emu.create(pod(f"p{i:05d}", ns, labels={"i": str(i % 7)}))
    items = await call_unparsed(client.CoreV1Api(api).list_namespaced_pod, ns)
    body = await items.json()
    assert len(body["items"]) == 2000
    assert body["items"][0]["metadata"]["name"] == "p00000" and body["items"][-1]["metadata"]["name"] == "p01999"
