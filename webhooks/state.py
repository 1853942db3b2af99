"""What the webhook app runs on: its configuration and its collaborators (no globals)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from extender import wellknown
from extender.cache.convert import ConvertOptions
from extender.framework.policy import Policy
from extender.framework.session import Snapshot
from extender.metrics import Metrics
from extender.settings import ServeSettings
from webhooks.candidates import CandidateIndex
from webhooks.inflight import InFlightRegistry
from webhooks.namespaces import NamespaceLabels

__all__ = ["CacheView", "ClaimWriter", "WebhookConfig", "WebhookState"]

DEFAULT_SCHEDULER: str = "default-scheduler"


class CacheView(Protocol):
    """What the webhook reads of ``extender.cache.cache.ClusterCache``."""

    @property
    def opts(self) -> ConvertOptions: ...

    def snapshot(self, now: float | None = None) -> Snapshot: ...


class ClaimWriter(Protocol):
    """What the webhook needs of ``extender.kube.writer.KubeWriter``: the Quota status
    read-modify-write with a ``resourceVersion`` precondition."""

    async def update_quota_status(
        self, name: str, mutate: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    scheduler_name: str = wellknown.SCHEDULER_NAME
    """Pods with this ``spec.schedulerName`` are ours; injected pods get it."""
    inject_label: str = wellknown.LABEL_INJECT
    inject_value: str = wellknown.LABEL_INJECT_ENABLED
    injectable_schedulers: tuple[str, ...] = ("", DEFAULT_SCHEDULER)
    """An inject-namespace pod is routed to us only if it asked for no scheduler in particular."""
    gpu_resources: tuple[str, ...] = wellknown.DEFAULT_GPU_RESOURCES
    """Resources that make an injected-namespace pod ours (with RDMA and spot GPUs): ``--gpu-resources``."""
    max_body_bytes: int = 8 * 1024 * 1024
    max_reason_chars: int = 1024

    @staticmethod
    def from_settings(settings: ServeSettings) -> WebhookConfig:
        return WebhookConfig(
            scheduler_name=settings.scheduler_name,
            max_body_bytes=settings.max_body_bytes,
            gpu_resources=settings.gpu_resource_names(),
        )


@dataclass(slots=True)
class WebhookState:
    """The collaborators of one webhook app. ``policy`` may be replaced between requests (reload)."""

    cache: CacheView
    policy: Policy
    namespaces: NamespaceLabels
    config: WebhookConfig = field(default_factory=WebhookConfig)
    inflight: InFlightRegistry = field(default_factory=InFlightRegistry)
    """In-flight claims (its ``ttl``: how long an admitted pod's room is held for the informer)."""
    clock: Callable[[], float] = time.time
    synced: Callable[[], bool] = lambda: True
    """False until every informer the cache and the namespace source depend on has listed."""
    metrics: Metrics | None = None
    writer: ClaimWriter | None = None
    """Records each claim on its Quota before the answer (None: no API — claims stay in this
    process's in-flight registry only, which no other replica sees)."""
    on_claimed: Callable[[dict[str, Any]], None] | None = None
    """Given the Quota as the claim's write returned it (the service applies it to its cache)."""
    claim_attempts: int = 4
    """Quotas tried per admission when other replicas claim first (then: no quota, the binder assigns)."""
    index: CandidateIndex | None = None
    """The candidate quotas in TQ order, kept current by the cache's quota events
    (``webhooks.candidates``). Made and attached to the cache at construction when the cache
    publishes its quota changes (``ClusterCache.quota_listeners``) and ``indexed`` is set; else
    every decision scans its queue."""
    indexed: bool = True

    def __post_init__(self) -> None:
        listeners = getattr(self.cache, "quota_listeners", None)
        if self.index is None and self.indexed and isinstance(listeners, list):
            self.index = CandidateIndex()
            listeners.append(self.index.changed)
