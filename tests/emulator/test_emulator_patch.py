"""PATCH: merge, JSON (RFC 6902) and strategic merge; resourceVersion in a patch; status isolation."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from extender.emulator import Emulator
from extender.kube.client import request
from tests.emulator.builders import call_raw, error_body, pod, unique, widget_crd

pytestmark = pytest.mark.anyio

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
SMP = "application/strategic-merge-patch+json"


async def _patch(api: Any, path: str, body: Any, content_type: str) -> Any:
    return await request(api, "PATCH", path, body=body, content_type=content_type)


async def test_merge_patch_merges_maps_and_null_deletes(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    await call_raw(core.create_namespaced_config_map, ns, {"metadata": {"name": "c", "labels": {"a": "1", "b": "2"}}})
    resp = await _patch(
        api, f"/api/v1/namespaces/{ns}/configmaps/c", {"metadata": {"labels": {"a": None, "c": "3"}}}, MERGE
    )
    assert resp.status == 200
    assert resp.json()["metadata"]["labels"] == {"b": "2", "c": "3"}


async def test_json_patch_applies_operations_and_test_failure_is_422(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    await call_raw(core.create_namespaced_config_map, ns, {"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}})
    path = f"/api/v1/namespaces/{ns}/configmaps/c"
    ops = [
        {"op": "test", "path": "/data/a", "value": "1"},
        {"op": "replace", "path": "/data/a", "value": "10"},
        {"op": "remove", "path": "/data/b"},
        {"op": "add", "path": "/metadata/annotations", "value": {"example.com/y": "z"}},
        {"op": "copy", "from": "/data/a", "path": "/data/c"},
        {"op": "move", "from": "/data/c", "path": "/data/d"},
    ]
    resp = await _patch(api, path, ops, JSON_PATCH)
    assert resp.status == 200, resp.json()
    obj = resp.json()
    assert obj["data"] == {"a": "10", "d": "10"}
    assert obj["metadata"]["annotations"] == {"example.com/y": "z"}
    resp = await _patch(api, path, [{"op": "test", "path": "/data/a", "value": "1"}], JSON_PATCH)
    assert resp.status == 422 and resp.json()["reason"] == "Invalid"
    resp = await _patch(api, path, [{"op": "remove", "path": "/data/nope"}], JSON_PATCH)
    assert resp.status == 422
    resp = await _patch(api, path, {"op": "add"}, JSON_PATCH)
    assert resp.status == 400
    resp = await _patch(api, path, [{"op": "frobnicate", "path": "/data"}], JSON_PATCH)
    assert resp.status == 400


async def test_json_patch_escaped_annotation_key(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    await call_raw(core.create_namespaced_pod, ns, pod("p", ns))
    path = f"/api/v1/namespaces/{ns}/pods/p"
    ops = [{"op": "add", "path": "/metadata/annotations", "value": {}}]
    ops.append({"op": "add", "path": "/metadata/annotations/scheduling.infini-ai.com~1quota-name", "value": "q1"})
    resp = await _patch(api, path, ops, JSON_PATCH)
    assert resp.json()["metadata"]["annotations"] == {"scheduling.infini-ai.com/quota-name": "q1"}


async def test_strategic_merge_patch_merges_containers_by_name(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    body = pod("p", ns, labels={"a": "1"})
    body["spec"]["containers"] = [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]
    await call_raw(core.create_namespaced_pod, ns, body)
    patch = {
        "metadata": {"labels": {"b": "2"}, "finalizers": ["example.com/f"]},
        "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
        "spec": {"containers": [{"name": "b", "image": "y:2"}]},
    }
    resp = await _patch(api, f"/api/v1/namespaces/{ns}/pods/p", patch, SMP)
    assert resp.status == 200, resp.json()
    obj = resp.json()
    assert obj["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert [(c["name"], c["image"]) for c in obj["spec"]["containers"]] == [("a", "x:1"), ("b", "y:2")]
    assert obj["metadata"]["finalizers"] == ["example.com/f"]


async def test_strategic_merge_patch_is_refused_for_custom_resources(emu: Emulator, api: Any, ns: str) -> None:
    group = unique("g") + ".example.com"
    emu.create(widget_crd(group))
    await client.CustomObjectsApi(api).create_namespaced_custom_object(
        group,
        "v1",
        ns,
        "widgets",
        {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}},
    )
    resp = await _patch(api, f"/apis/{group}/v1/namespaces/{ns}/widgets/w", {"spec": {"size": 2}}, SMP)
    assert resp.status == 415


async def test_patch_with_stale_resource_version_conflicts(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    cm = await call_raw(core.create_namespaced_config_map, ns, {"metadata": {"name": "c"}, "data": {"v": "1"}})
    rv = cm.metadata.resource_version
    ok = await core.patch_namespaced_config_map("c", ns, {"metadata": {"resourceVersion": rv}, "data": {"v": "2"}})
    with pytest.raises(client.ApiException) as err:
        await core.patch_namespaced_config_map("c", ns, {"metadata": {"resourceVersion": rv}, "data": {"v": "3"}})
    assert err.value.status == 409 and error_body(err.value)["reason"] == "Conflict"
    current = await core.read_namespaced_config_map("c", ns)
    assert current.data == {"v": "2"} and current.metadata.resource_version == ok.metadata.resource_version


async def test_patch_changing_the_uid_is_a_failed_precondition(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    await call_raw(core.create_namespaced_config_map, ns, {"metadata": {"name": "c"}})
    with pytest.raises(client.ApiException) as err:
        await core.patch_namespaced_config_map("c", ns, {"metadata": {"uid": "not-the-uid"}})
    assert err.value.status == 409 and "Precondition failed: UID" in error_body(err.value)["message"]


async def test_patch_of_missing_object_is_not_found(api: Any, ns: str) -> None:
    resp = await _patch(api, f"/api/v1/namespaces/{ns}/configmaps/nope", {"data": {}}, MERGE)
    assert resp.status == 404


async def test_main_resource_writes_ignore_status_and_status_writes_ignore_the_rest(
    emu: Emulator, api: Any, ns: str
) -> None:
    group = unique("g") + ".example.com"
    emu.create(widget_crd(group))
    co = client.CustomObjectsApi(api)
    body = {
        "apiVersion": f"{group}/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 1},
        "status": {"phase": "Set-on-create"},
    }
    created = await co.create_namespaced_custom_object(group, "v1", ns, "widgets", body)
    assert "status" not in created  # dropped on create: the status subresource owns it

    st = await call_raw(
        co.patch_namespaced_custom_object_status,
        group,
        "v1",
        ns,
        "widgets",
        "w",
        {"spec": {"size": 9}, "metadata": {"labels": {"x": "y"}}, "status": {"phase": "A"}},
        _content_type=MERGE,  # the generated client would pick JSON patch for a dict body
    )
    assert st["status"] == {"phase": "A"}
    assert st["spec"]["size"] == 1 and "labels" not in st["metadata"]
    assert st["metadata"]["generation"] == 1

    main = await call_raw(
        co.patch_namespaced_custom_object,
        group,
        "v1",
        ns,
        "widgets",
        "w",
        {"spec": {"size": 2}, "status": {"phase": "B"}},
        _content_type=MERGE,
    )
    assert main["status"] == {"phase": "A"} and main["spec"]["size"] == 2
    assert main["metadata"]["generation"] == 2

    main["status"] = {"phase": "C"}
    main["spec"]["size"] = 3
    replaced = await co.replace_namespaced_custom_object(group, "v1", ns, "widgets", "w", main)
    assert replaced["status"] == {"phase": "A"} and replaced["spec"]["size"] == 3

    replaced["status"] = {"phase": "D"}
    replaced["spec"]["size"] = 100
    st2 = await co.replace_namespaced_custom_object_status(group, "v1", ns, "widgets", "w", replaced)
    assert st2["status"] == {"phase": "D"} and st2["spec"]["size"] == 3

    stale = dict(replaced)
    with pytest.raises(client.ApiException) as err:
        await co.replace_namespaced_custom_object_status(group, "v1", ns, "widgets", "w", stale)
    assert err.value.status == 409


async def test_pod_status_subresource_is_isolated(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    await call_raw(core.create_namespaced_pod, ns, pod("p", ns))
    p = await core.patch_namespaced_pod_status("p", ns, {"status": {"phase": "Running"}, "spec": {"nodeName": "n9"}})
    assert p.status.phase == "Running" and p.spec.to_dict()["node_name"] is None  # the stubs type it str
    p = await core.patch_namespaced_pod("p", ns, {"status": {"phase": "Failed"}, "metadata": {"labels": {"a": "b"}}})
    assert p.status.phase == "Running" and p.metadata.labels == {"a": "b"}
