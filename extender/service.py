"""The running service: one asyncio process, one informer cache (DESIGN §2).

:class:`Runtime` owns, in start order: the API client, the writer, the cache and its informers
(nodes, pods, quotas, nodetopologies, podgroups, queues, jobqueues, namespaces), the scheduler
and the binder loop (run only while this replica holds the binder Lease), and the HTTP apps —
extender (plain HTTP on loopback, for the kube-scheduler container of the same pod), webhook
(HTTPS, for kube-apiserver) and ops (/healthz /readyz /metrics /diagnose /policy); with
``--policy FILE``, the policy watcher (``extender.policy_reload``), which applies an edited policy
file through :meth:`Runtime.swap_policy`. ``sky-scheduler serve`` runs it until SIGTERM; the
simulator and the sandbox run it against the emulator; tests do too.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from extender import heap, wellknown
from extender.api import extender as extender_api
from extender.api import ops as ops_api
from extender.binder.loop import BinderLoop
from extender.cache import departures
from extender.cache.cache import ClusterCache
from extender.cache.convert import ConvertOptions, pod_job_key, task_index
from extender.cache.gate import ReadGate
from extender.conf import (
    PolicyUnreadable,
    check_settings,
    default_policy_text,
    load_policy_bytes,
    load_policy_text,
    policy_sha256,
    read_policy_file,
)
from extender.framework.policy import Policy
from extender.kube import client as kube_client
from extender.kube.errors import KubeError
from extender.kube.informer import Informer, Resource
from extender.kube.leader import LeaderElector
from extender.kube.writer import KubeWriter
from extender.metrics import Metrics
from extender.model.topology import parse_tier_labels
from extender.policy_reload import PolicyStatus, PolicyWatcher
from extender.scheduler import Scheduler
from extender.servers import AppServer, watch_tls
from extender.settings import ServeSettings
from extender.state import ServiceState
from webhooks import app as webhook_app
from webhooks.namespaces import NamespaceLabelStore
from webhooks.server import WebhookServer
from webhooks.state import WebhookConfig, WebhookState

__all__ = ["INFORMED", "Runtime"]

log = logging.getLogger(__name__)

# resource → the cache's handler prefix (on_<kind>_add / _update / _delete)
INFORMED: tuple[tuple[Resource, str], ...] = (
    (Resource("", "v1", "nodes"), "node"),
    (Resource("", "v1", "pods"), "pod"),
    (Resource(wellknown.GROUP, wellknown.VERSION, wellknown.QUOTAS), "quota"),
    (Resource(wellknown.GROUP, wellknown.VERSION, wellknown.NODETOPOLOGIES), "topology"),
    (Resource(wellknown.GROUP, wellknown.VERSION, wellknown.PODGROUPS), "podgroup"),
    (Resource(wellknown.GROUP, wellknown.VERSION, wellknown.QUEUES), "queue"),
    (Resource(wellknown.GROUP, wellknown.VERSION, wellknown.JOBQUEUES), "jobqueue"),
)

# like kube-scheduler: terminal pods hold nothing (a pod that turns Failed or Succeeded arrives
# as a DELETED event carrying its final state, which is what the reservation logic needs)
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
DEPARTURE_READS = 16
"""Pods read at once after the sync (:meth:`Runtime._adopt_departures`)."""


class _CacheHandler:
    """Adapts informer callbacks to the cache's ``on_<kind>_*`` methods (and tells ``seen`` about
    every new object, for listeners such as the webhook's in-flight registry)."""

    def __init__(self, cache: object, kind: str, seen: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._add = getattr(cache, f"on_{kind}_add")
        self._update = getattr(cache, f"on_{kind}_update")
        self._delete = getattr(cache, f"on_{kind}_delete")
        self._seen = seen
        # the scheduler's cache: its writers wait while a binder cycle reads it off the loop
        self._gate: ReadGate | None = getattr(cache, "gate", None)

    def on_add(self, obj: dict[str, Any]) -> Awaitable[None] | None:
        if self._gate is not None and self._gate.busy:  # apply once the off-loop reader is done
            return self._later(self.on_add, obj)
        self._add(obj)
        if self._seen is not None:
            self._seen(obj)
        return None

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> Awaitable[None] | None:
        if self._gate is not None and self._gate.busy:
            return self._later(self.on_update, old, new)
        self._update(old, new)
        return None

    def on_delete(self, obj: dict[str, Any]) -> Awaitable[None] | None:
        if self._gate is not None and self._gate.busy:
            return self._later(self.on_delete, obj)
        self._delete(obj)
        return None

    async def _later(self, deliver: Callable[..., Awaitable[None] | None], *args: dict[str, Any]) -> None:
        """The informer awaits this before its next event: the events stay in order."""
        assert self._gate is not None
        await self._gate.writable()
        deliver(*args)  # the gate is open and nothing awaits in between: applied at once


class Runtime:
    def __init__(
        self,
        settings: ServeSettings,
        *,
        api: Any | None = None,
        policy: Policy | None = None,
        clock: Callable[[], float] | None = None,
        webhook: bool | None = None,
    ) -> None:
        """``webhook``: serve the webhook (default: when ``--webhook-port`` is not 0); True with
        port 0 binds an ephemeral port (local clusters, tests). ``policy``: use this policy
        rather than ``settings.policy`` (the file is still watched: a change of it applies)."""
        self.settings = settings
        self.webhook = bool(settings.webhook_port) if webhook is None else webhook
        self._api = api
        self._own_api = api is None
        self.policy, self.policy_status = self._initial_policy(settings, policy)
        opts = ConvertOptions(
            gpu_spec_labels=tuple(k.strip() for k in settings.gpu_spec_labels.split(",") if k.strip()),
            tier_labels=parse_tier_labels(settings.topology_labels),
            spot_resource=settings.spot_resource,
            gpu_resources=settings.gpu_resource_names(),
        )
        cache_kw: dict[str, Any] = {
            "scheduler_name": settings.scheduler_name,
            "reservation_ttl": settings.reservation_ttl,
        }
        if clock is not None:
            cache_kw["clock"] = clock
        self.cache = ClusterCache(opts, **cache_kw)
        self.namespaces = NamespaceLabelStore()
        self.metrics = Metrics()
        st = self.policy_status
        self.metrics.set_policy(st.sha256, st.source, st.loaded_at)
        self.scheduler = Scheduler(self.policy)
        self.policy_watcher: PolicyWatcher | None = None
        self.informers: list[Informer] = []
        self.writer: KubeWriter | None = None
        self.elector: LeaderElector | None = None
        self.loop: BinderLoop | None = None
        self.state: ServiceState | None = None
        self.servers: dict[str, AppServer] = {}
        self.webhook_state: WebhookState | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._stop = asyncio.Event()
        self._ready = asyncio.Event()  # set by _when_synced
        self._sync_task: asyncio.Task[None] | None = None

    @staticmethod
    def _initial_policy(settings: ServeSettings, given: Policy | None) -> tuple[Policy, PolicyStatus]:
        """The policy to start with (``given``, else ``--policy``, else the built-in one), refused
        with :class:`PolicyError` when invalid or when it contradicts the settings
        (:func:`extender.conf.check_settings`)."""
        now = time.time()
        spot = settings.spot_resource
        if given is not None:
            check_settings(given, spot_resource=spot)
            return given, PolicyStatus(source=given.source, sha256="", loaded_at=now)
        if settings.policy:
            # the loader of every reload, on bytes whose hash is the watcher's baseline
            data = read_policy_file(settings.policy)
            policy = load_policy_bytes(data, settings.policy, spot_resource=spot)
            return policy, PolicyStatus(source=settings.policy, sha256=policy_sha256(data), loaded_at=now)
        text = default_policy_text()
        policy = load_policy_text(text, "default_policy.yaml", spot_resource=spot)
        return policy, PolicyStatus(source="built-in", sha256=policy_sha256(text.encode()), loaded_at=now)

    def swap_policy(self, policy: Policy) -> None:
        """Make ``policy`` the one of every component, from its next cycle or request on.

        Atomic without a lock: this runs on the event loop, and what reads the policy runs
        synchronously between two awaits — a binder cycle's decisions (snapshot → run_once →
        plan, before its first write), an extender verb's decision (``ServiceState.session``
        through the reply, or a bind's decision before its first API call), a webhook review
        (``webhooks.app.handle``), a /diagnose — so none of them sees two policies. The binder
        loop holds no policy of its own (it runs ``self.scheduler``); the extender's reused
        session is dropped because it was opened with the old one (``ServiceState.session``
        compares the policy too)."""
        self.policy = policy
        self.scheduler.swap_policy(policy)
        if self.state is not None:
            self.state.policy = policy
        if self.webhook_state is not None:
            self.webhook_state.policy = policy

    # --- state ---------------------------------------------------------------------------------
    def synced(self) -> bool:
        """The informers have listed everything once, and the places of pods that went while no
        replica watched are kept (:meth:`_adopt_departures`): the cache may be judged from."""
        return self._ready.is_set()

    def is_leader(self) -> bool:
        if not self.settings.leader_elect:
            return True
        return self.elector is not None and self.elector.is_leader

    # --- lifecycle -----------------------------------------------------------------------------
    async def start(self, *, serve: bool = True, run_loop: bool = True) -> None:
        """Start everything; ``run_loop=False`` leaves the binder cycles to the caller
        (``await runtime.loop.run_cycle()``: the simulator and tests step it deterministically)."""
        s = self.settings
        if self._api is None:
            self._api = await kube_client.new_client(s.kubeconfig or None)
        self.writer = KubeWriter(self._api, component=wellknown.COMPONENT)
        for resource, kind in INFORMED:
            selector = POD_FIELD_SELECTOR if kind == "pod" else None
            seen = self._pod_seen if kind == "pod" else None
            inf = Informer(
                self._api, resource, _CacheHandler(self.cache, kind, seen), field_selector=selector, name=kind
            )
            self.informers.append(inf)
            inf.start()
        ns_informer = Informer(
            self._api, Resource("", "v1", "namespaces"), _CacheHandler(self.namespaces, "namespace"), name="namespace"
        )
        self.informers.append(ns_informer)
        ns_informer.start()
        self._sync_task = asyncio.create_task(self._when_synced(), name="cache sync")
        if s.leader_elect:
            self.elector = LeaderElector(
                self.writer,
                lease_name=s.lease_name,
                namespace=s.lease_namespace,
                identity=s.identity,
                lease_duration=s.lease_duration,
                renew_deadline=s.renew_deadline,
                retry_period=s.retry_period,
            )
            self.elector.start()
        elector = self.elector
        self.loop = BinderLoop(
            self.cache,
            self.scheduler,
            # a leader's writes: none is sent, or done by the API server, once the lease may be lost
            self.writer if elector is None else self.writer.fenced(elector.lease_left),
            period=s.binder_period,
            is_leader=lambda: self.is_leader() and self.synced(),
            metrics=self.metrics,
        )
        self.state = ServiceState(
            cache=self.cache,
            policy=self.policy,
            metrics=self.metrics,
            writer=self.writer,
            loop=self.loop,
            synced=self.synced,
            is_leader=self.is_leader,
            scheduler_name=s.scheduler_name,
            max_body_bytes=s.max_body_bytes,
            policy_status=self.policy_status,
        )
        state = self.state
        self.metrics.watch_queues(lambda: state.snapshot() if self.synced() else None)
        if run_loop:
            self._tasks.append(asyncio.create_task(self.loop.run(self._stop), name="binder loop"))
        if s.gc_refreeze_seconds > 0:
            self._tasks.append(asyncio.create_task(self._keep_heap(), name="heap keeper"))
        if s.policy and s.policy_reload_seconds > 0:
            self.policy_watcher = self._policy_watcher()
            self._tasks.append(asyncio.create_task(self.policy_watcher.run(self._stop), name="policy reload"))
        if serve:
            await self.start_servers()

    def _policy_watcher(self) -> PolicyWatcher:
        path = self.settings.policy
        baseline = None
        if not self.policy_status.sha256:  # a policy given as an object: the file as it is now is its baseline
            try:
                baseline = policy_sha256(read_policy_file(path))
            except PolicyUnreadable:
                baseline = ""
        return PolicyWatcher(
            path,
            period=self.settings.policy_reload_seconds,
            status=self.policy_status,
            current=lambda: self.policy,
            apply=self.swap_policy,
            metrics=self.metrics,
            baseline=baseline,
            spot_resource=self.settings.spot_resource,
        )

    def _pod_seen(self, pod: dict[str, Any]) -> None:
        """A new pod claiming a quota: the webhook stops holding room for it."""
        if self.webhook_state is None:
            return
        meta = pod.get("metadata") or {}
        quota = (meta.get("annotations") or {}).get(wellknown.ANNO_QUOTA_NAME)
        if not quota:
            return
        ns = str(meta.get("namespace") or "default")
        job, _group, _has = pod_job_key(pod)
        labels = meta.get("labels") or {}
        index = task_index(str(meta.get("name") or ""), labels, meta.get("annotations") or {})
        self.webhook_state.inflight.arrived(quota=quota, namespace=ns, job=job, index=index)

    async def _keep_heap(self) -> None:
        """Settle the heap once the cache holds the cluster, then every ``gc_refreeze_seconds``
        (see ``extender.heap``): full collections then skip the cache's long-lived objects."""
        await asyncio.gather(*(i.synced.wait() for i in self.informers))
        while not self._stop.is_set():
            took = heap.settle()
            log.info("heap settled in %.3f s (gc.freeze: %d objects now skipped)", took, gc.get_freeze_count())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.settings.gc_refreeze_seconds)

    async def wait_synced(self, timeout: float = 30.0) -> None:
        await asyncio.wait_for(self._ready.wait(), timeout)

    async def _when_synced(self) -> None:
        await asyncio.gather(*(i.synced.wait() for i in self.informers))
        try:
            await self._adopt_departures()
        except Exception:  # a bug here must not keep the service from ever being ready
            log.exception("keeping the places of pods that went while no replica watched failed")
        self._ready.set()

    async def _adopt_departures(self) -> None:
        """Keep the places of the pods that went while no replica watched (``status.tasks``
        entries whose pod the synced cache does not hold, :mod:`extender.cache.departures`):
        each pod is read once by name, at most ``DEPARTURE_READS`` at a time; one that cannot be
        read keeps its place. Places of jobs whose PodGroup went meanwhile are released first."""
        assert self.writer is not None
        await self.cache.gate.writable()
        orphaned = departures.forget_orphaned(self.cache)
        if orphaned:
            log.info("places of %d jobs whose PodGroup went while no replica watched are released: %s",
                     len(orphaned), ", ".join(orphaned))  # fmt: skip
        writer, found = self.writer, departures.unseen(self.cache)
        limit = asyncio.Semaphore(DEPARTURE_READS)

        async def one(d: departures.Departure) -> bool:
            async with limit:
                try:
                    pod, readable = await writer.get_pod(d.namespace, d.name), True
                except KubeError as exc:
                    log.warning("pod %s/%s (quota %s) could not be read: its place is kept (%s)", d.namespace,
                                d.name, d.quota, exc)  # fmt: skip
                    pod, readable = None, False
            await self.cache.gate.writable()
            return departures.adopt(self.cache, d, pod, readable=readable)

        kept = sum(await asyncio.gather(*(one(d) for d in found)))
        if found:
            log.info("%d of %d pods that went while no replica watched keep their places", kept, len(found))

    async def start_servers(self) -> None:
        s = self.settings
        assert self.state is not None
        # binds in flight get a few seconds to finish when the service stops
        ext = AppServer(
            extender_api.create_app(self.state),
            host=s.extender_address,
            port=s.extender_port,
            name="extender",
            graceful_shutdown=5,
            read_timeout=s.read_timeout,
            max_connections=s.max_connections,
            certfile=s.extender_tls_cert_file or None,
            keyfile=s.extender_tls_key_file or None,
            client_ca_file=s.extender_client_ca_file or None,
        )
        ops = AppServer(
            ops_api.create_app(self.state),
            host=s.ops_address,
            port=s.ops_port,
            name="ops",
            read_timeout=s.read_timeout,
            max_connections=s.max_connections,
        )
        for name, srv in (("extender", ext), ("ops", ops)):
            await srv.start()
            self.servers[name] = srv
        if ext.certfile:  # the separate layout: kube-scheduler calls it over mutual TLS
            self._tasks.append(asyncio.create_task(watch_tls(ext, self._stop), name="extender tls reload"))
        if self.webhook:
            self.webhook_state = WebhookState(
                cache=self.cache,
                policy=self.policy,
                namespaces=self.namespaces,
                config=WebhookConfig.from_settings(s),
                synced=self.synced,
                metrics=self.metrics,
                clock=self.cache.clock,
                writer=self.writer,
                on_claimed=lambda obj: self.cache.on_quota_update(obj, obj),
            )
            hook = WebhookServer(
                webhook_app.create_app(self.webhook_state),
                certfile=s.tls_cert_file,
                keyfile=s.tls_key_file,
                host=s.webhook_address,
                port=s.webhook_port,
                read_timeout=s.read_timeout,
                max_connections=s.max_connections,
                client_ca_file=s.webhook_client_ca_file or None,
            )
            await hook.start()
            self.servers["webhook"] = hook
            self._tasks.append(asyncio.create_task(watch_tls(hook, self._stop), name="tls reload"))

    async def stop(self) -> None:
        """Stop the servers together (each drains its requests in flight: one grace period, not one
        per server), then the loops, the elector and the informers."""
        self._stop.set()
        if self._sync_task is not None:
            self._sync_task.cancel()  # it may wait for informers that never synced
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sync_task
        stopped = await asyncio.gather(*(srv.stop() for srv in self.servers.values()), return_exceptions=True)
        for failure in stopped:
            if isinstance(failure, BaseException):
                raise failure
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(t, 5)
        if self.elector is not None:
            await self.elector.stop()
        for inf in self.informers:
            await inf.stop()
        if self._own_api and self._api is not None:
            await kube_client.close(self._api)

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
