"""A whole cluster for the hop-① end-to-end tests: the API emulator, the real service with its
webhook over HTTPS (a throwaway CA), the binder loop stepped by the test, and the stand-ins for
kube-apiserver (admission exactly as it calls webhooks), kube-scheduler (filter / prioritize /
bind against the extender) and the kubelet.

:class:`Replica` is a second service process on the same emulator — its own informers, cache,
webhook and in-flight registry, as a second Deployment replica would have; its binder loop never
runs (it does not hold the Lease).

Time: the cache and the binder run on an injected :class:`~extender.simulate.runner.SimClock`;
tests advance it instead of sleeping.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from extender import wellknown
from extender.binder.loop import CycleReport
from extender.emulator import Emulator
from extender.kube import client as kube_client
from extender.model.resources import Resource
from extender.service import INFORMED, POD_FIELD_SELECTOR, Runtime
from extender.settings import ServeSettings
from extender.simulate.actors import ApiServerStandIn, HttpClient, Kubelet, KubeSchedulerStandIn
from extender.simulate.certs import TLSFiles, write_self_signed
from extender.simulate.cluster import LocalCluster, local_settings
from extender.simulate.runner import SimClock
from tests import builders as b
from webhooks.server import WebhookServer
from webhooks.state import WebhookState

Obj = dict[str, Any]

GPU = wellknown.RESOURCE_GPU
HCA = wellknown.RESOURCE_RDMA_HCA
QUOTA = wellknown.ANNO_QUOTA_NAME
QUOTA_NODE = wellknown.ANNO_QUOTA_NODE
REASON = wellknown.ANNO_SCHEDULING_REASON
INHERIT = wellknown.ANNO_INHERIT_RESOURCE_FROM


def in_step(emulator: Emulator, rt: Runtime) -> bool:
    """Every informer of ``rt`` holds exactly what the emulator holds (keys and versions)."""
    by_name = {inf.name: inf for inf in rt.informers}
    for resource, kind in INFORMED:
        inf = by_name[kind]
        api_version = f"{resource.group}/{resource.version}" if resource.group else resource.version
        selector = POD_FIELD_SELECTOR if kind == "pod" else None
        items = emulator.list(api_version, resource.plural, field_selector=selector)
        want = {_key(o): o["metadata"]["resourceVersion"] for o in items}
        have = {k: (o.get("metadata") or {}).get("resourceVersion") for k, o in inf.store.items()}
        if want != have:
            return False
    return True


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def webhook_state(rt: Runtime) -> WebhookState:
    """The state of the webhook app a Runtime serves."""
    server = rt.servers["webhook"]
    assert isinstance(server, WebhookServer), server
    state = getattr(getattr(server.app, "state", None), "webhook", None)  # FastAPI's app.state
    assert isinstance(state, WebhookState)
    return state


def use_clock(rt: Runtime, clock: SimClock) -> None:
    """Put the webhook on the injected clock too. ``Runtime`` hands its ``clock`` to the cache but
    not to the webhook's ``WebhookState`` (which then runs on ``time.time``): in-flight TTLs and
    reservation expiry at admission would otherwise be judged on another clock than the loop's."""
    webhook_state(rt).clock = clock


class Replica:
    """A second service replica on the same emulator: informers, cache and webhook only."""

    def __init__(self, emulator: Emulator, settings: ServeSettings, clock: SimClock) -> None:
        self.emulator = emulator
        self.api = kube_client.from_url(emulator.url, token=emulator.token)
        self.clock = clock
        self.rt = Runtime(settings, api=self.api, clock=clock, webhook=True)

    async def start(self) -> Replica:
        await self.rt.start(serve=True, run_loop=False)
        await self.rt.wait_synced()
        use_clock(self.rt, self.clock)
        return self

    async def stop(self) -> None:
        await self.rt.stop()
        await kube_client.close(self.api)

    @property
    def webhook_url(self) -> str:
        return self.rt.servers["webhook"].url


