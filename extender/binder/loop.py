"""The quota-binder loop (hop ② and the bookkeeping around it), run only by the Lease holder.

Every ``period`` seconds: drop expired assumptions → snapshot → ``Scheduler.run_once`` (the
policy's actions: fix_quota_binding, allocate_job, allocate_zone, allocate_quota,
release_quota) → plan the writes (these two on a worker thread, the cache's writers held at its
gate, so the event loop keeps answering the extender, the webhook and the ops port:
``extender/cache/gate.py``) → quota statuses (status subresource, optimistic concurrency,
bounded concurrency) → pod annotations (claims moved; ``quota-node`` on pending pods, which
makes kube-scheduler re-queue them at once) → events and PodGroup conditions.

Every answer of a successful write is applied to the cache at once, so the next cycle sees it
even before the informer does. A failed write changes nothing in the cache: its quota stays
"dirty" and the next cycle recomputes and retries. A quota write is skipped (not forced) when
the object's ``nodeName`` changed since the cycle planned it (another writer — the extender's
inline bind — got there first). So a cycle that dies half-way leaves only states that the next
cycle repairs: partially written gangs are completed by allocate_zone from their bound siblings.
A write is skipped too when the quota's spec changed or it was re-created since the cycle read it
(the room was judged for another request). From the moment the cycle's plan is made until each
bind's answer (or failure), the cache counts the bind (``extender/cache/bindings.py``), so an
inline bind of the extender judged meanwhile never takes the same room.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from extender import heap, wellknown
from extender.actions import fix_quota_binding, release_quota
from extender.binder.pacing import LoopShare
from extender.binder.placements import committed_by_tier, extra_leaves
from extender.binder.plan import (
    OWNED_STATUS_FIELDS,
    PodPatch,
    QuotaStatusWrite,
    WritePlan,
    after_freeing,
    in_order,
    merge_inflight,
    plan_writes,
)
from extender.binder.reconcile import StatusReconciler
from extender.cache.cache import ClusterCache
from extender.cache.convert import format_time
from extender.cache.meta import same_spec
from extender.framework.session import JobVerdict
from extender.metrics import Metrics
from extender.model.quota import QuotaPhase
from extender.plugins.topology.holds import recorded as recorded_holds
from extender.scheduler import CycleResult, Scheduler

__all__ = ["BinderLoop", "CycleReport", "Writer"]

log = logging.getLogger(__name__)

T = TypeVar("T")

ASSUME_STEP = 256
"""Binds a cycle assumes in the cache per step on the event loop (about 3 ms on a slow core)."""


class Writer(Protocol):
    """What the loop needs of ``extender.kube.writer.KubeWriter``."""

    async def update_quota_status(
        self,
        name: str,
        mutate: Callable[[dict[str, Any]], dict[str, Any] | None],
        *,
        current: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None: ...

    async def patch_pod_annotations(
        self, namespace: str, name: str, annotations: Mapping[str, str | None], *, uid: str | None = None
    ) -> dict[str, Any]: ...

    async def post_event(self, involved: Mapping[str, Any], type_: str, reason: str, message: str) -> Any: ...

    async def bind_pod(self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]) -> Any: ...

    async def patch_podgroup_status(
        self, namespace: str, name: str, mutate: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> dict[str, Any] | None: ...

    async def update_queue_status(
        self, name: str, mutate: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> dict[str, Any] | None: ...

    async def update_jobqueue_status(
        self, name: str, mutate: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> dict[str, Any] | None: ...

    async def apply_quota(self, body: Mapping[str, Any]) -> tuple[dict[str, Any], bool]: ...

    async def delete_quota(self, name: str, *, uid: str, resource_version: str) -> bool: ...

    async def patch_node_labels(self, node: str, labels: Mapping[str, str | None]) -> dict[str, Any]: ...


@dataclass(slots=True)
class CycleReport:
    ran: bool
    result: CycleResult | None = None
    quota_writes: int = 0
    pod_writes: int = 0
    failed: list[str] = field(default_factory=list)
    seconds: float = 0.0


class BinderLoop:
    def __init__(
        self,
        cache: ClusterCache,
        scheduler: Scheduler,
        writer: Writer,
        *,
        period: float = 1.0,
        is_leader: Callable[[], bool] = lambda: True,
        metrics: Metrics | None = None,
        concurrency: int = 16,
        on_cycle: Callable[[CycleReport], Awaitable[None] | None] | None = None,
        event_repeat: float = 30.0,
        loop_share: float = 0.25,
    ) -> None:
        """``event_repeat``: while a job stays stopped for the same reason, its Event is posted
        again (the writer bumps its ``count``) at most this often, in session seconds.
        ``loop_share``: the most of the event loop's time the cycle's writes may take
        (``extender/binder/pacing.py``); the verbs always get the rest."""
        self.cache = cache
        self.scheduler = scheduler
        self.writer = writer
        self.period = period
        self.is_leader = is_leader
        self.metrics = metrics
        self.concurrency = concurrency
        self.on_cycle = on_cycle
        self.last: CycleReport | None = None
        self.verdicts: dict[str, JobVerdict] = {}  # latest verdict per job (for /diagnose)
        self.event_repeat = event_repeat
        self._posted: dict[str, tuple[str, float]] = {}  # job → (message, when) of the last event posted
        self._warned_scattered: set[str] = set()
        self._sem = asyncio.Semaphore(concurrency)
        self.pace = LoopShare(loop_share)
        self.statuses = StatusReconciler(cache, writer, guard=self._guarded, count=self._count)
        self.leading = False  # this loop's last cycle was a leader's (False: it follows, or never ran)
        self._zone_generation = -1  # cache generation the zone labels were last in step with
        self._binding: set[str] = set()  # quotas whose bind this cycle writes: assumed in the cache

    # --- running -------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                if self.is_leader():
                    report = await self.run_cycle()
                    if self.on_cycle is not None:
                        maybe = self.on_cycle(report)
                        if maybe is not None:
                            await maybe
                else:
                    self._stop_leading()
                    await self.follow()
            except Exception:  # a bug must not kill the loop: log it; the next cycle starts clean
                log.exception("binder cycle failed")
            delay = max(0.0, self.period - (time.monotonic() - started))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=delay)

    def _stop_leading(self) -> None:
        """This replica does not lead (any more): what only a leader's cycles keep true — the
        leader-only gauges (:meth:`extender.metrics.Metrics.stop_leading`) and the jobs' last
        verdicts — is cleared, rather than frozen at the last cycle it led (a follower would
        export, say, a hold that has long ended; the leader exports the true values)."""
        if self.leading and self.metrics is not None:
            self.metrics.stop_leading()
        if self.leading:
            self.verdicts = {}
        self.leading = False

    async def follow(self) -> None:
        """A replica that is not the leader writes nothing, but its cache still forgets what has
        expired: an in-flight claim whose pod never came counts as a claim in the cache (for this
        replica's webhook and extender) until then, and only the leader's status rewrite would
        otherwise remove it — never, while there is no leader; a pod its extender assumed on a
        node (a bind in flight) counts there until the API shows the bind or the assumption
        expires. The quotas stay dirty, for this replica's first cycle should it become the
        leader."""
        await self.cache.gate.writable()
        self.cache.expire_assumed()
        self.cache.expire_entries()

    async def run_cycle(self) -> CycleReport:
        t0 = time.perf_counter()
        cache = self.cache
        await cache.gate.writable()  # a large request may be reading the cache off the loop
        if not self.leading:  # the first cycle of a leadership: start from what the API records
            self.scheduler.take_over(recorded_holds(cache.holds_on_record()))
            self.leading = True
        cache.expire_assumed()
        snap = cache.snapshot()

        def compute() -> tuple[CycleResult, WritePlan, bool]:
            # the synchronous part, on a worker thread: the cache's writers wait at the gate
            # meanwhile, so the cycle reads exactly the cache the snapshot was taken of (the
            # plan's take_dirty_quotas drops expired reservations: reference swaps, as before)
            result = self.scheduler.run_once(snap)
            plan = plan_writes(cache, result, extra_quotas=cache.take_dirty_quotas())
            return result, plan, heap.keep_if_large()  # a burst's survivors: not walked on the loop

        with contextlib.ExitStack() as collector_paused:
            collector_paused.enter_context(heap.paused())  # no collection inside the synchronous part
            result, plan, burst = await cache.gate.off_loop(compute)
            report = CycleReport(ran=True, result=result)
            try:
                await self._assume_binds(plan.quotas)  # no writer runs between the cycle's read and this
                if not burst:
                    collector_paused.close()
                # a burst's writes make as many objects again (every quota's new document): still no
                # collection until they are done, then they are frozen as the cycle's were
                failed_quotas = await self._write_quota_statuses(plan.quotas, self.cache.clock(), report)
            finally:
                await self._forget_binds(set(self._binding))  # not written (the cycle died): as before
            if failed_quotas:  # a gang placed with one of them is not placed: it keeps its hold
                self.scheduler.writes_failed(failed_quotas)
            self._count_placements(result)
            pods = [p for p in plan.pods if not self._depends_on(p, failed_quotas)]
            await self._write_pods(pods, report)
            await self._sync_zone_labels(report)
            if burst:
                heap.keep_if_large()
        await self._post_outcomes(result)
        await self.statuses.reconcile(result.verdicts, result.now, self.scheduler.memory.holds)
        await self.statuses.warn_unholdable()
        self._remember_verdicts(result)
        report.seconds = time.perf_counter() - t0
        self._observe(result, report)
        self.last = report
        return report

    # --- writes ----------------------------------------------------------------------------------
    async def _assume_binds(self, writes: list[QuotaStatusWrite]) -> None:
        """Count the cycle's binds in the cache from now until each write is answered
        (``extender/cache/bindings.py``): an inline bind of the extender judged meanwhile sees
        their room taken. A bind that mirrors a fact (its pods run on the node) may exceed the
        node's room: it is counted all the same. Moves and releases are not assumed: a node is
        freed in the cache only by the answer of the write that frees it.

        The cache's writers (informers, inline binds) wait at its gate until every bind counts;
        the assuming goes in steps of :data:`ASSUME_STEP`, paced like the writes, so the verbs
        keep the loop (16,000 binds take 0.2 s of it)."""
        binds = [w for w in writes if w.takes and not w.frees]
        if not binds:
            return
        async with self.cache.gate.held():  # entered at once: no writer between the plan and this
            await self.pace.run(self._assume_in_steps(binds))

    async def _assume_in_steps(self, binds: list[QuotaStatusWrite]) -> None:
        for i, w in enumerate(binds, start=1):
            if w.name in self.cache.quotas:
                self.cache.assume_binding(w.name, w.takes, force=True)
                self._binding.add(w.name)
            if i % ASSUME_STEP == 0:
                await asyncio.sleep(0)

    async def _forget_binds(self, names: set[str]) -> None:
        """The writes binding ``names`` failed, were skipped or never ran: forget their bindings."""
        if names & self._binding:
            await self.cache.gate.writable()
            self._forget_binds_now(names)

    def _forget_binds_now(self, names: set[str]) -> None:
        """:meth:`_forget_binds` for a caller that has passed the cache's gate."""
        for name in names & self._binding:
            self.cache.forget_binding(name)
        self._binding -= names

    async def _guarded(self, work: Awaitable[Any]) -> Any:
        """``work`` with at most ``concurrency`` others in flight, paced to the loop share."""
        async with self._sem:
            if isinstance(work, Coroutine):
                return await self.pace.run(work)
            return await work

    async def _each(self, items: list[T], one: Callable[[T], Coroutine[Any, Any, None]]) -> None:
        """``one(item)`` for every item, ``concurrency`` at a time, by that many workers taking
        the next item in turn: at most ``concurrency`` tasks, so that 16,000 writes do not put
        16,000 task steps into one turn of the event loop (a stall of the other requests), and
        every step paced to the loop share."""
        items_left = iter(items)

        async def worker() -> None:
            for item in items_left:
                await self.pace.run(one(item))

        await asyncio.gather(*(worker() for _ in range(min(self.concurrency, len(items)))))

    async def _write_quota_statuses(self, writes: list[QuotaStatusWrite], now: float, report: CycleReport) -> set[str]:
        """The writes that free a node first, then the rest (``plan.in_order``); a bind onto a node
        whose freeing write failed waits for the next cycle, with the other binds of its gang
        (``plan.after_freeing``). Returns the quotas not written."""
        freeing, rest = in_order(writes)
        failed = await self._write_quotas(freeing, now, report)
        ready, waiting = after_freeing(rest, freeing, failed)
        await self._forget_binds({w.name for w in waiting})
        for w in waiting:
            self.cache.dirty_quotas.add(w.name)
            self._count("quota_status", "skipped")
        return failed | {w.name for w in waiting} | await self._write_quotas(ready, now, report)

    async def _write_quotas(self, writes: list[QuotaStatusWrite], now: float, report: CycleReport) -> set[str]:
        failed: set[str] = set()

        async def one(w: QuotaStatusWrite) -> None:
            seen = w.seen  # the object the cycle judged: a delivery since must not pass for it
            expected = ((seen or {}).get("status") or {}).get("nodeName") or ""
            skipped: list[str] = []

            def mutate(obj: dict[str, Any]) -> dict[str, Any] | None:
                skipped.clear()  # what the last call (the one the writer acted on) found
                if not same_spec(obj, seen):
                    skipped.append("changed")
                    return None  # a bigger quota, or a new one of that name: re-plan next cycle
                status = dict(obj.get("status") or {})
                if (status.get("nodeName") or "") != expected:
                    skipped.append("moved")
                    return None  # someone else moved it since we planned: re-plan next cycle
                tasks = merge_inflight(obj, w.status.get("tasks") or [], now, self.cache.claim_arrived)
                if tasks is None:
                    skipped.append("claimed")
                    return None  # a webhook claimed room since we planned: re-plan next cycle
                old_phase = status.get("phase") or QuotaPhase.EMPTY.value
                for k in OWNED_STATUS_FIELDS:
                    v = tasks if k == "tasks" else w.status.get(k)
                    if v in (None, "", [], {}):
                        status.pop(k, None)
                    else:
                        status[k] = v
                if status.get("phase") != old_phase:
                    status["lastTransitionTime"] = format_time(now)
                if status == (obj.get("status") or {}):
                    return None
                return status

            try:
                # written from the cache's copy (one request, not a read and a write): its
                # resourceVersion makes the API refuse it if the copy is not the stored object
                obj = await self.writer.update_quota_status(w.name, mutate, current=dict(seen) if seen else None)
            except Exception as exc:
                await self._forget_binds({w.name})
                await self.cache.gate.writable()
                failed.add(w.name)
                report.failed.append(f"quota {w.name}: {exc}")
                self.cache.dirty_quotas.add(w.name)
                log.warning("quota %s: status write failed: %s", w.name, exc, extra={"quota": w.name})
                self._count("quota_status", "error")
                return
            await self.cache.gate.writable()
            if obj is None or skipped:
                failed.add(w.name)  # what depends on this write waits for the next cycle
                self.cache.dirty_quotas.add(w.name)  # skipped: look again next cycle
                if obj is not None:
                    self.cache.on_quota_update(obj, obj)
                self._forget_binds_now({w.name})
                self._count("quota_status", "skipped")
                return
            before = self.cache.quota_object(w.name)
            self._binding.discard(w.name)  # the answer shows the node: the object counts now
            self.cache.on_quota_update(obj, obj)
            report.quota_writes += 1
            self._count("quota_status", "ok")
            _log_binding(w.name, before, obj)

        await self._each(writes, one)
        return failed

    async def _sync_zone_labels(self, report: CycleReport) -> None:
        """Copy each NodeTopology's ``zone`` label to its Node (the agents may not write Nodes);
        looked at again only after the cache changed, and after a failed write."""
        if self._zone_generation == self.cache.generation:
            return
        failed = False

        async def one(node: str, label: str | None) -> None:
            nonlocal failed
            try:
                obj = await self._guarded(self.writer.patch_node_labels(node, {wellknown.LABEL_ZONE: label}))
            except Exception as exc:
                failed = True
                report.failed.append(f"node {node}: {exc}")
                log.warning("node %s: zone label write failed: %s", node, exc, extra={"node": node})
                self._count("node_labels", "error")
                return
            self.cache.on_node_update(obj, obj)
            self._count("node_labels", "ok")
            log.info("node %s: zone label %s", node, label or "removed", extra={"node": node, "zone": label})

        await asyncio.gather(*(one(n, label) for n, label in sorted(self.cache.zone_label_drift().items())))
        if not failed:
            self._zone_generation = self.cache.generation

    def _depends_on(self, patch: PodPatch, failed_quotas: set[str]) -> bool:
        """A pod patch that gives the pod a quota (or that quota's node) whose status write failed
        or was skipped: the claim is not recorded on the quota, so the pod must not carry it."""
        if patch.annotations.get(wellknown.ANNO_QUOTA_NAME) in failed_quotas:
            return True
        if wellknown.ANNO_QUOTA_NODE not in patch.annotations:
            return False
        task = self.cache.task(patch.uid)
        return task is not None and task.quota in failed_quotas

    async def _write_pods(self, patches: list[PodPatch], report: CycleReport) -> None:
        async def one(p: PodPatch) -> None:
            try:
                obj = await self.writer.patch_pod_annotations(p.namespace, p.name, p.annotations, uid=p.uid)
            except Exception as exc:
                report.failed.append(f"pod {p.namespace}/{p.name}: {exc}")
                pod = f"{p.namespace}/{p.name}"
                log.warning("pod %s: annotation patch failed: %s", pod, exc, extra={"pod": pod})
                self._count("pod_annotations", "error")
                return
            await self.cache.gate.writable()
            self.cache.on_pod_update(obj, obj)
            report.pod_writes += 1
            self._count("pod_annotations", "ok")

        await self._each(patches, one)

    # --- events and PodGroup conditions ----------------------------------------------------------
    async def _post_outcomes(self, result: CycleResult) -> None:
        tasks: list[Awaitable[Any]] = []
        for key, verdict in result.verdicts.items():
            # the message is stable while the reason is (no countdown in it): a repeat bumps the
            # Event's count instead of making another Event
            msg = f"{verdict.stage.label}: {verdict.status.message()}"
            last = self._posted.get(key)
            if last is not None and last[0] == msg and result.now - last[1] < self.event_repeat:
                continue
            self._posted[key] = (msg, result.now)
            tasks.append(
                self._job_event(
                    key, "Warning", verdict.status.reason.value if verdict.status.reason else "Unschedulable", msg
                )
            )
        for key in [k for k in self._posted if k not in result.verdicts]:
            del self._posted[key]
        fix = result.notes.get(fix_quota_binding.NAME)
        if isinstance(fix, Mapping):
            for quota, nodes in fix.get("scattered", ()):
                if quota in self._warned_scattered:
                    continue
                self._warned_scattered.add(quota)
                tasks.append(
                    self._quota_event(
                        quota,
                        "Warning",
                        "QuotaPodsScattered",
                        f"pods of quota {quota} run on several nodes: {', '.join(nodes)}; not touched",
                    )
                )
        rel = result.notes.get(release_quota.NAME)
        if isinstance(rel, release_quota.ReleaseNotes):
            for quota, node, why in rel.released:
                tasks.append(self._quota_event(quota, "Normal", "QuotaReleased", f"released from {node}: {why}"))
        if tasks:
            await asyncio.gather(*(self._guarded(t) for t in tasks), return_exceptions=True)

    async def _quota_event(self, quota: str, type_: str, reason: str, message: str) -> None:
        obj = self.cache.quota_object(quota) or {}
        meta = obj.get("metadata") or {}
        involved = {"apiVersion": obj.get("apiVersion", ""), "kind": "Quota", "name": quota, "uid": meta.get("uid", "")}
        await self.writer.post_event(involved, type_, reason, message)

    async def _job_event(self, key: str, type_: str, reason: str, message: str) -> None:
        job = self.cache.jobs.get(key)
        if job is None:
            return
        if job.has_podgroup:
            obj = self.cache.podgroup_object(key) or {}
            meta = obj.get("metadata") or {}
            involved = {
                "apiVersion": obj.get("apiVersion", ""),
                "kind": "PodGroup",
                "name": job.name,
                "namespace": job.namespace,
                "uid": meta.get("uid", ""),
            }
            await self.writer.post_event(involved, type_, reason, message)
        # and on every pod still waiting, where `kubectl describe pod` shows it
        for t in job.alive_tasks():
            if t.node:
                continue
            involved = {"apiVersion": "v1", "kind": "Pod", "name": t.name, "namespace": t.namespace, "uid": t.uid}
            await self.writer.post_event(involved, type_, reason, message)

    # --- bookkeeping ---------------------------------------------------------------------------
    def _remember_verdicts(self, result: CycleResult) -> None:
        alive = self.cache.jobs
        self.verdicts = {k: v for k, v in self.verdicts.items() if k in alive}
        for key in list(self.verdicts):
            job = alive.get(key)
            if key not in result.verdicts and job is not None and all(t.node for t in job.alive_tasks()):
                del self.verdicts[key]  # placed: no longer stuck
        self.verdicts.update(result.verdicts)

    def _count(self, kind: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.writes.labels(kind=kind, result=outcome).inc()

    def _count_placements(self, result: CycleResult) -> None:
        """``sky_gang_placements_total{tier}`` from the binds this cycle committed."""
        if self.metrics is None:
            return
        for tier, n in committed_by_tier(self.cache, result.intents).items():
            self.metrics.gang_placements.labels(tier=tier).inc(n)

    def _observe(self, result: CycleResult, report: CycleReport) -> None:
        m = self.metrics
        if m is None:
            return
        for action, secs in result.timings.items():
            m.action_seconds.labels(action=action).observe(secs)
        m.cycle_seconds.observe(report.seconds)
        bound = sum(1 for q in self.cache.quotas.values() if q.node_name)
        m.quotas.labels(phase=QuotaPhase.BOUND.value).set(bound)
        m.quotas.labels(phase=QuotaPhase.EMPTY.value).set(len(self.cache.quotas) - bound)
        by_reason: dict[str, int] = {}
        for v in self.verdicts.values():
            reason = v.status.reason.value if v.status.reason else "Unknown"
            by_reason[reason] = by_reason.get(reason, 0) + 1
        m.pending_jobs.clear()
        for reason, n in by_reason.items():
            m.pending_jobs.labels(reason=reason).set(n)
        m.extra_leaves.set(extra_leaves(self.cache))
        holds = self.scheduler.memory.holds
        m.gang_holds.set(len(holds))
        m.held_nodes.set(len({n for h in holds.values() for n in h.nodes}))


def _log_binding(quota: str, before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> None:
    """One INFO line when a quota's node changes (bound, released, moved), with quota / node fields."""
    old = str(((before or {}).get("status") or {}).get("nodeName") or "")
    new = str((after.get("status") or {}).get("nodeName") or "")
    if old == new:
        return
    queue = str((after.get("spec") or {}).get("queueName") or "")
    fields = {"quota": quota, "node": new or old, "queue": queue}
    if new:
        log.info("quota %s bound to %s", quota, new, extra=fields)
    else:
        log.info("quota %s released from %s", quota, old, extra=fields)
