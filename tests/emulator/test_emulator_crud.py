"""Create / get / update / delete through kubernetes-asyncio, with the apiserver's error Statuses."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from kubernetes_asyncio import client

from extender.emulator import Emulator
from extender.kube.client import request
from tests.emulator.builders import call_raw, error_body, pod

pytestmark = pytest.mark.anyio


def _status(exc: client.ApiException) -> dict[str, Any]:
    body = error_body(exc)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["code"] == exc.status
    return body


async def test_create_fills_server_metadata_and_get_returns_it(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    created = await call_raw(core.create_namespaced_pod, ns, pod("p1", ns, labels={"app": "a"}))
    meta = created.metadata
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", meta.uid)
    assert meta.resource_version.isdigit()
    assert meta.generation == 1
    assert meta.creation_timestamp is not None
    assert created.status.phase == "Pending"  # the server owns a new pod's status
    assert created.spec.scheduler_name == "default-scheduler"  # defaulted as the apiserver does
    got = await core.read_namespaced_pod("p1", ns)
    assert got.metadata.uid == meta.uid and got.metadata.resource_version == meta.resource_version


async def test_resource_version_comes_from_one_global_counter(emu: Emulator, api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    before = emu.resource_version
    cm = await call_raw(core.create_namespaced_config_map, ns, {"metadata": {"name": "c1"}, "data": {"a": "1"}})
    p = await call_raw(core.create_namespaced_pod, ns, pod("p1", ns))
    lease = await call_raw(
        client.CoordinationV1Api(api).create_namespaced_lease, ns, {"metadata": {"name": "l1"}, "spec": {}}
    )
    rvs = [int(cm.metadata.resource_version), int(p.metadata.resource_version), int(lease.metadata.resource_version)]
    assert rvs == [before + 1, before + 2, before + 3]
    listed = await core.list_namespaced_config_map(ns)
    assert int(listed.metadata.resource_version) == before + 3


async def test_generate_name_makes_unique_names(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    body = pod("", ns)
    body["metadata"] = {"generateName": "worker-"}
    names = {(await call_raw(core.create_namespaced_pod, ns, body)).metadata.name for _ in range(5)}
    assert len(names) == 5
    assert all(re.fullmatch(r"worker-[a-z0-9]{5}", n) for n in names)


async def test_create_without_name_is_invalid(api: Any, ns: str) -> None:
    body = pod("", ns)
    body["metadata"] = {}
    with pytest.raises(client.ApiException) as err:
        await call_raw(client.CoreV1Api(api).create_namespaced_pod, ns, body)
    status = _status(err.value)
    assert err.value.status == 422 and status["reason"] == "Invalid"
    assert status["details"]["causes"][0]["field"] == "metadata.name"


async def test_create_in_missing_namespace_is_not_found(api: Any) -> None:
    with pytest.raises(client.ApiException) as err:
        await call_raw(client.CoreV1Api(api).create_namespaced_pod, "nope", pod("p", "nope"))
    status = _status(err.value)
    assert err.value.status == 404 and status["reason"] == "NotFound"
    assert status["message"] == 'namespaces "nope" not found'


async def test_default_and_kube_system_exist_from_the_start(api: Any) -> None:
    names = {n.metadata.name for n in (await client.CoreV1Api(api).list_namespace()).items}
    assert {"default", "kube-system"} <= names


async def test_duplicate_create_is_already_exists(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    await call_raw(core.create_namespaced_pod, ns, pod("p1", ns))
    with pytest.raises(client.ApiException) as err:
        await call_raw(core.create_namespaced_pod, ns, pod("p1", ns))
    status = _status(err.value)
    assert err.value.status == 409 and status["reason"] == "AlreadyExists"
    assert status["details"] == {"name": "p1", "kind": "pods"}


async def test_invalid_pods_and_labels_are_rejected_with_causes(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    body = pod("Bad_Name", ns, labels={"ok": "-bad-"})
    body["spec"]["containers"] = [{"name": "c"}]
    with pytest.raises(client.ApiException) as err:
        await call_raw(core.create_namespaced_pod, ns, body)
    fields = {c["field"] for c in _status(err.value)["details"]["causes"]}
    assert fields == {"metadata.name", "metadata.labels[ok]", "spec.containers[0].image"}


async def test_update_with_stale_resource_version_conflicts(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    cm = await call_raw(core.create_namespaced_config_map, ns, {"metadata": {"name": "c"}, "data": {"v": "1"}})
    first = cm.to_dict()
    cm.data = {"v": "2"}
    updated = await core.replace_namespaced_config_map("c", ns, cm)
    assert updated.data == {"v": "2"}
    assert int(updated.metadata.resource_version) > int(first["metadata"]["resource_version"])
    cm.data = {"v": "3"}  # still carries the old resourceVersion
    with pytest.raises(client.ApiException) as err:
        await core.replace_namespaced_config_map("c", ns, cm)
    status = _status(err.value)
    assert err.value.status == 409 and status["reason"] == "Conflict"
    assert "the object has been modified" in status["message"]


async def test_update_without_resource_version_is_unconditional(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    await call_raw(core.create_namespaced_config_map, ns, {"metadata": {"name": "c"}, "data": {"v": "1"}})
    await core.patch_namespaced_config_map("c", ns, {"data": {"v": "2"}})
    replaced = await call_raw(
        core.replace_namespaced_config_map, "c", ns, {"metadata": {"name": "c"}, "data": {"v": "3"}}
    )
    assert replaced.data == {"v": "3"}


async def test_noop_update_keeps_resource_version(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    cm = await call_raw(core.create_namespaced_config_map, ns, {"metadata": {"name": "c"}, "data": {"v": "1"}})
    again = await core.replace_namespaced_config_map("c", ns, cm)
    assert again.metadata.resource_version == cm.metadata.resource_version


async def test_name_mismatch_between_url_and_body_is_bad_request(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    await call_raw(core.create_namespaced_config_map, ns, {"metadata": {"name": "c"}})
    with pytest.raises(client.ApiException) as err:
        await call_raw(core.replace_namespaced_config_map, "c", ns, {"metadata": {"name": "other"}})
    assert err.value.status == 400 and _status(err.value)["reason"] == "BadRequest"


async def test_generation_bumps_on_spec_changes_only(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    await call_raw(core.create_namespaced_pod, ns, pod("p", ns))
    labelled = await core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"x": "y"}}})
    assert labelled.metadata.generation == 1
    status = await core.patch_namespaced_pod_status("p", ns, {"status": {"phase": "Running"}})
    assert status.metadata.generation == 1
    image = await core.patch_namespaced_pod("p", ns, {"spec": {"containers": [{"name": "main", "image": "b:2"}]}})
    assert image.metadata.generation == 2


async def test_pod_spec_is_immutable_except_the_allowed_fields(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    await call_raw(core.create_namespaced_pod, ns, pod("p", ns))
    with pytest.raises(client.ApiException) as err:
        await core.patch_namespaced_pod("p", ns, {"spec": {"nodeName": "n1"}})
    status = _status(err.value)
    assert err.value.status == 422
    assert status["details"]["causes"][0]["field"] == "spec"
    assert "pod updates may not change fields" in status["message"]


async def test_delete_returns_the_pod_and_a_status_for_other_kinds(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    created = await call_raw(core.create_namespaced_pod, ns, pod("p", ns))
    deleted = await core.delete_namespaced_pod("p", ns)
    assert deleted.metadata.uid == created.metadata.uid
    assert int(deleted.metadata.resource_version) > int(created.metadata.resource_version)
    await call_raw(core.create_namespaced_config_map, ns, {"metadata": {"name": "c"}})
    status = await core.delete_namespaced_config_map("c", ns)
    assert status.status == "Success" and status.details.name == "c"
    with pytest.raises(client.ApiException) as err:
        await core.read_namespaced_pod("p", ns)
    assert err.value.status == 404 and _status(err.value)["message"] == 'pods "p" not found'


async def test_delete_preconditions_conflict_on_mismatch(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    created = await call_raw(core.create_namespaced_pod, ns, pod("p", ns))
    for pre in (
        client.V1Preconditions(uid="00000000-0000-4000-8000-000000000000"),
        client.V1Preconditions(resource_version="1"),
    ):
        with pytest.raises(client.ApiException) as err:
            await core.delete_namespaced_pod("p", ns, body=client.V1DeleteOptions(preconditions=pre))
        assert err.value.status == 409
        assert "Precondition failed" in _status(err.value)["message"]
    current = client.V1Preconditions(uid=created.metadata.uid, resource_version=created.metadata.resource_version)
    await core.delete_namespaced_pod("p", ns, body=client.V1DeleteOptions(preconditions=current))


async def test_finalizers_hold_deletion_until_removed(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    await call_raw(
        core.create_namespaced_config_map, ns, {"metadata": {"name": "c", "finalizers": ["example.com/hold"]}}
    )
    await core.delete_namespaced_config_map("c", ns)
    held = await core.read_namespaced_config_map("c", ns)
    assert held.metadata.deletion_timestamp is not None
    await core.patch_namespaced_config_map("c", ns, {"metadata": {"finalizers": None}})
    with pytest.raises(client.ApiException) as err:
        await core.read_namespaced_config_map("c", ns)
    assert err.value.status == 404


async def test_deleting_a_namespace_deletes_its_objects(emu: Emulator, api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    await call_raw(core.create_namespaced_pod, ns, pod("p", ns))
    await core.delete_namespace(ns)
    assert emu.list("v1", "pods", namespace=ns) == []
    with pytest.raises(client.ApiException) as err:
        await call_raw(core.create_namespaced_pod, ns, pod("p", ns))
    assert err.value.status == 404


async def test_dry_run_validates_without_storing(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    out = await call_raw(core.create_namespaced_pod, ns, pod("p", ns), dry_run="All")
    assert out.metadata.name == "p"
    assert (await core.list_namespaced_pod(ns)).items == []


async def test_secrets_fold_string_data(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    s = await call_raw(core.create_namespaced_secret, ns, {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
    assert s.data == {"k": "dg=="} and s.type == "Opaque"


async def test_malformed_bodies_get_400_statuses(api: Any, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    for body in (b"{not json", b"", b"[1, 2]"):
        resp = await _post_bytes(api, path, body)
        assert resp.status == 400, body
        status = resp.json()
        assert status["kind"] == "Status" and status["reason"] == "BadRequest" and status["code"] == 400
    resp = await request(api, "POST", path, body={"metadata": {"name": "c", "labels": {"a": 1}}})
    assert resp.status == 400
    resp = await request(api, "POST", path, body={"kind": "Pod", "metadata": {"name": "c"}})
    assert resp.status == 400


async def _post_bytes(api: Any, path: str, raw: bytes) -> Any:
    # bypass the client's JSON encoding: the body must reach the server byte for byte
    class _Resp:
        def __init__(self, status: int, body: bytes) -> None:
            self.status = status
            self.body = body

        def json(self) -> Any:
            return orjson.loads(self.body)

    rest = api.rest_client.pool_manager
    async with rest.post(api.configuration.host + path, data=raw, headers={"Content-Type": "application/json"}) as r:
        return _Resp(r.status, await r.read())


async def test_wrong_method_and_unknown_paths(api: Any, ns: str) -> None:
    resp = await request(api, "PUT", f"/api/v1/namespaces/{ns}/pods", body={})
    assert resp.status == 405 and resp.json()["reason"] == "MethodNotAllowed"
    resp = await request(api, "GET", "/api/v1/nothings")
    assert resp.status == 404 and resp.json()["kind"] == "Status"
    resp = await request(api, "GET", f"/api/v1/namespaces/{ns}/pods/p/logs")
    assert resp.status == 404


async def test_unknown_content_type_is_unsupported_media_type(api: Any, ns: str) -> None:
    await call_raw(client.CoreV1Api(api).create_namespaced_config_map, ns, {"metadata": {"name": "c"}})
    resp = await request(
        api,
        "PATCH",
        f"/api/v1/namespaces/{ns}/configmaps/c",
        body=b"\x00",
        content_type="application/vnd.kubernetes.protobuf",
    )
    assert resp.status == 415 and resp.json()["reason"] == "UnsupportedMediaType"


async def test_server_side_apply_is_approximated_by_create_or_merge(api: Any, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps/c"
    query = {"fieldManager": "test", "force": "true"}
    applied = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "labels": {"a": "b"}},
        "data": {"x": "1"},
    }
    created = await request(api, "PATCH", path, query=query, body=applied, content_type="application/apply-patch+yaml")
    assert created.status == 201 and created.json()["data"] == {"x": "1"}
    again = await request(
        api, "PATCH", path, query=query, body={"data": {"y": "2"}}, content_type="application/apply-patch+yaml"
    )
    assert again.status == 200
    assert again.json()["data"] == {"x": "1", "y": "2"} and again.json()["metadata"]["labels"] == {"a": "b"}


async def test_system_namespaces_cannot_be_deleted(api: Any) -> None:
    with pytest.raises(client.ApiException) as err:
        await client.CoreV1Api(api).delete_namespace("default")
    assert err.value.status == 403 and _status(err.value)["reason"] == "Forbidden"


async def test_replacing_a_pod_without_its_defaulted_fields_is_allowed(api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    created = await call_raw(core.create_namespaced_pod, ns, pod("p", ns))
    body = pod("p", ns, labels={"v": "2"})  # no schedulerName/restartPolicy…: defaulted again
    body["metadata"]["resourceVersion"] = created.metadata.resource_version
    replaced = await call_raw(core.replace_namespaced_pod, "p", ns, body)
    assert replaced.metadata.labels == {"v": "2"} and replaced.spec.scheduler_name == "default-scheduler"


async def test_a_client_that_accepts_no_json_is_not_acceptable(api: Any, ns: str) -> None:
    resp = await request(api, "GET", f"/api/v1/namespaces/{ns}/pods", accept="application/vnd.kubernetes.protobuf")
    assert resp.status == 406 and resp.json()["reason"] == "NotAcceptable"
    resp = await request(api, "GET", f"/api/v1/namespaces/{ns}/pods", accept="application/vnd.kubernetes.protobuf, */*")
    assert resp.status == 200
