"""Building API clients and raw requests; typed errors from Status answers."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from extender.emulator import Emulator
from extender.kube import client as kube_client
from extender.kube.errors import AlreadyExists, ApiFailure, Conflict, Invalid, KubeTimeout, NotFound, ServerError

pytestmark = pytest.mark.anyio


async def test_clients_from_url_and_kubeconfig_reach_the_server(emu: Emulator, tmp_path: Path) -> None:
    kubeconfig = emu.write_kubeconfig(tmp_path / "kc")
    for api in (
        kube_client.from_url(emu.url, token=emu.token),
        await kube_client.from_kubeconfig(kubeconfig),
        await kube_client.new_client(kubeconfig),
        await kube_client.new_client(url=emu.url, user_agent="probe/1"),
    ):
        try:
            resp = await kube_client.request(api, "GET", "/api/v1/namespaces/default")
            assert resp.ok and resp.json()["metadata"]["name"] == "default"
        finally:
            await kube_client.close(api)
    agents = {r.user_agent for r in emu.journal.records()}
    assert agents == {kube_client.USER_AGENT, "probe/1"}


async def test_error_answers_are_returned_raw_and_map_to_typed_errors(api: Any, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    missing = await kube_client.request(api, "GET", f"{path}/nope")
    assert missing.status == 404
    with pytest.raises(NotFound) as err:
        missing.raise_for_status("get configmap nope")
    assert err.value.reason == "NotFound" and 'configmaps "nope" not found' in str(err.value)
    await kube_client.request(api, "POST", path, body={"metadata": {"name": "c"}})
    dup = await kube_client.request(api, "POST", path, body={"metadata": {"name": "c"}})
    assert isinstance(ApiFailure.from_response(dup.status, dup.json()), AlreadyExists)
    assert issubclass(AlreadyExists, Conflict)
    bad = await kube_client.request(api, "POST", path, body={"metadata": {"name": "Bad!"}})
    assert isinstance(ApiFailure.from_response(bad.status, bad.json()), Invalid)
    assert isinstance(ApiFailure.from_response(503, None), ServerError)
    throttled = ApiFailure.from_response(429, {"reason": "TooManyRequests"}, headers={"retry-after": "2"})
    assert throttled.retry_after == 2.0


async def test_unreachable_server_is_a_timeout_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    api = kube_client.from_url(f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(KubeTimeout):
            await kube_client.request(api, "GET", "/version", request_timeout=2)
    finally:
        await api.close()


def test_resource_paths() -> None:
    assert kube_client.resource_path("", "v1", "pods", namespace="ns", name="p", subresource="binding") == (
        "/api/v1/namespaces/ns/pods/p/binding"
    )
    assert kube_client.resource_path(
        "scheduling.infini-ai.com", "v1alpha1", "quotas", name="q", subresource="status"
    ) == ("/apis/scheduling.infini-ai.com/v1alpha1/quotas/q/status")
    assert kube_client.resource_path("coordination.k8s.io", "v1", "leases", namespace="kube-system") == (
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
    )
