"""The cluster cache: API objects in, an exact domain model out, snapshots for sessions.

Fed by informer events (raw API dicts) through ``on_<kind>_add/update/delete``. Every event first
takes the old object's contributions out of the derived state and then puts the new ones in, so
the two node ledgers, quota claims and job membership stay exact under any event order
(a pod may arrive before its node, its quota or its PodGroup: it is attached when they appear).

Derived, never read from the API:

* node ledgers — from pods (``spec.nodeName``) and quota statuses (``status.nodeName``);
* quota claims (``status.tasks``, ``allocated``) — from live pods' ``quota-name`` annotations;
* jobs — pods grouped by ``scheduling.k8s.io/group-name`` (a pod without one is a job of one),
  with their PodGroup's settings.

Persisted and read back: a quota's ``nodeName``/``phase`` and its ``reservedTasks``. A pod that
held a quota and is deleted or fails (not one that succeeded) leaves a *pending reservation*
that the binder writes into the quota's status.

Also kept here: pods the extender has assumed (bind in flight, invisible to the API yet), quota
bindings whose write is in flight (:mod:`~extender.cache.bindings`) and a monotonically
increasing ``generation`` (any change bumps it).

:class:`ClusterCache` holds the state and is what callers use; the rules of each kind of event
live in a module of their own, as functions of the cache: :mod:`~extender.cache.node_events`,
:mod:`~extender.cache.pod_events`, :mod:`~extender.cache.quota_events`,
:mod:`~extender.cache.jobs` (PodGroups, Queues, JobQueues), with
:mod:`~extender.cache.reservations` and :mod:`~extender.cache.inflight` for what pods leave in
and claim from quotas, and :mod:`~extender.cache.snapshot` for what a session gets. The
underscored attributes are the cache's internal state: only those modules touch them.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from extender import wellknown
from extender.cache import bindings, inflight, jobs, node_events, pod_events, quota_events, reservations
from extender.cache.claims import ClaimEntry
from extender.cache.convert import ConvertOptions
from extender.cache.convert_crds import PodGroupSpec
from extender.cache.gate import ReadGate
from extender.cache.meta import Obj, uid_of
from extender.cache.snapshot import snapshot_of
from extender.framework.session import Snapshot
from extender.model.job import JobInfo, JobQueueInfo, QueueInfo
from extender.model.node import LedgerError, NodeInfo
from extender.model.quota import ClaimError, QuotaInfo, ReservedTask
from extender.model.resources import Resource
from extender.model.task import ON_NODE, TaskInfo, TaskStatus

__all__ = ["Assumed", "ClusterCache"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Assumed:
    node: str
    expires: float


class ClusterCache:
    def __init__(
        self,
        opts: ConvertOptions | None = None,
        *,
        scheduler_name: str = wellknown.SCHEDULER_NAME,
        reservation_ttl: float = 600.0,
        assume_ttl: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.opts = opts or ConvertOptions()
        self.scheduler_name = scheduler_name
        self.reservation_ttl = reservation_ttl
        self.assume_ttl = assume_ttl
        self.clock = clock

        self._node_objs: dict[str, Obj] = {}
        self._topos: dict[str, Obj] = {}
        self._pod_objs: dict[str, Obj] = {}  # uid → pod (managed pods and pods bound to nodes)
        self._podgroups: dict[str, PodGroupSpec] = {}
        self._quota_objs: dict[str, Obj] = {}
        self._podgroup_objs: dict[str, Obj] = {}
        # job → its PodGroup's status.hold, (nodes, since): the holds the binder leader recorded
        self.recorded_holds: dict[str, tuple[tuple[str, ...], float]] = {}
        # quota → its status.hold, (job, nodes, since): the holds of jobs of one pod, likewise
        self.quota_holds: dict[str, tuple[str, tuple[str, ...], float]] = {}
        self._queue_objs: dict[str, Obj] = {}  # the API objects, for their status and quota pools
        self._jobqueue_objs: dict[str, Obj] = {}

        self.nodes: dict[str, NodeInfo] = {}
        self.quotas: dict[str, QuotaInfo] = {}
        self.jobs: dict[str, JobInfo] = {}
        self.task_job: dict[str, str] = {}
        self.others: dict[str, TaskInfo] = {}  # pods of other schedulers, counted in node ledgers
        self.queues: dict[str, QueueInfo] = {}
        self.jobqueues: dict[str, JobQueueInfo] = {}

        self.assumed: dict[str, Assumed] = {}
        self.bindings: dict[str, bindings.InFlight] = {}  # quota → its binding whose write is in flight
        self._waiting_claims: defaultdict[str, set[str]] = defaultdict(set)  # missing quota → pod uids
        self.pending_reservations: dict[str, dict[str, ReservedTask]] = defaultdict(dict)  # quota → uid → r
        self._reservation_expiry: dict[str, float] = {}  # quota → earliest expiry its status shows
        self.conversion_errors: dict[str, str] = {}  # "Kind/name" → last error (shown by /diagnose)
        self.node_problems: dict[str, str] = {}  # node → why its spot pools cannot be read (logged once)
        # in-flight claims recorded on the quotas (status.tasks entries with expiresAt), and the
        # ones whose pod was seen claiming the quota (never counted again: the pod's claim is)
        self._inflight: dict[str, dict[str, ClaimEntry]] = {}
        self._arrived: dict[str, str] = {}  # in-flight entry → the pod that accounts for it

        self.generation = 0
        self.dirty_quotas: set[str] = set()  # derived status (claims, reservations) may differ from the API
        # indices that let an idle cycle do O(changes) work
        self.pending_jobs: set[str] = set()  # jobs with an alive non-spot task not on a node
        self.changed_jobs: set[str] = set()  # jobs whose status inputs may have changed (take_changed_jobs)
        self.quota_touched: dict[str, int] = {}  # quota → generation of its last change
        self.release_candidates: set[str] = set()  # bound, non-static quotas without claims or node
        self.static_quotas: set[str] = set()  # quotas with spec.staticBindNode
        self.anti_affinity_quotas: set[str] = set()  # quotas that declare quota anti-affinity
        self.drifted: set[str] = set()  # quotas a pod of which was seen placed on another node than theirs
        self._quotas_on: defaultdict[str, set[str]] = defaultdict(set)  # node name → quotas bound to it
        self._tasks_on_node: defaultdict[str, set[str]] = defaultdict(set)  # node name → pod uids placed there
        self._node_order: list[str] | None = None
        self._zones: dict[tuple[str, str], list[str]] | None = None
        self._by_queue: dict[str, list[str]] | None = None
        self._total: Resource | None = None
        # called with a quota's name whenever anything of it changes — claims, status, node,
        # reservations, spec — or it is deleted (the webhook's candidate index listens)
        self.quota_listeners: list[Callable[[str], None]] = []
        # off-loop readers (binder cycles, very large requests) and the writers that wait for them
        self.gate = ReadGate()

    # --- bookkeeping (shared by the event modules) ------------------------------------------
    def _notify(self, quota: str) -> None:
        for listener in self.quota_listeners:
            listener(quota)

    def _touch(self, quota: str) -> None:
        """A quota's claims, status or node changed: re-index it."""
        self.quota_touched[quota] = self.generation + 1
        self._notify(quota)
        q = self.quotas.get(quota)
        if (
            q is not None
            and q.node_name
            and q.bound_by
            and not q.static_bind_node
            and (not q.claims or q.node_name not in self.nodes)
        ):
            self.release_candidates.add(quota)
        else:
            self.release_candidates.discard(quota)

    def _bump(self, *, nodes: bool = False, quotas: bool = False) -> None:
        self.generation += 1
        if nodes:
            self._node_order = None
            self._zones = None
            self._total = None
        if quotas:
            self._by_queue = None

    def _error(self, what: str, exc: Exception) -> None:
        msg = str(exc)
        if self.conversion_errors.get(what) != msg:
            log.warning("skipping %s: %s", what, msg)
        self.conversion_errors[what] = msg

    def _ok(self, what: str) -> None:
        self.conversion_errors.pop(what, None)

    def is_managed(self, pod: Obj) -> bool:
        return (pod.get("spec") or {}).get("schedulerName") == self.scheduler_name

    # --- informer events (each kind's rules: its module) ------------------------------------
    def on_node_add(self, obj: Obj) -> None:
        node_events.on_node_add(self, obj)

    def on_node_update(self, old: Obj, new: Obj) -> None:
        node_events.on_node_add(self, new)

    def on_node_delete(self, obj: Obj) -> None:
        node_events.on_node_delete(self, obj)

    def on_topology_add(self, obj: Obj) -> None:
        node_events.on_topology_add(self, obj)

    def on_topology_update(self, old: Obj, new: Obj) -> None:
        node_events.on_topology_update(self, old, new)

    def on_topology_delete(self, obj: Obj) -> None:
        node_events.on_topology_delete(self, obj)

    def on_pod_add(self, obj: Obj) -> None:
        pod_events.apply_pod(self, None, obj)

    def on_pod_update(self, old: Obj, new: Obj) -> None:
        pod_events.apply_pod(self, self._pod_objs.get(uid_of(new)), new)

    def on_pod_delete(self, obj: Obj) -> None:
        pod_events.on_pod_delete(self, obj)

    def on_quota_add(self, obj: Obj) -> None:
        quota_events.on_quota_add(self, obj)

    def on_quota_update(self, old: Obj, new: Obj) -> None:
        quota_events.on_quota_add(self, new)

    def on_quota_delete(self, obj: Obj) -> None:
        quota_events.on_quota_delete(self, obj)

    def on_podgroup_add(self, obj: Obj) -> None:
        jobs.on_podgroup_add(self, obj)

    def on_podgroup_update(self, old: Obj, new: Obj) -> None:
        jobs.on_podgroup_add(self, new)

    def on_podgroup_delete(self, obj: Obj) -> None:
        jobs.on_podgroup_delete(self, obj)

    def on_queue_add(self, obj: Obj) -> None:
        jobs.on_queue_add(self, obj)

    def on_queue_update(self, old: Obj, new: Obj) -> None:
        jobs.on_queue_add(self, new)

    def on_queue_delete(self, obj: Obj) -> None:
        jobs.on_queue_delete(self, obj)

    def on_jobqueue_add(self, obj: Obj) -> None:
        jobs.on_jobqueue_add(self, obj)

    def on_jobqueue_update(self, old: Obj, new: Obj) -> None:
        jobs.on_jobqueue_add(self, new)

    def on_jobqueue_delete(self, obj: Obj) -> None:
        jobs.on_jobqueue_delete(self, obj)

    def zone_label_drift(self) -> dict[str, str | None]:
        """Nodes whose ``zone`` label differs from their NodeTopology's (node → the label it
        should have; None: remove it): :func:`extender.cache.node_events.zone_label_drift`."""
        return node_events.zone_label_drift(self)

    # --- in-flight claims (recorded on the quota before the pod exists) -------------------------
    def inflight_entry(self, quota: str, uid: str) -> ClaimEntry | None:
        """The in-flight entry behind claim ``uid`` of ``quota`` (None: a pod's claim)."""
        return self._inflight.get(quota, {}).get(uid)

    def claim_arrived(self, uid: str) -> bool:
        """The pod in-flight entry ``uid`` was made for has been seen claiming its quota."""
        return uid in self._arrived

    # --- assumed pods (extender) -------------------------------------------------------------
    def assume(self, uid: str, node_name: str) -> None:
        """Count a pod as placed on ``node_name`` before the API shows it (bind in flight)."""
        key = self.task_job.get(uid)
        job = self.jobs.get(key) if key else None
        task = job.tasks.get(uid) if job else None
        if task is None:
            raise KeyError(uid)
        self.assumed[uid] = Assumed(node_name, self.clock() + self.assume_ttl)
        if task.node and task.status in ON_NODE:
            return
        node = self.nodes.get(node_name)
        if node is None:
            raise LedgerError(f"node {node_name} is not in the cache")
        task.status = TaskStatus.BINDING
        task.node = node_name
        self._tasks_on_node[node_name].add(uid)
        node.add_task(task, force=True)
        assert job is not None
        jobs.refresh_job(self, job)
        self._bump()

    def forget(self, uid: str) -> None:
        """Drop an assumption (bind failed): the pod is pending again."""
        a = self.assumed.pop(uid, None)
        if a is None:
            return
        obj = self._pod_objs.get(uid)
        if obj is not None:
            pod_events.apply_pod(self, obj, obj)
        self._bump()

    def expire_assumed(self) -> list[str]:
        """Forget the assumed pods and quota bindings whose writer never came back; returns the
        pods' uids."""
        now = self.clock()
        gone = [uid for uid, a in self.assumed.items() if a.expires <= now]
        for uid in gone:
            self.forget(uid)
        bindings.expire(self)
        return gone

    # --- quota bindings in flight (extender, binder) ---------------------------------------------
    def assume_binding(self, quota: str, node_name: str, *, force: bool = False) -> None:
        """Count ``quota`` as bound to ``node_name`` until its write is answered
        (:func:`extender.cache.bindings.assume`)."""
        bindings.assume(self, quota, node_name, force=force)

    def forget_binding(self, quota: str) -> None:
        """The write binding ``quota`` failed or was skipped: it is as its object says again."""
        bindings.forget(self, quota)

    # --- reading -----------------------------------------------------------------------------
    def pod(self, uid: str) -> Obj | None:
        return self._pod_objs.get(uid)

    def quota_object(self, name: str) -> Obj | None:
        return self._quota_objs.get(name)

    def quota_objects(self) -> Mapping[str, Obj]:
        """Every Quota object by name, as the informer delivered it (read only)."""
        return self._quota_objs

    def queue_object(self, name: str) -> Obj | None:
        return self._queue_objs.get(name)

    def jobqueue_object(self, name: str) -> Obj | None:
        return self._jobqueue_objs.get(name)

    def holds_on_record(self) -> dict[str, tuple[tuple[str, ...], float]]:
        """job → (nodes, since): every hold the binder leader recorded — a gang's in its
        PodGroup's ``status.hold``, a job of one pod's in the ``status.hold`` of the quota it
        claims (a record there naming a job that has a PodGroup does not count)."""
        out = {job: (nodes, since) for job, nodes, since in self.quota_holds.values() if job not in self._podgroups}
        out.update(self.recorded_holds)
        return out

    def podgroup_object(self, key: str) -> Obj | None:
        return self._podgroup_objs.get(key)

    def node_object(self, name: str) -> Obj | None:
        return self._node_objs.get(name)

    def pod_by_name(self, namespace: str, name: str) -> Obj | None:
        for obj in self._pod_objs.values():
            meta = obj.get("metadata") or {}
            if meta.get("name") == name and (meta.get("namespace") or "default") == namespace:
                return obj
        return None

    def pod_problem(self, namespace: str, name: str) -> str | None:
        """Why the pod ``namespace/name`` of ours is not in the model: the conversion error of its
        latest version (a bad annotation, an unreadable quantity …); None when there is none."""
        return self.conversion_errors.get(f"Pod/{namespace}/{name}")

    def task(self, uid: str) -> TaskInfo | None:
        key = self.task_job.get(uid)
        job = self.jobs.get(key) if key else None
        return job.tasks.get(uid) if job else None

    def node_order(self) -> list[str]:
        if self._node_order is None:
            self._node_order = sorted(self.nodes, key=lambda n: (self.nodes[n].index, n))
        return self._node_order

    def zones(self) -> dict[tuple[str, str], list[str]]:
        if self._zones is None:
            zones: dict[tuple[str, str], list[str]] = {}
            for name in self.node_order():
                n = self.nodes[name]
                if n.zone:
                    zones.setdefault((n.spec, n.zone), []).append(name)
            self._zones = zones
        return self._zones

    def quotas_by_queue(self) -> dict[str, list[str]]:
        if self._by_queue is None:
            idx: dict[str, list[str]] = defaultdict(list)
            for q in sorted(self.quotas.values(), key=lambda q: q.name):
                idx[q.queue].append(q.name)
                for shared in q.shared_queues:
                    if shared != q.queue:
                        idx[shared].append(q.name)
            self._by_queue = dict(idx)
        return self._by_queue

    def cluster_total(self) -> Resource:
        if self._total is None:
            self._total = Resource.total(n.allocatable for n in self.nodes.values())
        return self._total

    def snapshot(self, now: float | None = None) -> Snapshot:
        """A view of the cache for one session, in O(1) (:mod:`extender.cache.snapshot`)."""
        return snapshot_of(self, now)

    def take_changed_jobs(self) -> set[str]:
        """The jobs marked changed since the last call (pods, PodGroup, their quotas' binding),
        and forget them: the status reconciler looks at these."""
        out, self.changed_jobs = self.changed_jobs, set()
        return out

    def take_dirty_quotas(self) -> set[str]:
        """Quotas whose derived status may differ from the API since the last call (the binder
        calls this every cycle: quotas whose status shows an expired reservation are among them)."""
        self.expire_entries()
        out, self.dirty_quotas = self.dirty_quotas, set()
        return {q for q in out if q in self.quotas}

    def expire_entries(self) -> None:
        """What has expired by the clock leaves the cache's view — in-flight claims, reservations
        — and the quotas whose status still shows it are marked dirty (what
        :meth:`take_dirty_quotas` does first; followers call this every period, see
        ``BinderLoop.follow``). Expired reservations leave the status every cycle (seed 2.4 ②),
        also of a quota that nothing else changes (still claimed, or statically bound). Judged on
        what the status *shows*, so a write that raced the expiry is simply redone next cycle."""
        now = self.clock()
        reservations.mark_expired_shown(self, now)
        inflight.expire(self, now)
        reservations.drop_expired_pending(self, now)

    def check(self) -> None:
        """Verify every node ledger and every quota's claim sum (raises on drift)."""
        for n in self.nodes.values():
            n.check()
        for q in self.quotas.values():
            total = Resource.total(c.request for c in q.claims.values())
            if total != q.allocated:
                raise ClaimError(f"quota {q.name}: allocated {q.allocated} != Σ claims {total}")