@dataclass
class Hop1:
    cluster: LocalCluster
    clock: SimClock
    tls: TLSFiles
    client: HttpClient
    apiserver: ApiServerStandIn  # admits through the leader's webhook
    scheduler: KubeSchedulerStandIn
    kubelet: Kubelet
    replicas: list[Replica]

    @property
    def emulator(self) -> Emulator:
        return self.cluster.emulator

    @property
    def webhook_url(self) -> str:
        return self.cluster.rt.servers["webhook"].url

    def apiserver_for(self, replica: Replica) -> ApiServerStandIn:
        return ApiServerStandIn(self.emulator, replica.webhook_url, self.client)

    # --- driving -------------------------------------------------------------------------------
    def apply(self, objs: Iterable[Obj]) -> list[Obj]:
        return self.cluster.apply(objs)

    async def settle(self) -> None:
        """Every replica's informers (the leader's included) caught up with the emulator."""
        await self.cluster.settle()
        for r in self.replicas:
            deadline = 500
            while not in_step(self.emulator, r.rt):
                deadline -= 1
                if deadline == 0:
                    raise TimeoutError("a replica's informers did not catch up")
                await _sleep()

    async def cycle(self) -> CycleReport:
        """One binder period of simulated time, then one cycle of the leader's loop."""
        self.clock.advance(self.cluster.settings.binder_period)
        await self.settle()
        report = await self.cluster.cycle()
        await self.settle()
        assert not report.failed, report.failed
        return report

    async def cycles_until_quiet(self, limit: int = 8) -> list[CycleReport]:
        reports = []
        for _ in range(limit):
            report = await self.cycle()
            reports.append(report)
            if not report.quota_writes and not report.pod_writes:
                return reports
        raise AssertionError(f"the binder still writes after {limit} cycles")

    async def admit(self, pod: Obj) -> Obj:
        """Create a pod as kube-apiserver does: the webhook over HTTPS, then the store."""
        created = await self.apiserver.create_pod(pod)
        await self.settle()
        return created

    async def schedule(self, rounds: int = 4) -> None:
        """kube-scheduler rounds, the kubelet starting what got bound, binder cycles in between."""
        for _ in range(rounds):
            attempts = await self.scheduler.schedule_round()
            await self.settle()
            started = self.kubelet.run_bound_pods()
            report = await self.cycle()
            if not any(a.node for a in attempts) and not started and not report.pod_writes:
                return

    # --- reading -------------------------------------------------------------------------------
    def pod(self, name: str, namespace: str = "default") -> Obj:
        return self.emulator.get("v1", "pods", name, namespace)

    def quota(self, name: str) -> Obj:
        return self.emulator.get(wellknown.API_VERSION, wellknown.QUOTAS, name)

    def quotas(self) -> dict[str, Obj]:
        return {q["metadata"]["name"]: q for q in self.emulator.list(wellknown.API_VERSION, wellknown.QUOTAS)}

    def pods(self, namespace: str | None = None) -> list[Obj]:
        return self.emulator.list("v1", "pods", namespace=namespace)


def annos(pod: Obj) -> dict[str, str]:
    anns: dict[str, str] = pod["metadata"].get("annotations") or {}
    return anns


def claims_from_pods(pods: Iterable[Obj], quotas: dict[str, Obj]) -> dict[str, Resource]:
    """Σ request of the live pods claiming each quota, per resource name the quota declares —
    computed from the pods' annotations as stored in the API (the source of truth)."""
    out: defaultdict[str, Resource] = defaultdict(Resource.empty)
    for p in pods:
        if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        name = annos(p).get(QUOTA)
        if not name or name not in quotas:
            continue
        declared = set(quotas[name]["spec"]["request"])
        requests = Resource.empty()
        for c in p["spec"]["containers"]:
            requests.iadd(Resource.from_list((c.get("resources") or {}).get("requests")))
        out[name].iadd(Resource({k: v for k, v in requests.q.items() if k in declared}))
    return dict(out)


def over_claimed(pods: Iterable[Obj], quotas: dict[str, Obj]) -> dict[str, str]:
    """Invariant 3 from the API state: quota → how its claims exceed request + shadow."""
    out: dict[str, str] = {}
    for name, total in claims_from_pods(pods, quotas).items():
        spec = quotas[name]["spec"]
        cap = Resource.from_list(spec["request"]) + Resource.from_list(spec.get("shadowResource"))
        if not total.less_equal(cap):
            out[name] = f"{total} > {cap}"
    return out


async def _sleep() -> None:
    await asyncio.sleep(0.01)


@asynccontextmanager
async def hop1_cluster(
    *, replicas: int = 0, reservation_ttl: float = 600.0, objs: Iterable[Obj] = ()
) -> AsyncIterator[Hop1]:
    """The leader (emulator + service + webhook + stepped loop) and ``replicas`` extra replicas."""
    with tempfile.TemporaryDirectory(prefix="sky-hop1-") as tmp:
        tls = write_self_signed(Path(tmp))
        settings = local_settings(tls, reservation_ttl=reservation_ttl)
        clock = SimClock()
        cluster = LocalCluster(settings=settings, serve=True, clock=clock)
        await cluster.start()
        use_clock(cluster.rt, clock)
        extra: list[Replica] = []
        try:
            client = HttpClient(ca_file=tls.ca_file)
            try:
                for _ in range(replicas):
                    extra.append(await Replica(cluster.emulator, settings, clock).start())
                rt = cluster.rt
                h = Hop1(
                    cluster=cluster,
                    clock=clock,
                    tls=tls,
                    client=client,
                    apiserver=ApiServerStandIn(cluster.emulator, rt.servers["webhook"].url, client),
                    scheduler=KubeSchedulerStandIn(cluster.emulator, rt.servers["extender"].url, client),
                    kubelet=Kubelet(cluster.emulator),
                    replicas=extra,
                )
                h.apply(objs)
                await h.settle()
                yield h
            finally:
                await client.close()
        finally:
            for r in extra:
                await r.stop()
            await cluster.stop()


def new_pod(name: str, **kw: Any) -> Obj:
    """A pod as a client sends it to kube-apiserver (no uid, resourceVersion, timestamps or status)."""
    pod = b.pod(name, **kw)
    meta = pod["metadata"]
    for k in ("uid", "resourceVersion", "creationTimestamp"):
        meta.pop(k, None)
    pod.pop("status", None)
    return pod
