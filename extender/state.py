"""What the service's HTTP apps share: one cache, one policy, the binder's verdicts, the writer.

Built by the service (``extender.service``) or by tests; the apps read it per request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cachetools import TTLCache

from extender.binder.loop import BinderLoop, Writer
from extender.cache.cache import ClusterCache
from extender.framework.policy import Policy
from extender.framework.session import JobVerdict
from extender.metrics import Metrics

__all__ = ["ServiceState"]


def _bind_cache(clock: Callable[[], float]) -> TTLCache[str, str]:
    return TTLCache(maxsize=100_000, ttl=300.0, timer=clock)


@dataclass(slots=True)
class ServiceState:
    cache: ClusterCache
    policy: Policy
    metrics: Metrics = field(default_factory=Metrics)
    writer: Writer | None = None
    loop: BinderLoop | None = None
    synced: Callable[[], bool] = lambda: True
    is_leader: Callable[[], bool] = lambda: False
    scheduler_name: str = "sky-scheduler"
    max_body_bytes: int = 8 * 1024 * 1024
    clock: Callable[[], float] = time.time
    recent_binds: TTLCache[str, str] = field(init=False)  # pod uid → node, for idempotent retries
    binds_in_flight: dict[str, tuple[str, asyncio.Future[str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.recent_binds = _bind_cache(self.clock)

    def verdicts(self) -> Mapping[str, JobVerdict]:
        return self.loop.verdicts if self.loop is not None else {}
