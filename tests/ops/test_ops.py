"""Operations endpoints of the running service on the emulator: ``/metrics`` (parsed as
Prometheus does), ``/healthz``, ``/readyz`` (cache synced; binder Lease held, through a real
LeaderElector), the OpenAPI document, and the answers of every endpoint before the cache syncs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from extender import wellknown
from extender.emulator import Emulator
from extender.kube import client as kube_client
from extender.kube.bodies import micro_time
from extender.service import Runtime
from extender.simulate.cluster import crd_directory, strip_server_fields
from tests import builders as b
from tests.extender.harness import harness, settings, worker
from tests.waiting import eventually

pytestmark = pytest.mark.anyio

Obj = dict[str, Any]


def _families(text: str) -> dict[str, list[Sample]]:
    return {f.name: list(f.samples) for f in text_string_to_metric_families(text)}


def _value(samples: list[Sample], name: str, **labels: str) -> float:
    hits = [s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, (name, labels, samples)
    return hits[0]


def _scattered_job() -> list[Obj]:
    """A 2-worker RDMA job whose quotas sit on two leaves although one leaf holds it."""
    objs: list[Obj] = [b.podgroup("split", min_member=2)]
    for i, node in enumerate(("n0", "n4")):
        objs.append(b.quota(f"q-split-{i}", status={"phase": "QuotaBound", "nodeName": node}))
        objs.append(
            b.pod(f"split-worker-{i}", group="split", quota=f"q-split-{i}", index=i, node=node, phase="Running")
        )
    return objs


async def test_metrics_after_requests_and_cycles(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        h.apply(b.seed_cluster() + [b.podgroup("train", min_member=4)] + [b.quota(f"q-train-{i}") for i in range(4)])
        h.apply(b.training_job("wide", 9, gpu=8, hca=8) + _scattered_job())  # wide: 9 whole nodes of 8 → stuck
        await h.cl.settle()
        await h.create_pods([worker("train", i) for i in range(4)])
        cycles = 3
        for _ in range(cycles):
            await h.cycle()
        calls: dict[str, int] = {}
        post = h.scheduler._post

        async def counting(verb: str, body: Obj) -> Any:
            calls[verb] = calls.get(verb, 0) + 1
            return await post(verb, body)

        h.scheduler._post = counting  # type: ignore[method-assign]
        attempts = await h.scheduler.schedule_round()
        bound = [a for a in attempts if a.node]
        assert len(bound) == 4
        pod = h.pod("train-worker-0")
        await h.post("prioritize", {"Pod": pod, "Nodes": None, "NodeNames": ["n0", "n1"]})
        await h.post("preempt", {"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": {}})
        await h.client.post(f"{h.extender_url}/filter", content=b"{not json")
        await h.cl.settle()
        await h.cycle()
        cycles += 1

        r = await h.ops("/metrics")
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/plain; version=")
        fam = _families(r.text)

        # latency histograms per verb
        latency = fam["sky_extender_request_seconds"]
        assert calls["filter"] >= 4 and calls["bind"] == 4
        assert _value(latency, "sky_extender_request_seconds_count", verb="filter") == calls["filter"] + 1
        assert _value(latency, "sky_extender_request_seconds_count", verb="bind") == 4
        assert (
            _value(latency, "sky_extender_request_seconds_count", verb="prioritize") == calls.get("prioritize", 0) + 1
        )
        assert _value(latency, "sky_extender_request_seconds_count", verb="preempt") == calls.get("preempt", 0) + 1
        assert _value(latency, "sky_extender_request_seconds_bucket", verb="bind", le="+Inf") == 4
        assert _value(latency, "sky_extender_request_seconds_sum", verb="bind") > 0
        requests = fam["sky_extender_requests"]
        assert _value(requests, "sky_extender_requests_total", verb="bind", code="200") == 4

        # cycle time, per action and whole
        actions = {s.labels["action"] for s in fam["sky_binder_action_seconds"] if s.name.endswith("_count")}
        assert {"allocate_job", "allocate_zone", "allocate_quota", "release_quota"} <= actions
        assert _value(fam["sky_binder_cycle_seconds"], "sky_binder_cycle_seconds_count") == cycles

        # quotas by phase: train's 4 and split's 2 bound, wide's 9 not
        quotas = fam["sky_quotas"]
        assert _value(quotas, "sky_quotas", phase="QuotaBound") == 6
        assert _value(quotas, "sky_quotas", phase="QuotaEmpty") == 9

        # pending jobs by reason: wide waits for a zone
        assert _value(fam["sky_pending_jobs"], "sky_pending_jobs", reason="NoZoneFits") == 1
        assert len(fam["sky_pending_jobs"]) == 1

        # placements spanning more leaves than needed: split (2 quotas, 2 leaves, a leaf holds 4)
        assert _value(fam["sky_topology_extra_leaves"], "sky_topology_extra_leaves") == 1

        assert _value(fam["sky_cache_synced"], "sky_cache_synced") == 1
        assert _value(fam["sky_binder_leader"], "sky_binder_leader") == 1  # leader election off: always
        writes = fam["sky_binder_writes"]
        assert _value(writes, "sky_binder_writes_total", kind="quota_status", result="ok") >= 4


async def test_healthz_readyz_and_openapi(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        r = await h.ops("/healthz")
        assert (r.status_code, r.json()) == (200, {"status": "ok"})
        r = await h.ops("/readyz")
        assert (r.status_code, r.json()) == (200, {"ready": True, "cacheSynced": True, "binderLeader": True})
        r = await h.client.get(f"{h.extender_url}/healthz")
        assert (r.status_code, r.json()) == (200, {"status": "ok"})
        doc = (await h.ops("/openapi.json")).json()
        assert doc["openapi"].startswith("3.")
        paths = set(doc["paths"])
        assert {
            "/diagnose/job/{namespace}/{name}",
            "/diagnose/pod/{namespace}/{name}",
            "/policy",
            "/metrics",
            "/healthz",
            "/readyz",
        } <= paths
        ext = (await h.client.get(f"{h.extender_url}/openapi.json")).json()
        assert {"/filter", "/prioritize", "/bind", "/preempt"} <= set(ext["paths"])


async def test_every_endpoint_before_the_cache_syncs(tmp_path: Path) -> None:
    """The pod informer cannot list (the API answers 500): fast, clear answers everywhere."""
    async with Emulator() as emu:
        emu.load_yaml(crd_directory())
        emu.load([strip_server_fields(o) for o in b.seed_cluster()])
        fault = emu.faults.add("list", "pods", code=500)
        api = kube_client.from_url(emu.url, token=emu.token)
        rt = Runtime(settings(tmp_path / "tls"), api=api, webhook=False)
        try:
            await rt.start(serve=True, run_loop=False)
            ops, ext = rt.servers["ops"].url, rt.servers["extender"].url
            async with httpx.AsyncClient() as c:
                r = await c.get(f"{ops}/readyz")
                assert (r.status_code, r.json()) == (503, {"ready": False, "cacheSynced": False, "binderLeader": True})
                assert (await c.get(f"{ops}/healthz")).status_code == 200  # alive all the same
                r = await c.get(f"{ops}/policy")  # the policy does not wait for the cache
                assert (r.status_code, r.json()["source"]) == (200, "built-in")
                for path in ("/diagnose/job/default/train", "/diagnose/pod/default/train-worker-0"):
                    r = await c.get(f"{ops}{path}")
                    assert r.status_code == 503
                    assert r.json() == {"error": "the scheduler's cache is not synced yet; try again in a moment"}
                metrics = _families((await c.get(f"{ops}/metrics")).text)
                assert _value(metrics["sky_cache_synced"], "sky_cache_synced") == 0
                pod = b.pod("p")
                body = (await c.post(f"{ext}/filter", content=orjson.dumps({"Pod": pod, "NodeNames": ["n0"]}))).json()
                assert body["NodeNames"] == []
                assert body["FailedAndUnresolvableNodes"] == {
                    "n0": "CacheNotSynced(the scheduler is starting; retry in a moment)"
                }
                bind = {"PodName": "p", "PodNamespace": "default", "PodUID": pod["metadata"]["uid"], "Node": "n0"}
                r = await c.post(f"{ext}/bind", content=orjson.dumps(bind))
                assert r.json() == {"Error": "the scheduler's cache is not synced yet; the bind will be retried"}
                # the API recovers: ready
                fault.remove()
                await rt.wait_synced(timeout=30)
                r = await c.get(f"{ops}/readyz")
                assert (r.status_code, r.json()["cacheSynced"]) == (200, True)
        finally:
            await rt.stop()
            await kube_client.close(api)


def _lease(holder: str, namespace: str, name: str) -> Obj:
    now = micro_time()
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 3600,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 3,
        },
    }


# serve settings of a replica that elects a binder leader, on a fast clock
ELECTION: dict[str, Any] = {
    "leader_elect": True,
    "identity": "replica-a",
    "lease_namespace": "kube-system",
    "lease_duration": 2.0,
    "renew_deadline": 1.0,
    "retry_period": 0.05,
}


async def test_readyz_reports_the_binder_lease_of_a_real_leader_elector(tmp_path: Path) -> None:
    s: dict[str, Any] = dict(ELECTION)
    ns, name = "kube-system", wellknown.DEFAULT_BINDER_LEASE
    # another replica holds the binder Lease (renewed just now, for an hour)
    async with harness(tmp_path, existing=[_lease("replica-b", ns, name)], **s) as h:
        elector = h.rt.elector
        assert elector is not None
        await eventually(lambda: elector.leader == "replica-b", within=20.0)
        r = await h.ops("/readyz")
        assert (r.status_code, r.json()) == (200, {"ready": True, "cacheSynced": True, "binderLeader": False})
        metrics = _families((await h.ops("/metrics")).text)
        assert _value(metrics["sky_binder_leader"], "sky_binder_leader") == 0
        # the other replica steps down (releases the Lease): this one takes over
        lease = h.emulator.get("coordination.k8s.io/v1", "leases", name, ns)
        lease["spec"]["holderIdentity"] = ""
        h.emulator.update(lease)
        await eventually(lambda: elector.is_leader, within=20.0)
        r = await h.ops("/readyz")
        assert r.json() == {"ready": True, "cacheSynced": True, "binderLeader": True}
        held = h.emulator.get("coordination.k8s.io/v1", "leases", name, ns)
        assert held["spec"]["holderIdentity"] == "replica-a"
        metrics = _families((await h.ops("/metrics")).text)
        assert _value(metrics["sky_binder_leader"], "sky_binder_leader") == 1


async def test_not_leading_replica_serves_the_extender_but_runs_no_cycle(tmp_path: Path) -> None:
    s: dict[str, Any] = {**ELECTION, "binder_period": 0.05}
    lease = _lease("replica-b", "kube-system", wellknown.DEFAULT_BINDER_LEASE)
    async with harness(tmp_path, existing=[lease], **s) as h:
        elector = h.rt.elector
        assert elector is not None
        await eventually(lambda: elector.leader == "replica-b", within=20.0)
        h.apply(b.seed_cluster() + b.training_job("train", 4))
        await h.cl.settle()
        loop = h.rt.loop
        assert loop is not None
        assert loop.is_leader() is False  # the loop's gate: the Lease (and a synced cache)
        stop = asyncio.Event()
        running = asyncio.create_task(loop.run(stop))
        await asyncio.sleep(20 * loop.period)  # twenty periods: a leader would have cycled
        stop.set()
        await running
        assert loop.last is None
        assert h.cl.quota_nodes() == dict.fromkeys((f"q-train-{i}" for i in range(4)), "")
        # the extender still answers (every replica serves it; only the binder is leader-elected)
        pod = h.pod("train-worker-0")
        body = (await h.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": ["n0"]})).json()
        assert body["FailedAndUnresolvableNodes"] == {
            "n0": "QuotaNotBound(quota q-train-0 not bound yet: waiting for the binder)"
        }


async def test_metrics_follow_prometheus_conventions(tmp_path: Path) -> None:
    """Over HTTP: per-queue gauges from the cache, build info, process and GC series, no
    ``_created`` series, and the webhook's latency apart from the extender's."""
    async with harness(tmp_path) as h:
        objs = b.seed_cluster() + b.training_job("wait", 2, gpu=4, hca=None)  # 2 claims of 4 GPU, pending
        objs += [b.queue("research"), b.queue("infer"), b.quota("q-idle", queue="infer", gpu=2, hca=None)]
        h.apply(objs + _scattered_job())  # split: 2 quotas of 1 GPU, both pods running
        await h.cl.settle()
        r = await h.ops("/metrics")
        assert r.status_code == 200
        fam = _families(r.text)
        gpu = wellknown.RESOURCE_GPU
        alloc, nominal = fam["sky_queue_allocated"], fam["sky_queue_nominal"]
        assert _value(alloc, "sky_queue_allocated", queue="research", resource=gpu, spec="") == 4 * 2 + 2
        assert _value(nominal, "sky_queue_nominal", queue="research", resource=gpu, spec="") == 4 * 2 + 2
        assert _value(alloc, "sky_queue_allocated", queue="infer", resource=gpu, spec="") == 0
        assert _value(nominal, "sky_queue_nominal", queue="infer", resource=gpu, spec="") == 2
        assert _value(fam["sky_queue_pending_jobs"], "sky_queue_pending_jobs", queue="research") == 1
        assert _value(fam["sky_queue_running_jobs"], "sky_queue_running_jobs", queue="research") == 1
        info = fam["sky_build_info"]
        assert len(info) == 1 and info[0].value == 1 and info[0].labels["version"]
        assert "process_resident_memory_bytes" in fam and "python_gc_collections" in fam and "python_info" in fam
        assert not [line for line in r.text.splitlines() if "_created" in line]
        hook = h.rt.servers.get("webhook")
        assert hook is not None
        async with httpx.AsyncClient(verify=False) as c:
            assert (await c.post(f"{hook.url}/mutate/pods", content=b"{}")).status_code == 400
        fam = _families((await h.ops("/metrics")).text)
        assert _value(fam["sky_webhook_request_seconds"], "sky_webhook_request_seconds_count") == 1
        assert _value(fam["sky_webhook_requests"], "sky_webhook_requests_total", code="400") == 1
        assert not [s for s in fam["sky_extender_request_seconds"] if s.labels.get("verb") == "mutate"]
