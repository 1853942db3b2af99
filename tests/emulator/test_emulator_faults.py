"""Fault injection: forced codes, rates, latency, counts, dropped watches; and the journal."""

from __future__ import annotations

import threading
from typing import Any

import aiohttp
import anyio
import pytest
from kubernetes_asyncio import client, watch

from extender.emulator import Emulator
from extender.kube.client import request
from extender.kube.errors import KubeTimeout
from tests.emulator.builders import call_unparsed, pod
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


async def test_forced_status_codes_carry_statuses(emu: Emulator, api: Any, ns: str) -> None:
    emu.faults.add("get", "configmaps", code=503)
    emu.faults.add("list", "configmaps", code=429, retry_after=3)
    emu.faults.add("create", "configmaps", code=500, message="etcd is on fire")
    resp = await request(api, "GET", f"/api/v1/namespaces/{ns}/configmaps/x")
    assert resp.status == 503 and resp.json()["reason"] == "ServiceUnavailable"
    resp = await request(api, "GET", f"/api/v1/namespaces/{ns}/configmaps")
    assert resp.status == 429 and resp.headers["retry-after"] == "3"
    assert resp.json()["details"]["retryAfterSeconds"] == 3
    resp = await request(api, "POST", f"/api/v1/namespaces/{ns}/configmaps", body={"metadata": {"name": "c"}})
    assert resp.status == 500 and resp.json()["message"] == "etcd is on fire"
    assert emu.try_get("v1", "configmaps", "c", ns) is None  # failed before the write
    resp = await request(api, "GET", f"/api/v1/namespaces/{ns}/pods")  # other resources are untouched
    assert resp.status == 200


async def test_count_limited_fault_on_a_subresource(emu: Emulator, api: Any, ns: str) -> None:
    emu.create(pod("p", ns))
    fault = emu.faults.add("patch", "pods/status", code=409, count=2)
    path = f"/api/v1/namespaces/{ns}/pods/p/status"
    codes = []
    for _ in range(3):
        resp = await request(
            api, "PATCH", path, body={"status": {"phase": "Running"}}, content_type="application/merge-patch+json"
        )
        codes.append(resp.status)
    assert codes == [409, 409, 200]
    assert fault.hits == 2
    resp = await request(
        api, "PATCH", f"/api/v1/namespaces/{ns}/pods/p", body={}, content_type="application/merge-patch+json"
    )
    assert resp.status == 200  # the main resource never matched


async def test_name_scoped_fault_and_bind_alias(emu: Emulator, api: Any, ns: str) -> None:
    emu.create(pod("a", ns))
    emu.create(pod("b", ns))
    emu.faults.add("bind", name="a", code=500)
    target = {"kind": "Node", "name": "n1"}
    resp_a = await request(
        api, "POST", f"/api/v1/namespaces/{ns}/pods/a/binding", body={"metadata": {"name": "a"}, "target": target}
    )
    resp_b = await request(
        api, "POST", f"/api/v1/namespaces/{ns}/pods/b/binding", body={"metadata": {"name": "b"}, "target": target}
    )
    assert (resp_a.status, resp_b.status) == (500, 201)


async def test_error_rate_is_deterministic_for_a_seed(emu: Emulator, api: Any, ns: str) -> None:
    async def run() -> list[int]:
        emu.faults.clear()
        emu.faults.seed(42)
        emu.faults.add("get", "configmaps", code=500, rate=0.5)
        return [(await request(api, "GET", f"/api/v1/namespaces/{ns}/configmaps/x")).status for _ in range(40)]

    first, second = await run(), await run()
    assert first == second
    assert first.count(500) not in (0, 40) and set(first) == {404, 500}


async def test_after_faults_apply_the_write_but_report_failure(emu: Emulator, api: Any, ns: str) -> None:
    emu.faults.add("create", "configmaps", code=504, after=True, count=1)
    resp = await request(api, "POST", f"/api/v1/namespaces/{ns}/configmaps", body={"metadata": {"name": "c"}})
    assert resp.status == 504
    assert emu.try_get("v1", "configmaps", "c", ns) is not None


