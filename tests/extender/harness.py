"""A whole cluster for the extender's end-to-end tests: the emulator, the real service on top
of it (informers, cache, binder loop stepped by hand, extender / ops / webhook over HTTP), and
the stand-ins for kube-apiserver (pods created through the webhook) and kube-scheduler (in-tree
fit, then filter / prioritize / bind / preempt over HTTP)."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson

from extender import wellknown
from extender.emulator import Emulator
from extender.service import Runtime
from extender.settings import ServeSettings
from extender.simulate.actors import ApiServerStandIn, HttpClient, Kubelet, KubeSchedulerStandIn
from extender.simulate.certs import write_self_signed
from extender.simulate.cluster import LocalCluster, local_settings, strip_server_fields
from extender.state import ServiceState

Obj = dict[str, Any]

CLOCK_START = 1_900_000_000.0


class Clock:
    """Simulated time for the cache, the binder and the extender (never the wall clock)."""

    def __init__(self, now: float = CLOCK_START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Harness:
    """``client`` is ours (httpx); the stand-ins use the simulator's own HTTP client."""

    def __init__(self, cl: LocalCluster, client: httpx.AsyncClient, actors: HttpClient, clock: Clock) -> None:
        self.cl = cl
        self.client = client
        self.clock = clock
        rt = cl.rt
        hook = rt.servers.get("webhook")
        self.apiserver = ApiServerStandIn(cl.emulator, hook.url if hook is not None else None, actors)
        self.scheduler = KubeSchedulerStandIn(cl.emulator, rt.servers["extender"].url, actors)
        self.kubelet = Kubelet(cl.emulator)

    @property
    def emulator(self) -> Emulator:
        return self.cl.emulator

    @property
    def rt(self) -> Runtime:
        return self.cl.rt

    @property
    def state(self) -> ServiceState:
        assert self.rt.state is not None
        return self.rt.state

    @property
    def extender_url(self) -> str:
        return self.rt.servers["extender"].url

    @property
    def ops_url(self) -> str:
        return self.rt.servers["ops"].url

    async def post(self, verb: str, body: Any) -> httpx.Response:
        return await self.client.post(
            f"{self.extender_url}/{verb}", content=orjson.dumps(body), headers={"Content-Type": "application/json"}
        )

    async def ops(self, path: str) -> httpx.Response:
        return await self.client.get(f"{self.ops_url}{path}")

    def apply(self, objs: list[Obj]) -> list[Obj]:
        return self.cl.apply(objs)

    async def create_pods(self, pods: list[Obj]) -> list[Obj]:
        """Through the apiserver stand-in: defaulting, the webhook over HTTPS, then storage."""
        out = []
        for p in pods:
            out.append(await self.apiserver.create_pod(strip_server_fields(p)))
        await self.cl.settle()
        return out

    async def cycle(self) -> Any:
        self.clock.advance(self.cl.settings.binder_period)
        return await self.cl.cycle()

    def pod(self, name: str, namespace: str = "default") -> Obj:
        return self.emulator.get("v1", "pods", name, namespace)

    def binding_posts(self, name: str | None = None) -> int:
        return sum(
            1
            for r in self.emulator.journal.records()
            if r.method == "POST" and r.resource == "pods" and r.subresource == "binding" and name in (None, r.name)
        )

    def events(self, **match: str) -> list[Obj]:
        out = []
        for e in self.emulator.list("v1", "events"):
            inv = e.get("involvedObject") or {}
            if all(inv.get(k) == v for k, v in match.items()):
                out.append(e)
        return out


def settings(tls_dir: Path, **changes: Any) -> ServeSettings:
    return local_settings(write_self_signed(tls_dir), **changes)


@asynccontextmanager
async def harness(tmp_path: Path, *, existing: list[Obj] | None = None, **changes: Any) -> AsyncIterator[Harness]:
    """``existing``: built-in objects in the API before the service starts (a Lease another
    replica holds); ``changes``: ServeSettings fields."""
    clock = Clock()
    s = settings(tmp_path / "tls", **changes)
    cl = LocalCluster(settings=s, serve=True, clock=clock)
    for obj in existing or ():
        cl.emulator.apply(obj)
    await cl.start()
    ca = tmp_path / "tls" / "ca.crt"
    actors = HttpClient(ca_file=ca)
    try:
        async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=str(ca)), timeout=30.0) as client:
            yield Harness(cl, client, actors, clock)
    finally:
        await actors.close()
        await cl.stop()


def worker(
    job: str,
    i: int,
    *,
    namespace: str = "default",
    gpu: int = 1,
    hca: int | None = 1,
    priority: int = 0,
    extra: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    group: bool = True,
) -> Obj:
    """A training worker as a controller would create it: no quota yet (the webhook assigns one)."""
    req: dict[str, str] = {"cpu": "4", "memory": "32Gi", wellknown.RESOURCE_GPU: str(gpu)}
    if hca is not None:
        req[wellknown.RESOURCE_RDMA_HCA] = str(hca)
    req.update(extra or {})
    anno = dict(annotations or {})
    if group:
        anno[wellknown.ANNO_GROUP_NAME] = job
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-worker-{i}",
            "namespace": namespace,
            "labels": {"training.kubeflow.org/job-name": job, "training.kubeflow.org/replica-index": str(i)},
            "annotations": anno,
        },
        "spec": {
            "schedulerName": wellknown.SCHEDULER_NAME,
            "priority": priority,
            "containers": [
                {"name": "trainer", "image": "pytorch/pytorch:2", "resources": {"requests": req, "limits": dict(req)}}
            ],
        },
    }
