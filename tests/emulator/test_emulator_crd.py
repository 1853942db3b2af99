"""CustomResourceDefinitions: discovery, schema enforcement, printer columns and Table output."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from extender.emulator import Emulator
from extender.kube.client import request
from tests.emulator.builders import call_raw, error_body, pod, unique, widget_crd

pytestmark = pytest.mark.anyio

TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"


def _widget(group: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


async def test_discovery_lists_builtin_groups_and_subresources(api: Any) -> None:
    resources = (await request(api, "GET", "/api/v1")).json()
    by_name = {r["name"]: r for r in resources["resources"]}
    assert by_name["pods"]["namespaced"] is True and by_name["pods"]["kind"] == "Pod"
    assert by_name["pods"]["shortNames"] == ["po"]
    assert set(by_name["pods"]["verbs"]) >= {"get", "list", "watch", "create", "update", "patch", "delete"}
    assert by_name["pods/status"]["verbs"] == ["get", "patch", "update"]
    assert by_name["pods/binding"]["kind"] == "Binding" and by_name["pods/binding"]["verbs"] == ["create"]
    assert by_name["pods/eviction"]["group"] == "policy" and by_name["pods/eviction"]["kind"] == "Eviction"
    assert by_name["nodes"]["namespaced"] is False
    for path in ("/api", "/api/"):
        versions = (await request(api, "GET", path)).json()
        assert versions["kind"] == "APIVersions" and versions["versions"] == ["v1"]
    groups = {g["name"] for g in (await request(api, "GET", "/apis")).json()["groups"]}
    assert {"coordination.k8s.io", "apiextensions.k8s.io"} <= groups
    version = (await client.VersionApi(api).get_code()).to_dict()
    assert version["major"] == "1" and version["minor"] == "32"


async def test_creating_a_crd_serves_its_resource_and_deleting_it_removes_it(emu: Emulator, api: Any) -> None:
    group = unique("g") + ".example.com"
    ext = client.ApiextensionsV1Api(api)
    crd = await call_raw(ext.create_custom_resource_definition, widget_crd(group, scope="Cluster", short_names=["wd"]))
    assert {c.type for c in crd.status.conditions if c.status == "True"} == {"Established", "NamesAccepted"}

    groups = (await request(api, "GET", "/apis")).json()["groups"]
    assert any(g["name"] == group and g["preferredVersion"]["version"] == "v1" for g in groups)
    listing = (await request(api, "GET", f"/apis/{group}/v1")).json()
    by_name = {r["name"]: r for r in listing["resources"]}
    assert by_name["widgets"]["namespaced"] is False and by_name["widgets"]["shortNames"] == ["wd"]
    assert by_name["widgets/status"]["verbs"] == ["get", "patch", "update"]

    co = client.CustomObjectsApi(api)
    await co.create_cluster_custom_object(group, "v1", "widgets", _widget(group, "w1", {"size": 1}))
    assert [w["metadata"]["name"] for w in (await co.list_cluster_custom_object(group, "v1", "widgets"))["items"]] == [
        "w1"
    ]

    await ext.delete_custom_resource_definition(f"widgets.{group}")
    assert (await request(api, "GET", f"/apis/{group}/v1")).status == 404
    assert (await request(api, "GET", f"/apis/{group}/v1/widgets")).status == 404
    # re-created: served again, and the old objects are gone
    await call_raw(ext.create_custom_resource_definition, widget_crd(group, scope="Cluster"))
    assert (await co.list_cluster_custom_object(group, "v1", "widgets"))["items"] == []


async def test_openapi_v3_describes_patch_with_field_validation_for_every_kind(emu: Emulator, api: Any) -> None:
    group = unique("g") + ".example.com"
    emu.create(widget_crd(group))
    index = (await request(api, "GET", "/openapi/v3")).json()
    assert "api/v1" in index["paths"] and f"apis/{group}/v1" in index["paths"]
    url = index["paths"][f"apis/{group}/v1"]["serverRelativeURL"]
    path, _, query = url.partition("?")
    doc = (await request(api, "GET", path, query=[tuple(query.split("=", 1))])).json()
    op = doc["paths"][f"/apis/{group}/v1/namespaces/{{namespace}}/widgets/{{name}}"]["patch"]
    assert op["x-kubernetes-group-version-kind"] == {"group": group, "version": "v1", "kind": "Widget"}
    assert "fieldValidation" in {p["name"] for p in op["parameters"]}
    core = (await request(api, "GET", "/openapi/v3/api/v1")).json()
    assert core["paths"]["/api/v1/nodes/{name}"]["patch"]["x-kubernetes-group-version-kind"]["kind"] == "Node"


async def test_schema_violations_are_422_with_field_causes(emu: Emulator, api: Any, ns: str) -> None:
    group = unique("g") + ".example.com"
    emu.create(widget_crd(group))
    co = client.CustomObjectsApi(api)
    bad = _widget(group, "w", {"size": 0, "color": "green", "port": 1.5, "items": [{"name": 3}]})
    with pytest.raises(client.ApiException) as err:
        await co.create_namespaced_custom_object(group, "v1", ns, "widgets", bad)
    status = error_body(err.value)
    assert err.value.status == 422 and status["reason"] == "Invalid"
    assert status["details"]["kind"] == "Widget" and status["details"]["group"] == group
    causes = {c["field"]: c for c in status["details"]["causes"]}
    assert set(causes) == {"spec.size", "spec.color", "spec.port", "spec.items[0].name"}
    assert causes["spec.color"]["reason"] == "FieldValueNotSupported"
    assert "greater than or equal to 1" in causes["spec.size"]["message"]
    assert status["message"].startswith(f'Widget.{group} "w" is invalid: [')

    with pytest.raises(client.ApiException) as err:
        await co.create_namespaced_custom_object(group, "v1", ns, "widgets", _widget(group, "w", {}))
    causes = error_body(err.value)["details"]["causes"]
    assert causes == [{"reason": "FieldValueRequired", "message": "Required value", "field": "spec.size"}]


async def test_schema_extensions_defaults_and_pruning(emu: Emulator, api: Any, ns: str) -> None:
    group = unique("g") + ".example.com"
    emu.create(widget_crd(group))
    path = f"/apis/{group}/v1/namespaces/{ns}/widgets"
    spec = {
        "size": 2,
        "port": "http",  # int-or-string
        "note": None,  # nullable
        "extra": {"anything": {"goes": [1, 2]}},  # preserve-unknown-fields
        "labels": {"a": "b"},
        "typo": True,  # unknown: pruned (fieldValidation=Warn by default)
    }
    resp = await request(api, "POST", path, body=_widget(group, "w", spec))
    assert resp.status == 201, resp.json()
    obj = resp.json()
    assert obj["spec"] == {
        "size": 2,
        "port": "http",
        "note": None,
        "extra": {"anything": {"goes": [1, 2]}},
        "labels": {"a": "b"},
        "color": "red",  # defaulted
    }
    assert 'unknown field \\"spec.typo\\"' in resp.headers.get("warning", "") or "spec.typo" in resp.headers.get(
        "warning", ""
    )
    resp = await request(api, "POST", path, body=_widget(group, "w2", {"size": 1, "port": 8080}))
    assert resp.status == 201 and resp.json()["spec"]["port"] == 8080


async def test_strict_field_validation_rejects_unknown_fields(emu: Emulator, api: Any, ns: str) -> None:
    group = unique("g") + ".example.com"
    emu.create(widget_crd(group))
    path = f"/apis/{group}/v1/namespaces/{ns}/widgets"
    resp = await request(
        api, "POST", path, query={"fieldValidation": "Strict"}, body=_widget(group, "w", {"size": 1, "typo": 1})
    )
    assert resp.status == 400
    assert 'strict decoding error: unknown field "spec.typo"' in resp.json()["message"]
    resp = await request(
        api, "POST", path, query={"fieldValidation": "Ignore"}, body=_widget(group, "w", {"size": 1, "typo": 1})
    )
    assert resp.status == 201 and "warning" not in resp.headers
    # built-in kinds: unknown top-level and metadata fields
    resp = await request(
        api,
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        query={"fieldValidation": "Strict"},
        body={"metadata": {"name": "c", "lables": {}}, "dta": {}},
    )
    assert resp.status == 400 and 'unknown field "metadata.lables"' in resp.json()["message"]
    resp = await request(
        api, "POST", f"/api/v1/namespaces/{ns}/configmaps", query={"fieldValidation": "Bogus"}, body={}
    )
    assert resp.status == 400


async def test_invalid_crds_are_rejected(api: Any) -> None:
    ext = client.ApiextensionsV1Api(api)
    crd = widget_crd(unique("g") + ".example.com", columns=[{"name": "X", "type": "string", "jsonPath": ".a[?(@.b)]"}])
    crd["metadata"]["name"] = "wrong.name"
    del crd["spec"]["versions"][0]["schema"]
    with pytest.raises(client.ApiException) as err:
        await call_raw(ext.create_custom_resource_definition, crd)
    fields = {c["field"] for c in error_body(err.value)["details"]["causes"]}
    assert fields == {
        "metadata.name",
        "spec.versions[0].schema.openAPIV3Schema",
        "spec.versions[0].additionalPrinterColumns[0].jsonPath",
    }


async def test_printer_columns_make_a_table(emu: Emulator, api: Any) -> None:
    group = unique("g") + ".example.com"
    columns: list[dict[str, Any]] = [
        {"name": "Node", "type": "string", "jsonPath": ".status.nodeName"},
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
        {"name": "Label", "type": "string", "jsonPath": ".spec.labels['a.b/c']"},
        {"name": "First", "type": "string", "jsonPath": ".spec.items[0].name", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    emu.create(widget_crd(group, scope="Cluster", columns=columns))
    emu.create(
        {
            **_widget(group, "w1", {"size": 3, "labels": {"a.b/c": "x"}, "items": [{"name": "i0"}]}),
            "status": {"nodeName": "n1"},
        },
        with_status=True,
    )
    emu.create(_widget(group, "w2", {"size": 4}))
    resp = await request(api, "GET", f"/apis/{group}/v1/widgets", accept=TABLE + ",application/json")
    table = resp.json()
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Node", "Size", "Label", "First", "Age"]
    assert table["columnDefinitions"][4]["priority"] == 1
    rows = [r["cells"] for r in table["rows"]]
    assert [r[:5] for r in rows] == [["w1", "n1", 3, "x", "i0"], ["w2", None, 4, None, None]]
    assert all(isinstance(r[5], str) and r[5].endswith("s") for r in rows)  # an age, not a timestamp
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert table["metadata"]["resourceVersion"].isdigit()
    one = (await request(api, "GET", f"/apis/{group}/v1/widgets/w1", accept=TABLE)).json()
    assert one["kind"] == "Table" and [r["cells"][0] for r in one["rows"]] == ["w1"]
    plain = (await request(api, "GET", f"/apis/{group}/v1/widgets")).json()
    assert plain["kind"] == "WidgetList"


async def test_filtered_printer_columns_pick_the_matching_item(emu: Emulator, api: Any) -> None:
    group = unique("g") + ".example.com"
    columns = [{"name": "Second", "type": "string", "jsonPath": '.spec.items[?(@.name=="i1")].name'}]
    emu.create(widget_crd(group, scope="Cluster", columns=columns))
    emu.create(_widget(group, "w1", {"size": 3, "items": [{"name": "i0"}, {"name": "i1"}]}))
    emu.create(_widget(group, "w2", {"size": 3, "items": [{"name": "i0"}]}))
    table = (await request(api, "GET", f"/apis/{group}/v1/widgets", accept=TABLE)).json()
    assert [r["cells"][:2] for r in table["rows"]] == [["w1", "i1"], ["w2", None]]
    # a selectable field must stay a simple path
    ext = client.ApiextensionsV1Api(api)
    crd = widget_crd(unique("g") + ".example.com")
    crd["spec"]["versions"][0]["selectableFields"] = [{"jsonPath": '.spec.items[?(@.name=="i1")].name'}]
    with pytest.raises(client.ApiException) as err:
        await call_raw(ext.create_custom_resource_definition, crd)
    causes = error_body(err.value)["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec.versions[0].selectableFields[0].jsonPath"]


async def test_crd_without_columns_shows_name_and_age(emu: Emulator, api: Any) -> None:
    group = unique("g") + ".example.com"
    emu.create(widget_crd(group, scope="Cluster"))
    table = (await request(api, "GET", f"/apis/{group}/v1/widgets", accept=TABLE)).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Age"]


async def test_builtin_kinds_have_familiar_columns(emu: Emulator, api: Any, ns: str) -> None:
    emu.create(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": unique("n-"), "labels": {"node-role.kubernetes.io/worker": ""}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.32.0"}},
        }
    )
    p = pod("p", ns, nodeName="n1")
    p["status"] = {
        "phase": "Running",
        "containerStatuses": [{"name": "main", "ready": True, "restartCount": 2, "image": "b", "imageID": ""}],
    }
    emu.create(p, with_status=True)
    pods = (await request(api, "GET", f"/api/v1/namespaces/{ns}/pods", accept=TABLE)).json()
    assert [c["name"] for c in pods["columnDefinitions"] if c["priority"] == 0] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
        "Node",
    ]
    cells = dict(zip([c["name"] for c in pods["columnDefinitions"]], pods["rows"][0]["cells"], strict=True))
    assert (cells["Name"], cells["Ready"], cells["Status"], cells["Restarts"], cells["Node"]) == (
        "p",
        "1/1",
        "Running",
        "2",
        "n1",
    )
    nodes = (await request(api, "GET", "/api/v1/nodes", accept=TABLE)).json()
    assert [c["name"] for c in nodes["columnDefinitions"] if c["priority"] == 0] == [
        "Name",
        "Status",
        "Roles",
        "Age",
        "Version",
    ]
    row = next(r["cells"] for r in nodes["rows"] if r["cells"][2] == "worker")
    assert row[1] == "Ready" and row[4] == "v1.32.0"
