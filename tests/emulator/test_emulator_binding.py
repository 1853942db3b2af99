"""``pods/binding`` and ``pods/eviction`` as kube-scheduler and the descheduler use them."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from extender.emulator import Emulator
from extender.kube.client import request
from tests.emulator.builders import call_unparsed, pod

pytestmark = pytest.mark.anyio


def _binding(
    name: str, node: str, *, uid: str | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "annotations": annotations or {}}
    if uid:
        meta["uid"] = uid
    return {"apiVersion": "v1", "kind": "Binding", "metadata": meta, "target": {"kind": "Node", "name": node}}


async def test_binding_sets_node_merges_annotations_and_answers_a_status(emu: Emulator, api: Any, ns: str) -> None:
    created = emu.create(pod("p", ns))
    path = f"/api/v1/namespaces/{ns}/pods/p/binding"
    resp = await request(
        api, "POST", path, body=_binding("p", "n1", uid=created["metadata"]["uid"], annotations={"example.com/a": "b"})
    )
    assert resp.status == 201
    assert resp.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    bound = emu.get("v1", "pods", "p", ns)
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["metadata"]["annotations"] == {"example.com/a": "b"}
    assert {"type": "PodScheduled", "status": "True"}.items() <= bound["status"]["conditions"][0].items()
    assert int(bound["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


async def test_second_binding_conflicts_naming_the_node(emu: Emulator, api: Any, ns: str) -> None:
    emu.create(pod("p", ns))
    core = client.CoreV1Api(api)
    await call_unparsed(core.create_namespaced_pod_binding, "p", ns, _binding("p", "n1"))
    for node in ("n1", "n2"):
        resp = await request(api, "POST", f"/api/v1/namespaces/{ns}/pods/p/binding", body=_binding("p", node))
        assert resp.status == 409
        status = resp.json()
        assert status["reason"] == "Conflict"
        assert status["message"] == (
            'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1"'
        )
    assert emu.get("v1", "pods", "p", ns)["spec"]["nodeName"] == "n1"


async def test_binding_checks_the_uid_precondition(emu: Emulator, api: Any, ns: str) -> None:
    emu.create(pod("p", ns))
    resp = await request(
        api,
        "POST",
        f"/api/v1/namespaces/{ns}/pods/p/binding",
        body=_binding("p", "n1", uid="00000000-0000-4000-8000-000000000000"),
    )
    assert resp.status == 409 and "Precondition failed: UID" in resp.json()["message"]
    assert "nodeName" not in emu.get("v1", "pods", "p", ns)["spec"]


async def test_binding_errors(emu: Emulator, api: Any, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/pods/missing/binding"
    resp = await request(api, "POST", path, body=_binding("missing", "n1"))
    assert resp.status == 404 and resp.json()["reason"] == "NotFound"
    emu.create(pod("p", ns))
    resp = await request(api, "POST", f"/api/v1/namespaces/{ns}/pods/p/binding", body=_binding("p", ""))
    assert resp.status == 422
    resp = await request(api, "POST", f"/api/v1/namespaces/{ns}/pods/p/binding", body=_binding("other", "n1"))
    assert resp.status == 400


async def test_legacy_bindings_collection(emu: Emulator, api: Any, ns: str) -> None:
    emu.create(pod("p", ns))
    resp = await request(api, "POST", f"/api/v1/namespaces/{ns}/bindings", body=_binding("p", "n3"))
    assert resp.status == 201
    assert emu.get("v1", "pods", "p", ns)["spec"]["nodeName"] == "n3"


async def test_eviction_deletes_the_pod(emu: Emulator, api: Any, ns: str) -> None:
    emu.create(pod("p", ns))
    core = client.CoreV1Api(api)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": ns}}
    resp = await call_unparsed(core.create_namespaced_pod_eviction, "p", ns, eviction)
    assert resp.status == 201
    assert (await resp.json())["status"] == "Success"
    assert emu.try_get("v1", "pods", "p", ns) is None
    again = await request(api, "POST", f"/api/v1/namespaces/{ns}/pods/p/eviction", body=eviction)
    assert again.status == 404


@pytest.mark.parametrize("options", ["now", [1], {"preconditions": "uid"}])
async def test_an_eviction_with_malformed_delete_options_is_a_400_and_the_pod_stays(
    emu: Emulator, api: Any, ns: str, options: Any
) -> None:
    emu.create(pod("p", ns))
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}, "deleteOptions": options}
    resp = await request(api, "POST", f"/api/v1/namespaces/{ns}/pods/p/eviction", body=eviction)
    assert resp.status == 400
    assert resp.json()["reason"] == "BadRequest"
    assert "must be an object" in resp.json()["message"]
    assert emu.try_get("v1", "pods", "p", ns) is not None
