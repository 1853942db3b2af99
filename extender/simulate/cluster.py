"""A whole cluster in one process: the Kubernetes API emulator plus the real service on top of it.

The same :class:`~extender.service.Runtime` that ``sky-scheduler serve`` runs in a Deployment —
informers, cache, binder loop, extender, webhook, ops — talks to the emulator over real HTTP with
kubernetes-asyncio. The simulator, the sandbox and the integration tests all use this; the
binder can be stepped one cycle at a time (:meth:`LocalCluster.cycle`) so that results are
deterministic, and :meth:`LocalCluster.settle` waits until every informer has caught up with the
emulator.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path
from typing import Any

from extender.binder.loop import CycleReport
from extender.emulator import Emulator
from extender.framework.policy import Policy
from extender.kube import client as kube_client
from extender.service import INFORMED, POD_FIELD_SELECTOR, Runtime
from extender.settings import ServeSettings
from extender.simulate.certs import TLSFiles

__all__ = ["LocalCluster", "crd_directory", "local_settings", "strip_server_fields"]

Obj = dict[str, Any]

_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink")


def local_settings(tls: TLSFiles | None = None, **changes: Any) -> ServeSettings:
    """Settings for a one-process cluster: no leader election, every server on 127.0.0.1 on a
    port the kernel picks, and the webhook served with ``tls`` when given."""
    values: dict[str, Any] = {
        "leader_elect": False,
        "extender_address": "127.0.0.1",
        "extender_port": 0,
        "ops_address": "127.0.0.1",
        "ops_port": 0,
        "webhook_address": "127.0.0.1",
        "webhook_port": 0,
        # one process that holds many clusters in its life (tests, the simulator): freezing its
        # heap would keep every earlier cluster's cycles until the next settle
        "gc_refreeze_seconds": 0.0,
        # policy_reload_seconds keeps its default: it acts only with a ``policy`` file, which
        # nothing here sets (the simulator passes policy objects); a sandbox given one reloads it
    }
    if tls is not None:
        values.update(tls_cert_file=str(tls.cert_file), tls_key_file=str(tls.key_file))
    values.update(changes)
    return ServeSettings(**values)


def crd_directory() -> Path:
    """The project's CRDs as shipped with the package."""
    return Path(str(resources.files("extender").joinpath("crds")))


def strip_server_fields(obj: Obj) -> Obj:
    """A copy without the fields the API server sets itself."""
    out = copy.deepcopy(obj)
    meta = out.get("metadata") or {}
    for k in _SERVER_FIELDS:
        meta.pop(k, None)
    return out


class LocalCluster:
    def __init__(
        self,
        *,
        settings: ServeSettings | None = None,
        policy: Policy | None = None,
        serve: bool = False,
        run_loop: bool = False,
        clock: Callable[[], float] | None = None,
        history_size: int = 100_000,
        emulator_port: int = 0,
    ) -> None:
        self.settings = settings or local_settings()
        self.policy = policy
        self.serve = serve
        self.run_loop = run_loop
        self.clock = clock
        self.emulator = Emulator(history_size=history_size, port=emulator_port)
        self.runtime: Runtime | None = None
        self._api: Any = None

    @property
    def rt(self) -> Runtime:
        assert self.runtime is not None, "the cluster is not started"
        return self.runtime

    # --- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> LocalCluster:
        await self.emulator.start_async()
        self.emulator.load_yaml(crd_directory())
        self._api = kube_client.from_url(self.emulator.url, token=self.emulator.token)
        await self._start_runtime()
        return self

    async def _start_runtime(self) -> None:
        self.runtime = Runtime(
            self.settings,
            api=self._api,
            policy=self.policy,
            clock=self.clock,
            webhook=self.serve and bool(self.settings.tls_cert_file),
        )
        await self.runtime.start(serve=self.serve, run_loop=self.run_loop)
        await self.runtime.wait_synced()

    async def stop(self) -> None:
        if self.runtime is not None:
            await self.runtime.stop()
        if self._api is not None:
            await kube_client.close(self._api)
        await self.emulator.stop_async()

    async def restart(self) -> None:
        """The service's process is replaced (a rollout, a crash): the runtime stops and a new one
        starts on the same API with fresh informers, cache and scheduler memory, as a new pod of
        the Deployment would, and leads from its first cycle on."""
        await self.rt.stop()
        await self._start_runtime()

    async def __aenter__(self) -> LocalCluster:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- driving -------------------------------------------------------------------------------
    def apply(self, objs: Iterable[Obj]) -> list[Obj]:
        """Create or update objects (server-set metadata is dropped first; statuses are kept)."""
        return self.emulator.load([strip_server_fields(o) for o in objs])

    async def settle(self, timeout: float = 10.0) -> None:
        """Wait until every informer's store matches the emulator (same keys, same versions)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            if self._in_step():
                return
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError("informers did not catch up with the emulator")
            await asyncio.sleep(0.005)

    def _in_step(self) -> bool:
        by_name = {inf.name: inf for inf in self.rt.informers}
        for resource, kind in INFORMED:
            inf = by_name[kind]
            api_version = f"{resource.group}/{resource.version}" if resource.group else resource.version
            selector = POD_FIELD_SELECTOR if kind == "pod" else None
            items = self.emulator.list(api_version, resource.plural, field_selector=selector)
            want = {_key(o): o["metadata"]["resourceVersion"] for o in items}
            have = {k: (o.get("metadata") or {}).get("resourceVersion") for k, o in inf.store.items()}
            if want != have:
                return False
        return True

    async def cycle(self) -> CycleReport:
        """One binder cycle on a settled cache; returns once its writes are visible again."""
        await self.settle()
        assert self.rt.loop is not None
        report = await self.rt.loop.run_cycle()
        await self.settle()
        return report

    async def cycles(self, n: int) -> list[CycleReport]:
        return [await self.cycle() for _ in range(n)]

    # --- reading -------------------------------------------------------------------------------
    def quota_nodes(self) -> dict[str, str]:
        return {
            q["metadata"]["name"]: (q.get("status") or {}).get("nodeName") or ""
            for q in self.emulator.list("scheduling.infini-ai.com/v1alpha1", "quotas")
        }

    def pods(self, namespace: str | None = None) -> list[Obj]:
        return self.emulator.list("v1", "pods", namespace=namespace)

    def with_settings(self, **changes: Any) -> ServeSettings:
        return dataclasses.replace(self.settings, **changes)


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))