async def test_latency_makes_a_client_timeout(emu: Emulator, api: Any, ns: str) -> None:
    emu.faults.add("list", "configmaps", latency=2.0, count=1)
    with pytest.raises(KubeTimeout):
        await request(api, "GET", f"/api/v1/namespaces/{ns}/configmaps", request_timeout=0.2)
    resp = await request(api, "GET", f"/api/v1/namespaces/{ns}/configmaps", request_timeout=5)
    assert resp.status == 200


async def test_a_write_whose_latency_passes_its_own_deadline_is_not_done(emu: Emulator, api: Any, ns: str) -> None:
    """``?timeout=`` (kube-apiserver's request deadline): a write still waiting at its deadline
    answers 504 ``Timeout`` and is not done; one within its deadline is done after the latency."""
    emu.faults.add("create", "configmaps", latency=0.6, count=2)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    resp = await request(api, "POST", path, query={"timeout": "200ms"}, body={"metadata": {"name": "late"}})
    assert resp.status == 504 and resp.json()["reason"] == "Timeout"
    assert emu.try_get("v1", "configmaps", "late", ns) is None
    resp = await request(api, "POST", path, query={"timeout": "1m"}, body={"metadata": {"name": "on-time"}})
    assert resp.status == 201
    assert emu.try_get("v1", "configmaps", "on-time", ns) is not None


@pytest.mark.parametrize("value", ["5", "fast", "1x"])
async def test_a_timeout_that_is_no_duration_is_a_bad_request(emu: Emulator, api: Any, ns: str, value: str) -> None:
    resp = await request(api, "GET", f"/api/v1/namespaces/{ns}/configmaps", query={"timeout": value})
    assert resp.status == 400 and resp.json()["message"] == "invalid timeout specified in the request URL"


async def test_dropping_watches_cuts_the_connection(emu: Emulator, api: Any, ns: str) -> None:
    core = client.CoreV1Api(api)
    received: list[str] = []
    started = anyio.Event()

    async def consume() -> None:
        async with watch.Watch() as w:
            async for ev in w.stream(core.list_namespaced_pod, ns, resource_version=str(emu.resource_version)):
                received.append(ev["raw_object"]["metadata"]["name"])
                started.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            errors: list[BaseException] = []

            async def guarded() -> None:
                try:
                    await consume()
                except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
                    errors.append(exc)

            tg.start_soon(guarded)
            await eventually(lambda: emu.store.open_watches("pods") > 0)
            emu.create(pod("p1", ns))
            await started.wait()
            assert emu.faults.drop_watches("pods") >= 1
    assert received == ["p1"]
    assert errors, "the client saw the broken stream"


async def test_faults_can_be_added_from_another_thread(emu: Emulator, api: Any, ns: str) -> None:
    thread = threading.Thread(target=lambda: emu.faults.add("list", "configmaps", code=503, count=1))
    thread.start()
    thread.join()
    assert (await request(api, "GET", f"/api/v1/namespaces/{ns}/configmaps")).status == 503


async def test_journal_records_verbs_and_resources(emu: Emulator, api: Any, ns: str) -> None:
    emu.create(pod("p", ns))
    core = client.CoreV1Api(api)
    await core.read_namespaced_pod("p", ns)
    await core.patch_namespaced_pod_status("p", ns, {"status": {"phase": "Running"}})
    await call_unparsed(
        core.create_namespaced_pod_binding, "p", ns, {"metadata": {"name": "p"}, "target": {"name": "n"}}
    )
    calls = emu.journal.calls()
    assert {("get", "", "pods", ""), ("patch", "", "pods", "status"), ("create", "", "pods", "binding")} <= calls
    last = emu.journal.records()[-1]
    assert (last.method, last.namespace, last.name, last.code) == ("POST", ns, "p", 201)
