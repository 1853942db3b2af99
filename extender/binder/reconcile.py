"""The binder leader's controller-manager role: PodGroup, Queue and JobQueue statuses.

After each cycle, :meth:`StatusReconciler.reconcile` computes every object's desired status
with the pure functions of :mod:`extender.binder.status` and writes, through the writer's
read-modify-write (optimistic concurrency, retries on conflict), only the objects whose status
the cache shows differently. The desired status is recomputed on the object the writer read,
so a write that lost a race is re-derived, never replayed. Each answer is applied to the cache
at once, so the next cycle does not write the same status again. A failed write is logged and
counted; the next cycle tries again (the difference is still there).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from extender import wellknown
from extender.binder import status as st
from extender.binder.pools import plan_pool, pools_of
from extender.cache.cache import ClusterCache
from extender.cache.convert import format_time
from extender.framework.session import JobVerdict
from extender.framework.status import Reason
from extender.model.capacity import largest_allocatable, unholdable
from extender.model.job import JobInfo

__all__ = ["StatusReconciler", "StatusWriter"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Mutate = Callable[[Obj], Obj | None]


class StatusWriter(Protocol):
    """What the reconciler needs of ``extender.kube.writer.KubeWriter``."""

    async def patch_podgroup_status(self, namespace: str, name: str, mutate: Mutate) -> Obj | None: ...

    async def update_queue_status(self, name: str, mutate: Mutate) -> Obj | None: ...

    async def update_jobqueue_status(self, name: str, mutate: Mutate) -> Obj | None: ...

    async def post_event(self, involved: Mapping[str, Any], type_: str, reason: str, message: str) -> Any: ...

    async def apply_quota(self, body: Mapping[str, Any]) -> tuple[Obj, bool]: ...

    async def delete_quota(self, name: str, *, uid: str, resource_version: str) -> bool: ...


class StatusReconciler:
    def __init__(
        self,
        cache: ClusterCache,
        writer: StatusWriter,
        *,
        guard: Callable[[Awaitable[Any]], Awaitable[Any]],
        count: Callable[[str, str], None],
    ) -> None:
        """``guard`` bounds the concurrency of the writes (the loop's semaphore); ``count(kind,
        outcome)`` counts each write in the metrics."""
        self.cache = cache
        self.writer = writer
        self._guard = guard
        self._count = count
        self.writes = 0  # status writes that changed an object (for tests and the cycle report)
        self._judged: dict[str, tuple[int, str]] = {}  # quota → (generation, largest-node key) judged
        self._last: tuple[object, ...] | None = None  # inputs of the last pass that wrote nothing
        self._judged_at = -1  # cache generation warn_unholdable last looked at

    async def reconcile(self, verdicts: Mapping[str, JobVerdict], now: float) -> None:
        """Write every status that differs from its desired value. Skipped (O(verdicts)) when
        neither the cache nor the verdicts changed since the last pass that wrote nothing."""
        cache = self.cache
        seen = (cache.generation, tuple((k, v.stage, v.status.message()) for k, v in sorted(verdicts.items())))
        if seen == self._last:
            return
        stamp = format_time(now)
        phases: dict[str, str] = {}
        by_queue: dict[str, list[JobInfo]] = {}
        writes: list[Awaitable[None]] = []
        for key, job in cache.jobs.items():
            verdict = verdicts.get(key)
            obj = cache.podgroup_object(key) if job.has_podgroup else None
            stored = _status(obj)
            phases[key] = st.job_phase(job, verdict, str(stored.get("phase") or ""))
            by_queue.setdefault(job.queue, []).append(job)
            if obj is None:
                continue
            if st.podgroup_status(job, cache.quotas, verdict, stored, stamp) != stored:
                writes.append(self._podgroup(job, verdict, stamp))
        largest = largest_allocatable(cache.nodes.values())
        for name, queue in cache.queues.items():
            jobs = by_queue.get(name, [])
            pools = []
            for pool in pools_of(cache.queue_object(name) or {}):
                plan = plan_pool(pool, cache.quota_objects(), cache.quotas, largest, now)
                writes += [self._apply_quota(obj) for obj in plan.create + plan.update]
                writes += [self._delete_quota(*d) for d in plan.delete]
                pools.append(plan.status)
            stored = _status(cache.queue_object(name))
            if st.queue_status(queue, jobs, phases, cache.nodes, stored, pools=pools) != stored:
                writes.append(self._queue(name, jobs, phases, pools))
        governed: dict[str, list[JobInfo]] = {name: [] for name in cache.jobqueues}
        jqs = list(cache.jobqueues.values())
        for job in cache.jobs.values():
            jq = st.governing_jobqueue(job, jqs)
            if jq is not None:
                governed[jq.name].append(job)
        for name, jq in cache.jobqueues.items():
            stored = _status(cache.jobqueue_object(name))
            if st.jobqueue_status(jq, governed[name], stored) != stored:
                writes.append(self._jobqueue(name, governed[name]))
        if writes:
            await asyncio.gather(*(self._guard(w) for w in writes))
        # nothing to write means the same inputs give nothing to write again; after writes, the
        # answers changed the cache (a new generation) and the next pass looks again
        self._last = seen if not writes else None

    async def warn_unholdable(self) -> int:
        """A Warning Event ``QuotaLargerThanAnyNode`` on each quota no node could ever hold, when
        it is first seen (and again when its spec or the largest node changes). Returns how
        many were posted."""
        cache = self.cache
        if cache.generation == self._judged_at:
            return 0
        self._judged_at = cache.generation
        largest = largest_allocatable(cache.nodes.values())
        key = repr(sorted(largest.items()))
        posts: list[Awaitable[Any]] = []
        for name in [n for n in self._judged if n not in cache.quotas]:
            del self._judged[name]
        for name, quota in cache.quotas.items():
            seen = (quota.generation, key)
            if self._judged.get(name) == seen:
                continue
            self._judged[name] = seen
            why = unholdable(quota.request, largest)
            if not why:
                continue
            meta = (cache.quota_object(name) or {}).get("metadata") or {}
            involved = {"apiVersion": wellknown.API_VERSION, "kind": wellknown.KIND_QUOTA, "name": name}
            involved["uid"] = str(meta.get("uid") or "")
            message = f"{why}: it can never be bound; shrink spec.request to what one node has, or add such a node"
            posts.append(self.writer.post_event(involved, "Warning", Reason.QUOTA_LARGER_THAN_ANY_NODE.value, message))
        if posts:
            await asyncio.gather(*(self._guard(p) for p in posts), return_exceptions=True)
        return len(posts)

    async def _write(self, kind: str, what: str, call: Awaitable[Obj | None], apply: Callable[[Obj], None]) -> None:
        try:
            obj = await call
        except Exception as exc:
            log.warning("%s %s: status write failed: %s", kind, what, exc)
            self._count(f"{kind}_status", "error")
            return
        if obj is not None:
            apply(obj)
            self.writes += 1
        self._count(f"{kind}_status", "ok")

    async def _podgroup(self, job: JobInfo, verdict: JobVerdict | None, stamp: str) -> None:
        quotas = self.cache.quotas

        def mutate(obj: Obj) -> Obj | None:
            return st.podgroup_status(job, quotas, verdict, _status(obj), stamp)

        call = self.writer.patch_podgroup_status(job.namespace, job.name, mutate)
        await self._write("podgroup", job.key, call, lambda o: self.cache.on_podgroup_update(o, o))

    async def _apply_quota(self, body: Obj) -> None:
        name = body["metadata"]["name"]
        try:
            obj, wrote = await self.writer.apply_quota(body)
        except Exception as exc:
            log.warning("quota pool: %s: create/update failed: %s", name, exc)
            self._count("pool_quota", "error")
            return
        if wrote:
            self.cache.on_quota_update(obj, obj)
            self.writes += 1
        self._count("pool_quota", "ok")

    async def _delete_quota(self, name: str, uid: str, resource_version: str) -> None:
        try:
            gone = await self.writer.delete_quota(name, uid=uid, resource_version=resource_version)
        except Exception as exc:
            log.warning("quota pool: %s: delete failed: %s", name, exc)
            self._count("pool_quota", "error")
            return
        if gone:
            obj = self.cache.quota_object(name)
            if obj is not None:
                self.cache.on_quota_delete(obj)
            self.writes += 1
        self._count("pool_quota", "ok" if gone else "skipped")

    async def _queue(self, name: str, jobs: list[JobInfo], phases: Mapping[str, str], pools: list[Obj]) -> None:
        cache = self.cache

        def mutate(obj: Obj) -> Obj | None:
            queue = cache.queues.get(name)
            if queue is None:
                return None
            return st.queue_status(queue, jobs, phases, cache.nodes, _status(obj), pools=pools)

        call = self.writer.update_queue_status(name, mutate)
        await self._write("queue", name, call, lambda o: cache.on_queue_update(o, o))

    async def _jobqueue(self, name: str, jobs: list[JobInfo]) -> None:
        cache = self.cache

        def mutate(obj: Obj) -> Obj | None:
            jq = cache.jobqueues.get(name)
            return None if jq is None else st.jobqueue_status(jq, jobs, _status(obj))

        call = self.writer.update_jobqueue_status(name, mutate)
        await self._write("jobqueue", name, call, lambda o: cache.on_jobqueue_update(o, o))


def _status(obj: Mapping[str, Any] | None) -> Obj:
    return dict((obj or {}).get("status") or {})
