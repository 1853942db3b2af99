"""Watch: from a resourceVersion, bookmarks, timeouts, 410 as an ERROR event, selector transitions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import orjson
import pytest
from kubernetes_asyncio import client, watch

from extender.emulator import Emulator
from extender.kube import client as kube_client
from tests.emulator.builders import call_raw, pod, unique, widget_crd
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def raw_watch(api: Any, path: str, query: dict[str, str]) -> AsyncIterator[Any]:
    """The watch response itself, to read the newline-delimited events byte for byte."""
    resp = await api.call_api(
        path, "GET", query_params=list(query.items()), auth_settings=["BearerToken"], _preload_content=False
    )
    try:
        yield resp
    finally:
        resp.release()


async def next_event(resp: Any) -> dict[str, Any] | None:
    line = await resp.content.readline()
    if not line:
        return None
    event: dict[str, Any] = orjson.loads(line)
    return event


def _summary(ev: dict[str, Any]) -> tuple[str, str]:
    return ev["type"], ev["raw_object"]["metadata"]["name"]


END = "zz-end"
"""Tests create this object last and stop watching when it arrives (instead of waiting a timeout)."""


def _is_end(ev: dict[str, Any]) -> bool:
    return bool(ev["raw_object"]["metadata"]["name"] == END)


async def test_watch_from_a_list_resource_version_sees_only_later_events(emu: Emulator, api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    await call_raw(core.create_namespaced_pod, ns, pod("before", ns))
    rv = (await core.list_namespaced_pod(ns)).metadata.resource_version
    await call_raw(core.create_namespaced_pod, ns, pod("p", ns))
    await core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"x": "1"}}})
    await core.delete_namespaced_pod("p", ns)
    await call_raw(core.create_namespaced_pod, ns, pod(END, ns))
    seen: list[tuple[str, str, int]] = []
    with anyio.fail_after(10):
        async with watch.Watch() as w:
            async for ev in w.stream(core.list_namespaced_pod, ns, resource_version=rv):
                if _is_end(ev):
                    break
                seen.append((*_summary(ev), int(ev["raw_object"]["metadata"]["resourceVersion"])))
    assert [s[:2] for s in seen] == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]
    rvs = [s[2] for s in seen]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


@pytest.mark.parametrize("spelling", ["true", "1", "True"])
async def test_watch_without_resource_version_starts_with_synthetic_added(
    emu: Emulator, api: Any, ns: str, spelling: str
) -> None:
    emu.create(pod("a", ns))
    emu.create(pod("b", ns))
    for rv in ({}, {"resourceVersion": "0"}):
        async with raw_watch(api, f"/api/v1/namespaces/{ns}/pods", {"watch": spelling, **rv}) as resp:
            assert resp.status == 200
            events = [await next_event(resp), await next_event(resp)]
            emu.create(pod(unique("c"), ns))
            events.append(await next_event(resp))
        assert [(e["type"], e["object"]["metadata"]["name"][:1]) for e in events if e] == [
            ("ADDED", "a"),
            ("ADDED", "b"),
            ("ADDED", "c"),
        ]


async def test_bookmarks_only_when_allowed_and_timeout_closes_the_stream(emu: Emulator, api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    rv = (await core.list_namespaced_pod(ns)).metadata.resource_version
    seen: dict[bool, list[dict[str, Any]]] = {True: [], False: []}

    async def consume(bookmarks: bool) -> None:
        async with watch.Watch() as w:
            kw = {"allow_watch_bookmarks": True} if bookmarks else {}
            async for ev in w.stream(core.list_namespaced_pod, ns, resource_version=rv, timeout_seconds=1, **kw):
                seen[bookmarks].append(ev)

    with anyio.fail_after(10):  # both streams end by themselves: timeoutSeconds
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume, True)
            tg.start_soon(consume, False)
    assert seen[True] and {ev["type"] for ev in seen[True]} == {"BOOKMARK"}
    for ev in seen[True]:
        obj = ev["raw_object"]
        assert obj["kind"] == "Pod" and int(obj["metadata"]["resourceVersion"]) >= int(rv)
    assert seen[False] == []


async def test_too_old_resource_version_is_an_error_event_with_410() -> None:
    async with Emulator(history_size=3) as emu:
        api = kube_client.from_url(emu.url)
        try:
            core = client.CoreV1Api(api)
            start = (await core.list_namespaced_config_map("default")).metadata.resource_version
            for i in range(5):
                await call_raw(core.create_namespaced_config_map, "default", {"metadata": {"name": f"c{i}"}})
            async with raw_watch(
                api, "/api/v1/namespaces/default/configmaps", {"watch": "true", "resourceVersion": start}
            ) as resp:
                assert resp.status == 200
                ev = await next_event(resp)
                assert await next_event(resp) is None  # and the server closed the stream
            assert ev is not None and ev["type"] == "ERROR"
            assert ev["object"]["kind"] == "Status" and ev["object"]["code"] == 410
            assert ev["object"]["reason"] == "Expired"
            # kubernetes-asyncio turns it into an ApiException(410) (with timeout_seconds: no silent retry)
            with pytest.raises(client.ApiException) as err:
                async with watch.Watch() as w:
                    async for _ in w.stream(
                        core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=1
                    ):
                        pass
            assert err.value.status == 410
            # a recent enough version still works
            recent = str(emu.resource_version - 2)
            async with raw_watch(
                api, "/api/v1/namespaces/default/configmaps", {"watch": "1", "resourceVersion": recent}
            ) as resp:
                ev = await next_event(resp)
            assert ev is not None and ev["type"] == "ADDED"
        finally:
            await api.close()


async def test_selector_transitions_are_added_and_deleted(emu: Emulator, api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    rv = (await core.list_namespaced_pod(ns)).metadata.resource_version
    emu.create(pod("p", ns, labels={"app": "a"}))
    emu.patch("v1", "pods", "p", {"metadata": {"annotations": {"k": "v"}}}, namespace=ns)  # still matches
    emu.patch("v1", "pods", "p", {"metadata": {"labels": {"app": "b"}}}, namespace=ns)  # stops matching
    emu.patch("v1", "pods", "p", {"metadata": {"annotations": {"k": "w"}}}, namespace=ns)  # invisible
    emu.patch("v1", "pods", "p", {"metadata": {"labels": {"app": "a"}}}, namespace=ns)  # matches again
    emu.delete("v1", "pods", "p", namespace=ns)
    emu.create(pod("other", ns, labels={"app": "b"}))
    emu.create(pod(END, ns, labels={"app": "a"}))
    seen = []
    with anyio.fail_after(10):
        async with watch.Watch() as w:
            async for ev in w.stream(core.list_namespaced_pod, ns, label_selector="app=a", resource_version=rv):
                if _is_end(ev):
                    break
                seen.append((ev["type"], ev["raw_object"]["metadata"]["labels"]["app"]))
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "b"), ("ADDED", "a"), ("DELETED", "a")]


async def test_field_selector_watch_sees_a_binding_as_deleted(emu: Emulator, api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    emu.create(pod("p", ns))
    rv = str(emu.resource_version)
    emu.bind(ns, "p", "n1")
    emu.create(pod(END, ns))
    seen = []
    with anyio.fail_after(10):
        async with watch.Watch() as w:
            async for ev in w.stream(
                core.list_namespaced_pod, ns, field_selector="spec.nodeName=", resource_version=rv
            ):
                if _is_end(ev):
                    break
                seen.append((ev["type"], ev["raw_object"]["spec"].get("nodeName")))
    assert seen == [("DELETED", "n1")]


async def test_watch_is_scoped_to_its_namespace_and_resource(emu: Emulator, api: Any, ns: str) -> None:
    rv = str(emu.resource_version)
    emu.create(pod("elsewhere", "default")) if not emu.try_get("v1", "pods", "elsewhere", "default") else None
    emu.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": ns}})
    emu.create(pod("mine", ns))
    emu.create(pod(END, ns))
    seen = []
    with anyio.fail_after(10):
        async with watch.Watch() as w:
            async for ev in w.stream(client.CoreV1Api(api).list_namespaced_pod, ns, resource_version=rv):
                if _is_end(ev):
                    break
                seen.append(_summary(ev))
    assert seen == [("ADDED", "mine")]


async def test_watch_custom_resources_cluster_scoped(emu: Emulator, api: Any) -> None:
    group = unique("g") + ".example.com"
    emu.create(widget_crd(group, scope="Cluster"))
    rv = str(emu.resource_version)
    co = client.CustomObjectsApi(api)
    obj = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}
    await co.create_cluster_custom_object(group, "v1", "widgets", obj)
    await call_raw(
        co.patch_cluster_custom_object_status,
        group,
        "v1",
        "widgets",
        "w",
        {"status": {"phase": "Up"}},
        _content_type="application/merge-patch+json",
    )
    await co.create_cluster_custom_object(group, "v1", "widgets", {**obj, "metadata": {"name": END}})
    seen = []
    with anyio.fail_after(10):
        async with watch.Watch() as w:
            async for ev in w.stream(co.list_cluster_custom_object, group, "v1", "widgets", resource_version=rv):
                if _is_end(ev):
                    break
                seen.append((ev["type"], (ev["object"].get("status") or {}).get("phase")))
    assert seen == [("ADDED", None), ("MODIFIED", "Up")]


async def test_send_initial_events_ends_with_an_annotated_bookmark(emu: Emulator, api: Any, ns: str) -> None:
    emu.create(pod("a", ns))
    query = {
        "watch": "true",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
    }
    async with raw_watch(api, f"/api/v1/namespaces/{ns}/pods", query) as resp:
        first, second = await next_event(resp), await next_event(resp)
    assert first is not None and first["type"] == "ADDED"
    assert second is not None and second["type"] == "BOOKMARK"
    assert second["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_closing_the_client_ends_the_server_side_watch(emu: Emulator, api: Any, ns: str) -> None:
    key = "configmaps"
    before = emu.store.open_watches(key)
    async with raw_watch(api, f"/api/v1/namespaces/{ns}/configmaps", {"watch": "true"}) as resp:
        assert resp.status == 200
        await eventually(lambda: emu.store.open_watches(key) > before)
    resp.close()
    await eventually(lambda: emu.store.open_watches(key) == before)


async def test_watch_as_table_rows(emu: Emulator, api: Any, ns: str) -> None:
    query = {"watch": "true", "resourceVersion": str(emu.resource_version)}
    resp = await api.call_api(
        f"/api/v1/namespaces/{ns}/pods",
        "GET",
        query_params=list(query.items()),
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
        _preload_content=False,
    )
    try:
        emu.create(pod("p", ns))
        ev = await next_event(resp)
    finally:
        resp.release()
    assert ev is not None and ev["type"] == "ADDED" and ev["object"]["kind"] == "Table"
    assert ev["object"]["rows"][0]["cells"][0] == "p"
