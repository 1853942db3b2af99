"""What the service's HTTP apps share: one cache, one policy, the binder's verdicts, the writer.

Built by the service (``extender.service``) or by tests; the apps read it per request.
``policy`` may be replaced between requests (a reload, ``Runtime.swap_policy``): a request
reads it once, through :meth:`ServiceState.session`, and decides without an await.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from cachetools import TTLCache

from extender.binder.loop import BinderLoop, Writer
from extender.cache.cache import ClusterCache
from extender.framework.policy import Policy
from extender.framework.session import JobVerdict, Session, Snapshot
from extender.metrics import Metrics
from extender.plugins.topology.holds import Hold
from extender.plugins.topology.holds import recorded as recorded_holds
from extender.policy_reload import PolicyStatus

__all__ = ["ServiceState"]

_NO_HOLDS: Mapping[str, Any] = MappingProxyType({})
_NO_SPOT_ZONES: Mapping[str, str] = MappingProxyType({})

SPOT_ZONE_SECONDS = 300.0
"""How long the zone a spot job's first pod was let into is remembered once recorded (the first bind
is normally heard within seconds; a job that never binds is forgotten)."""


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
    session_reuse_seconds: float = 1.0
    policy_status: PolicyStatus | None = None  # where the policy came from, reload errors (GET /policy)
    _snap: Snapshot | None = field(default=None, init=False, repr=False)
    _ssn: Session | None = field(default=None, init=False, repr=False)
    _recorded: tuple[int, Mapping[str, Hold]] | None = field(default=None, init=False, repr=False)
    # job key → (node its first spot pod was let through to, when): see remember_spot_zone
    _spot_zone_at: dict[str, tuple[str, float]] = field(default_factory=dict, init=False, repr=False)
    _spot_zones: Mapping[str, str] = field(default_factory=lambda: _NO_SPOT_ZONES, init=False, repr=False)
    # a filter of a very large body runs on a worker thread (extender.api.extender._off_loop)
    _spot_zone_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.recent_binds = _bind_cache(self.clock)

    def snapshot(self) -> Snapshot:
        """The cache's snapshot for a request's session. Taking one copies the cache's index sets
        (O(pending jobs)); between two cache changes (same ``generation``) the last one is reused
        with the current time — the same view, as every change bumps the generation.

        It carries the holds of the binder's scheduler (topology, issue 16) while this replica
        leads, so that a pod the extender binds inline keeps off nodes held for a waiting gang as
        the binder's own quotas do; a replica that does not lead carries the holds the leader
        recorded (``ClusterCache.holds_on_record``)."""
        cache = self.cache
        snap = self._snap
        holds, zones = self._holds(), self._current_spot_zones()
        if snap is None or snap.generation != cache.generation:
            snap = self._snap = dataclasses.replace(cache.snapshot(), holds=holds, spot_zones=zones)
            return snap
        if snap.holds is not holds or snap.spot_zones is not zones:
            snap = self._snap = dataclasses.replace(snap, holds=holds, spot_zones=zones)
        return dataclasses.replace(snap, now=cache.clock())

    def remember_spot_zone(self, job: str, node: str) -> None:
        """The extender let the first spot pod of topology job ``job`` through to ``node`` (and its
        zone). kube-scheduler binds asynchronously: the job's siblings may be filtered before the
        extender hears that bind, and if the cache changed meanwhile the best-fit zone may be
        another one. Remembered (``Snapshot.spot_zones``) so that they are held to this zone while
        it still holds the job, for ``SPOT_ZONE_SECONDS`` (recorded again only when a filter lets
        the job into another node than the remembered one)."""
        with self._spot_zone_lock:
            self._spot_zone_at[job] = (node, self.clock())
            self._spot_zones = MappingProxyType({k: n for k, (n, _) in self._spot_zone_at.items()})

    def _current_spot_zones(self) -> Mapping[str, str]:
        """:attr:`_spot_zones` without the entries older than ``SPOT_ZONE_SECONDS``."""
        at = self._spot_zone_at
        if not at:
            return self._spot_zones
        with self._spot_zone_lock:
            now = self.clock()
            old = [k for k, (_, when) in at.items() if now - when > SPOT_ZONE_SECONDS]
            if old:
                for k in old:
                    del at[k]
                self._spot_zones = MappingProxyType({k: n for k, (n, _) in at.items()}) if at else _NO_SPOT_ZONES
            return self._spot_zones

    def _holds(self) -> Mapping[str, Any]:
        if self.loop is not None and self.is_leader():
            return self.loop.scheduler.memory.holds
        cache = self.cache
        if not cache.recorded_holds and not cache.quota_holds:
            return _NO_HOLDS
        gen = cache.generation
        if self._recorded is None or self._recorded[0] != gen:  # one mapping per cache state
            self._recorded = (gen, recorded_holds(cache.holds_on_record()))
        return self._recorded[1]

    def session(self) -> Session:
        """A session for one extender request (read-only: the verbs never run a Statement).

        Opening one binds every plugin's stages (~0.1 ms with the default policy); the last one is
        reused while it runs the current policy (a reload makes the next request open a new one),
        the cache has not changed (same ``generation``: every plugin's per-session memo is still
        true), nothing wrote into it, and it is younger than ``session_reuse_seconds`` (its
        ``now`` stays that fresh)."""
        snap = self.snapshot()
        ssn = self._ssn
        if (
            ssn is not None
            and ssn.policy is self.policy
            and ssn.snap.generation == snap.generation
            and ssn.snap.holds is snap.holds
            and ssn.snap.spot_zones is snap.spot_zones
            and 0.0 <= snap.now - ssn.now <= self.session_reuse_seconds
            and not ssn.intents
            and not ssn.touched_nodes()
            and not ssn.touched_quotas()
            and not ssn.touched_jobs()
        ):
            return ssn
        ssn = self._ssn = Session(snap, self.policy)
        return ssn

    def diagnose_snapshot(self) -> Snapshot:
        """:meth:`snapshot` with what the binder's scheduler remembers between cycles (back-offs,
        releases, stuck cycles), so that /diagnose sees a job's back-off as the binder does."""
        snap = self.snapshot()
        if self.loop is None:
            return snap
        mem = self.loop.scheduler.memory
        return dataclasses.replace(
            snap,
            backoff={k: v for k, v in mem.backoff.items() if v > snap.now},
            release_count=dict(mem.release_count),
            stuck_cycles=dict(mem.stuck_cycles),
        )

    def verdicts(self) -> Mapping[str, JobVerdict]:
        return self.loop.verdicts if self.loop is not None else {}
