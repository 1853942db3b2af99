"""The binder leader's controller-manager role: PodGroup, Queue and JobQueue statuses, and the
holds of jobs of one pod in their quotas' ``status.hold``.

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
from extender.model.job import JobInfo, by_precedence, governing_jobqueue
from extender.plugins.topology.holds import Hold

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

    async def update_quota_status(self, name: str, mutate: Mutate, *, current: Obj | None = None) -> Obj | None: ...

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
        resync: float = 60.0,
    ) -> None:
        """``guard`` bounds the concurrency of the writes (the loop's semaphore); ``count(kind,
        outcome)`` counts each write in the metrics; ``resync``: seconds between full passes."""
        self.cache = cache
        self.writer = writer
        self._guard = guard
        self._count = count
        self.writes = 0  # status writes that changed an object (for tests and the cycle report)
        self._judged: dict[str, tuple[int, str]] = {}  # quota → (generation, largest-node key) judged
        self._last: tuple[object, ...] | None = None  # inputs of the last pass that wrote nothing
        self._judged_at = -1  # cache generation warn_unholdable last looked at
        self._nodes_seen: object = None  # the cache's cluster_total() when _largest was computed
        self._largest: dict[str, int] = {}
        self.resync = resync
        self._last_full: float | None = None  # when every object was last looked at
        self._msgs: dict[str, str] = {}  # job → its verdict's message, as of the last pass
        self._holds: dict[str, Hold] = {}  # job → the binder's hold for it, as of the last pass
        self._phases: dict[str, str] = {}  # job → PodGroup phase, as of the last pass that looked at it
        self._queue_of: dict[str, str] = {}  # job → the queue it was counted in
        self._queue_rv: dict[str, object] = {}  # queue → resourceVersion of the object last looked at
        self._jobqueue_rv: dict[str, object] = {}  # JobQueue → likewise (a new, edited or deleted one
        # changes which jobs every JobQueue governs)
        self._queues_dirty: set[str] = set()  # queues whose pool quotas this reconciler changed

    async def reconcile(
        self, verdicts: Mapping[str, JobVerdict], now: float, holds: Mapping[str, Hold] | None = None
    ) -> None:
        """Write every status that differs from its desired value.

        Incremental: only jobs the cache marked changed (``ClusterCache.take_changed_jobs``) or
        whose verdict changed are looked at, with the queues and JobQueues they count in (and
        queues whose object or pool quotas changed, and every JobQueue when one was created,
        edited or deleted: which JobQueue governs a job may change); every ``resync`` seconds everything is
        (the controllers' resync, for what no mark covers: node labels, foreign writes).
        Skipped at once when neither the cache nor the verdicts changed since a pass that
        wrote nothing."""
        cache = self.cache
        holds = dict(holds or {})
        msgs = {k: f"{v.stage.label}: {v.status.message()}" for k, v in verdicts.items()}
        full = self._last_full is None or now - self._last_full >= self.resync
        seen = (cache.generation, msgs, holds)
        if not full and seen == self._last:
            return
        changed = cache.take_changed_jobs()
        if full:
            self._last_full = now
            keys: set[str] = set(cache.jobs) | set(self._queue_of)
        else:
            keys = changed | {k for k in msgs.keys() | self._msgs.keys() if msgs.get(k) != self._msgs.get(k)}
            keys |= {k for k in holds.keys() | self._holds.keys() if holds.get(k) != self._holds.get(k)}
        self._msgs, self._holds = msgs, holds
        stamp = format_time(now)
        writes: list[Awaitable[None]] = []
        queues = set(cache.queues) if full else set(self._queues_dirty)
        self._queues_dirty.clear()
        for key in keys:
            if key in self._queue_of:
                queues.add(self._queue_of.pop(key))
            job = cache.jobs.get(key)
            if job is None:
                self._phases.pop(key, None)
                continue
            verdict = verdicts.get(key)
            obj = cache.podgroup_object(key) if job.has_podgroup else None
            stored = _status(obj)
            self._phases[key] = st.job_phase(job, verdict, str(stored.get("phase") or ""))
            self._queue_of[key] = job.queue
            queues.add(job.queue)
            hold = holds.get(key)
            if obj is not None and st.podgroup_status(job, cache.quotas, verdict, stored, stamp, hold=hold) != stored:
                writes.append(self._podgroup(job, verdict, stamp, hold))
        for name in cache.queues:
            rv = _rv(cache.queue_object(name))
            if self._queue_rv.get(name) != rv:
                self._queue_rv[name] = rv
                queues.add(name)
        if queues:
            writes += self._queues(queues & set(cache.queues), now)
        jobqueue_rv = {name: _rv(cache.jobqueue_object(name)) for name in cache.jobqueues}
        if cache.jobqueues and (keys or full or jobqueue_rv != self._jobqueue_rv):
            writes += self._jobqueues()
        self._jobqueue_rv = jobqueue_rv
        writes += self._quota_holds(holds)
        if writes:
            await asyncio.gather(*(self._guard(w) for w in writes))
        # nothing to write means the same inputs give nothing to write again; after writes, the
        # answers changed the cache (a new generation) and the next pass looks again
        self._last = seen if not writes else None

    def _queues(self, names: set[str], now: float) -> list[Awaitable[None]]:
        cache = self.cache
        by_queue: dict[str, list[JobInfo]] = {n: [] for n in names}
        for job in cache.jobs.values():
            if job.queue in by_queue:
                by_queue[job.queue].append(job)
        largest = largest_allocatable(cache.nodes.values())
        writes: list[Awaitable[None]] = []
        for name in sorted(names):
            queue = cache.queues[name]
            jobs = by_queue[name]
            pools = []
            for pool in pools_of(cache.queue_object(name) or {}):
                plan = plan_pool(pool, cache.quota_objects(), cache.quotas, largest, now)
                writes += [self._apply_quota(obj, name) for obj in plan.create + plan.update]
                writes += [self._delete_quota(*d, queue=name) for d in plan.delete]
                pools.append(plan.status)
            stored = _status(cache.queue_object(name))
            phases = self._phases
            if st.queue_status(queue, jobs, phases, cache.nodes, stored, pools=pools) != stored:
                writes.append(self._queue(name, jobs, phases, pools))
        return writes

    def _quota_holds(self, holds: Mapping[str, Hold]) -> list[Awaitable[None]]:
        """A job of one pod has no PodGroup: its hold is recorded in the ``status.hold`` of the
        quota its pod claims (the first such job in name order, should several claim one), and a
        record of a hold that is no more is removed."""
        cache = self.cache
        want: dict[str, tuple[str, Hold]] = {}  # quota → (job, hold)
        for key in sorted(holds):
            quota = _claimed_by_lone_job(cache, key)
            if quota:
                want.setdefault(quota, (key, holds[key]))
        writes: list[Awaitable[None]] = []
        for quota, (key, hold) in want.items():
            stored = _status(cache.quota_object(quota)).get("hold")
            if stored != st.hold_record(hold, key):
                writes.append(self._quota_hold(quota, key, hold))
        for quota, (job, _, _) in cache.quota_holds.items():
            if quota not in want:
                writes.append(self._quota_hold(quota, job, None))
        return writes

    async def _quota_hold(self, quota: str, job: str, hold: Hold | None) -> None:
        def mutate(obj: Obj) -> Obj | None:
            return st.quota_hold_status(_status(obj), job, hold)

        seen = self.cache.quota_object(quota)  # written from without a read when up to date
        call = self.writer.update_quota_status(quota, mutate, current=dict(seen) if seen is not None else None)
        await self._write("quota_hold", quota, call, lambda o: self.cache.on_quota_update(o, o))

    def _jobqueues(self) -> list[Awaitable[None]]:
        cache = self.cache
        governed: dict[str, list[JobInfo]] = {name: [] for name in cache.jobqueues}
        jqs = by_precedence(cache.jobqueues.values())
        for job in cache.jobs.values():
            jq = governing_jobqueue(job, jqs)
            if jq is not None:
                governed[jq.name].append(job)
        writes: list[Awaitable[None]] = []
        for name, jq in cache.jobqueues.items():
            stored = _status(cache.jobqueue_object(name))
            if st.jobqueue_status(jq, governed[name], stored) != stored:
                writes.append(self._jobqueue(name, governed[name]))
        return writes

    async def warn_unholdable(self) -> int:
        """A Warning Event ``QuotaLargerThanAnyNode`` on each quota no node could ever hold, when
        it is first seen (and again when its spec or the largest node changes). Returns how
        many were posted."""
        cache = self.cache
        if cache.generation == self._judged_at:
            return 0
        since, self._judged_at = self._judged_at, cache.generation
        total = cache.cluster_total()  # a new object whenever the nodes changed
        if total is not self._nodes_seen:
            self._nodes_seen = total
            self._largest = largest_allocatable(cache.nodes.values())
            since = -1  # the largest node may differ: judge every quota again
        largest = self._largest
        key = repr(sorted(largest.items()))
        posts: list[Awaitable[Any]] = []
        for name in [n for n in self._judged if n not in cache.quotas]:
            del self._judged[name]
        touched = cache.quota_touched
        for name, quota in cache.quotas.items():
            if touched.get(name, since + 1) <= since:
                continue  # unchanged since the last look
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

    async def _podgroup(self, job: JobInfo, verdict: JobVerdict | None, stamp: str, hold: Hold | None) -> None:
        quotas = self.cache.quotas

        def mutate(obj: Obj) -> Obj | None:
            return st.podgroup_status(job, quotas, verdict, _status(obj), stamp, hold=hold)

        call = self.writer.patch_podgroup_status(job.namespace, job.name, mutate)
        await self._write("podgroup", job.key, call, lambda o: self.cache.on_podgroup_update(o, o))

    async def _apply_quota(self, body: Obj, queue: str) -> None:
        name = body["metadata"]["name"]
        self._queues_dirty.add(queue)  # the pool's status counts it next pass
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

    async def _delete_quota(self, name: str, uid: str, resource_version: str, *, queue: str) -> None:
        self._queues_dirty.add(queue)
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


def _claimed_by_lone_job(cache: ClusterCache, key: str) -> str:
    """The quota the pod of job ``key`` claims, if that is a job of one pod (no PodGroup)."""
    job = cache.jobs.get(key)
    if job is None or not job.is_single() or not job.tasks:
        return ""
    (task,) = job.tasks.values()
    return task.quota if task.quota in cache.quotas else ""


def _rv(obj: Mapping[str, Any] | None) -> object:
    """The object's ``metadata.resourceVersion`` as stored (None: no object): whether it changed."""
    return ((obj or {}).get("metadata") or {}).get("resourceVersion")


def _status(obj: Mapping[str, Any] | None) -> Obj:
    return dict((obj or {}).get("status") or {})
