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

Also kept here: pods the extender has assumed (bind in flight, invisible to the API yet) and
a monotonically increasing ``generation`` (any change bumps it).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from extender import wellknown
from extender.cache import convert
from extender.cache.claims import ADMISSION_PREFIX, ClaimEntry, entries_of
from extender.cache.convert import ConversionError, ConvertOptions, PodGroupSpec
from extender.cache.gate import ReadGate
from extender.cache.tierlimit import TierLimit, job_tier_limit, pod_tier_limit
from extender.framework.session import Snapshot
from extender.model.claimant import Claimant, replaces
from extender.model.job import JobInfo, JobPhase, JobQueueInfo, QueueInfo
from extender.model.node import LedgerError, NodeInfo
from extender.model.quota import ClaimError, QuotaInfo, ReservedTask
from extender.model.resources import Resource
from extender.model.task import ON_NODE, TaskInfo, TaskStatus

__all__ = ["Assumed", "ClusterCache"]

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Assumed:
    node: str
    expires: float


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _rv(obj: Obj | None) -> int | None:
    raw = ((obj or {}).get("metadata") or {}).get("resourceVersion")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else None


def _older(new: Obj, current: Obj | None) -> bool:
    """``new`` is an older version than ``current`` (resourceVersions compared when numeric,
    as every apiserver backed by etcd issues them; otherwise never considered older)."""
    a, b = _rv(new), _rv(current)
    return a is not None and b is not None and a < b


def _disruption_reason(obj: Obj) -> str:
    status = obj.get("status") or {}
    if status.get("phase") == "Failed":
        return "Evicted" if status.get("reason") == "Evicted" else "Failed"
    for c in status.get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == "DisruptionTarget" and c.get("status") == "True":
            reason = str(c.get("reason") or "")
            if "Preemption" in reason:
                return "Preempted"
            if "Eviction" in reason or "Taint" in reason:
                return "Evicted"
    return "Deleted"


def _mark(index: set[str], name: str, member: bool) -> None:
    if member:
        index.add(name)
    else:
        index.discard(name)


class CopiedOnRead(Collection[str]):
    """One of the cache's index sets, as a snapshot holds it: copied on the first read.

    A session reads its snapshot synchronously (it never lives across an ``await``), so the copy
    shows the set as it was when the snapshot was taken; the copy keeps iteration safe from the
    cache changing later."""

    __slots__ = ("_copy", "_source")

    def __init__(self, source: set[str]) -> None:
        self._source: set[str] | None = source
        self._copy: frozenset[str] = frozenset()

    def _items(self) -> frozenset[str]:
        if self._source is not None:
            self._copy, self._source = frozenset(self._source), None
        return self._copy

    def __contains__(self, item: object) -> bool:
        return item in self._items()

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())


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
        self._waiting_claims: defaultdict[str, set[str]] = defaultdict(set)  # missing quota → pod uids
        self.pending_reservations: dict[str, dict[str, ReservedTask]] = defaultdict(dict)  # quota → uid → r
        self._reservation_expiry: dict[str, float] = {}  # quota → earliest expiry its status shows
        self.conversion_errors: dict[str, str] = {}  # "Kind/name" → last error (shown by /diagnose)
        # in-flight claims recorded on the quotas (status.tasks entries with expiresAt), and the
        # ones whose pod was seen claiming the quota (never counted again: the pod's claim is)
        self._inflight: dict[str, dict[str, ClaimEntry]] = {}
        self._arrived: set[str] = set()

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

    # --- bookkeeping -------------------------------------------------------------------------
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

    # --- nodes -------------------------------------------------------------------------------
    def on_node_add(self, obj: Obj) -> None:
        self._node_objs[_name(obj)] = obj
        self._rebuild_node(_name(obj))

    def on_node_update(self, old: Obj, new: Obj) -> None:
        self.on_node_add(new)

    def on_node_delete(self, obj: Obj) -> None:
        name = _name(obj)
        self._node_objs.pop(name, None)
        self.nodes.pop(name, None)
        for q in list(self._quotas_on.get(name, ())):
            self._touch(q)
        self._bump(nodes=True)

    def on_topology_add(self, obj: Obj) -> None:
        name = _name(obj)
        self._topos[name] = obj
        if name in self._node_objs:
            self._rebuild_node(name)

    def on_topology_update(self, old: Obj, new: Obj) -> None:
        name = _name(new)
        if name in self._topos and old.get("spec") == new.get("spec"):
            # a status-only write (the discovery agents' heartbeat): nothing the node is built
            # from changed, so no rebuild and no generation bump
            self._topos[name] = new
            return
        self.on_topology_add(new)

    def on_topology_delete(self, obj: Obj) -> None:
        name = _name(obj)
        self._topos.pop(name, None)
        if name in self._node_objs:
            self._rebuild_node(name)

    def zone_label_drift(self) -> dict[str, str | None]:
        """Nodes whose ``zone`` label differs from their NodeTopology's (node → the label it should
        have; None: remove it). The discovery agents label the NodeTopology they own; the binder
        leader copies the label to the Node. A NodeTopology without the label but with switches was
        not written by an agent (by hand, an older agent): its node is left as it is; one without
        switches means the node lost every switch, and its label goes."""
        out: dict[str, str | None] = {}
        for name, topo in self._topos.items():
            node = self._node_objs.get(name)
            if node is None:
                continue
            want = ((topo.get("metadata") or {}).get("labels") or {}).get(wellknown.LABEL_ZONE)
            if want is None and any(convert.topology_switches(topo)):
                continue
            have = ((node.get("metadata") or {}).get("labels") or {}).get(wellknown.LABEL_ZONE)
            if have != want:
                out[name] = want
        return out

    def _rebuild_node(self, name: str) -> None:
        obj = self._node_objs[name]
        try:
            node = convert.node_from_api(obj, self._topos.get(name), self.opts)
        except (ConversionError, ValueError) as exc:
            self._error(f"Node/{name}", exc)
            return
        self._ok(f"Node/{name}")
        # re-attach everything this node carries
        for task in self._tasks_on(name):
            node.add_task(task, force=True)
        bound_here = [q for q in (self.quotas.get(n) for n in sorted(self._quotas_on.get(name, ()))) if q is not None]
        for q in bound_here:
            node.add_quota(q.name, q.request, force=True)
        self.nodes[name] = node
        for q in bound_here:
            self._touch(q.name)
        self._bump(nodes=True)

    def _tasks_on(self, node: str) -> list[TaskInfo]:
        out = []
        for uid in self._tasks_on_node.get(node, ()):
            t = self.others.get(uid) or self.task(uid)
            if t is not None and t.node == node and t.status in ON_NODE:
                out.append(t)
        return out

    # --- pods --------------------------------------------------------------------------------
    def on_pod_add(self, obj: Obj) -> None:
        self._apply_pod(None, obj)

    def on_pod_update(self, old: Obj, new: Obj) -> None:
        self._apply_pod(self._pod_objs.get(_uid(new)), new)

    def on_pod_delete(self, obj: Obj) -> None:
        uid = _uid(obj)
        self._pod_objs.pop(uid, None)
        named = ((obj.get("metadata") or {}).get("annotations") or {}).get(wellknown.ANNO_QUOTA_NAME)
        if named and named in self._waiting_claims:
            self._waiting_claims[named].discard(uid)
        self._remove_task(uid, deleted=obj)
        self.assumed.pop(uid, None)
        self._bump()

    def _apply_pod(self, old: Obj | None, obj: Obj) -> None:
        uid = _uid(obj)
        if old is not obj and _older(obj, self._pod_objs.get(uid)):
            return
        managed = self.is_managed(obj)
        bound = bool((obj.get("spec") or {}).get("nodeName"))
        if not managed and not bound:
            if uid in self._pod_objs:
                self._pod_objs.pop(uid)
                self._remove_task(uid, deleted=None)
                self._bump()
            return
        what = f"Pod/{(obj.get('metadata') or {}).get('namespace')}/{_name(obj)}"
        try:
            task = convert.task_from_api(obj, self.opts)
        except (ConversionError, ValueError) as exc:
            self._error(what, exc)
            return
        self._ok(what)
        prev = self._pod_objs.get(uid)
        self._pod_objs[uid] = obj
        terminal_now = task.status in (TaskStatus.SUCCEEDED, TaskStatus.FAILED)
        had_claim = self._claim_of(uid)
        self._remove_task(uid, deleted=None)
        if bound or not managed:
            self.assumed.pop(uid, None)
        elif uid in self.assumed:
            a = self.assumed[uid]
            if a.expires > self.clock():
                task.status = TaskStatus.BINDING
                task.node = a.node
            else:
                del self.assumed[uid]
        if not managed:
            if task.status in ON_NODE:
                self.others[uid] = task
                self._tasks_on_node[task.node].add(uid)
                node = self.nodes.get(task.node)
                if node is not None:
                    node.add_task(task, force=True)
            self._bump()
            return
        # a claiming pod that just failed leaves a reservation (a succeeded one does not)
        if had_claim and terminal_now and task.status is TaskStatus.FAILED and prev is not None:
            self._reserve(had_claim, task, prev, "Failed")
        self._add_task(task)
        self._bump()

    def _claim_of(self, uid: str) -> str:
        key = self.task_job.get(uid)
        if key is None:
            return ""
        job = self.jobs.get(key)
        t = job.tasks.get(uid) if job else None
        return t.quota if t is not None else ""

    def _add_task(self, task: TaskInfo) -> None:
        key = task.job
        job = self.jobs.get(key)
        if job is None:
            job = self._new_job(key, task.namespace)
        job.add_task(task)
        self.task_job[task.uid] = key
        self._refresh_job(job)
        if task.status in ON_NODE and task.node:
            self._tasks_on_node[task.node].add(task.uid)
            node = self.nodes.get(task.node)
            if node is not None:
                node.add_task(task, force=True)
        claim = task.quota
        task.quota = ""
        if claim and task.is_alive():
            quota = self.quotas.get(claim)
            if quota is not None:
                quota.add_claim(task, force=True)  # what the API says, even if over-claimed
                task.quota = claim
                self.dirty_quotas.add(claim)
                self._touch(claim)
                self._consume_reservation(quota, task)
                self._sync_inflight(claim)
                if task.node and task.status in ON_NODE and task.node != quota.node_name:
                    self.drifted.add(claim)  # fix_quota_binding moves it next cycle, unthrottled
        if claim and task.is_alive() and not task.quota:
            self._waiting_claims[claim].add(task.uid)  # attached if the quota appears
        # a claim naming a quota that does not exist stays unattached: allocate_job re-assigns it
        if task.status is TaskStatus.ALLOCATED_TO_QUOTA and not task.quota:
            task.status = TaskStatus.PENDING
        elif task.status is TaskStatus.PENDING and task.quota:
            task.status = TaskStatus.ALLOCATED_TO_QUOTA

    def _consume_reservation(self, quota: QuotaInfo, task: TaskInfo) -> None:
        """A restarted pod claimed its reserved quota: the reservation has done its job."""
        now = self.clock()
        taken = quota.reservation_for(task, now)
        if taken is None:
            return
        quota.reserved = tuple(r for r in quota.reserved if r is not taken)
        self.pending_reservations.get(quota.name, {}).pop(taken.pod_uid, None)
        self.dirty_quotas.add(quota.name)
        self._notify(quota.name)

    def _remove_task(self, uid: str, *, deleted: Obj | None) -> None:
        other = self.others.pop(uid, None)
        if other is not None:
            self._tasks_on_node[other.node].discard(uid)
            node = self.nodes.get(other.node)
            if node is not None and node.has_task(uid):
                node.remove_task(uid)
            return
        key = self.task_job.pop(uid, None)
        if key is None:
            return
        job = self.jobs.get(key)
        if job is None:
            return
        task = job.remove_task(uid)
        if task is None:
            return
        final = ((deleted or {}).get("status") or {}).get("phase")
        if final in (TaskStatus.SUCCEEDED.value, TaskStatus.FAILED.value):
            job.finished[uid] = TaskStatus(final)
        if task.node:
            self._tasks_on_node[task.node].discard(uid)
            node = self.nodes.get(task.node)
            if node is not None and node.has_task(uid):
                node.remove_task(uid)
        if task.quota:
            quota = self.quotas.get(task.quota)
            if quota is not None and uid in quota.claims:
                quota.remove_claim(uid)
                self.dirty_quotas.add(quota.name)
                self._touch(quota.name)
                finished = ((deleted or {}).get("status") or {}).get("phase") == "Succeeded"
                if (
                    deleted is not None
                    and task.status is not TaskStatus.SUCCEEDED
                    and not finished
                    and not job.podgroup_missing  # its PodGroup was deleted: the job is gone
                    and not self._has_successor(job, task)
                ):
                    self._reserve(task.quota, task, deleted, _disruption_reason(deleted))
        if not job.tasks and not job.has_podgroup:
            del self.jobs[key]
            self.changed_jobs.add(key)
            self.pending_jobs.discard(key)
        else:
            self._refresh_job(job)

    @staticmethod
    def _has_successor(job: JobInfo, task: TaskInfo) -> bool:
        """A live pod of ``job`` already replaces ``task`` (recreated before its deletion was seen):
        no place needs keeping for it."""
        old = Claimant(task.namespace, task.name, task.job, task.index)
        for t in job.tasks.values():
            if t.uid == task.uid or not t.is_alive():
                continue
            if replaces(Claimant(t.namespace, t.name, t.job, t.index, t.inherit_from), old):
                return True
        return False

    # --- in-flight claims (recorded on the quota before the pod exists) -------------------------
    def _sync_inflight(self, name: str) -> None:
        """The quota's claims include exactly its in-flight entries that are unexpired and whose
        pod has not been seen claiming it (extender.cache.claims)."""
        q = self.quotas.get(name)
        if q is None:
            return
        entries = self._inflight.get(name, {})
        have = [uid for uid in q.claims if uid.startswith(ADMISSION_PREFIX)]
        if not entries and not have:
            return
        now = self.clock()
        pods = [c for c in q.claims.values() if not c.uid.startswith(ADMISSION_PREFIX)]
        want: dict[str, ClaimEntry] = {}
        for e in entries.values():
            if e.uid in self._arrived or e.expired(now):
                continue
            if any(e.accounts_for(c.namespace, c.name, c.job, c.index) for c in pods):
                self._arrived.add(e.uid)
                self.dirty_quotas.add(name)  # the entry is rewritten in the pod's form
                continue
            want[e.uid] = e
        changed = False
        for uid in have:
            if uid not in want:
                q.remove_claim(uid)
                changed = True
        for uid, e in want.items():
            if uid not in q.claims:
                q.restore_claim(e.claim())
                changed = True
        if changed:
            self.dirty_quotas.add(name)
            self._touch(name)
            self._bump()

    def inflight_entry(self, quota: str, uid: str) -> ClaimEntry | None:
        """The in-flight entry behind claim ``uid`` of ``quota`` (None: a pod's claim)."""
        return self._inflight.get(quota, {}).get(uid)

    def claim_arrived(self, uid: str) -> bool:
        """The pod in-flight entry ``uid`` was made for has been seen claiming its quota."""
        return uid in self._arrived

    def _reserve(self, quota_name: str, task: TaskInfo, pod: Obj, reason: str) -> None:
        quota = self.quotas.get(quota_name)
        if quota is None or self.reservation_ttl <= 0:
            return
        r = ReservedTask(
            job=task.job,
            index=task.index,
            namespace=task.namespace,
            pod_name=task.name,
            pod_uid=task.uid,
            reason=reason,
            expires_at=self.clock() + self.reservation_ttl,
            request=quota.governed(task.request),  # what the slot keeps free, as a claim counts it
        )
        self.pending_reservations[quota_name][task.uid] = r
        self.dirty_quotas.add(quota_name)
        quota.reserved = (*tuple(x for x in quota.reserved if x.pod_uid != task.uid), r)
        self._notify(quota_name)

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
        self._refresh_job(job)
        self._bump()

    def forget(self, uid: str) -> None:
        """Drop an assumption (bind failed): the pod is pending again."""
        a = self.assumed.pop(uid, None)
        if a is None:
            return
        obj = self._pod_objs.get(uid)
        if obj is not None:
            self._apply_pod(obj, obj)
        self._bump()

    def expire_assumed(self) -> list[str]:
        now = self.clock()
        gone = [uid for uid, a in self.assumed.items() if a.expires <= now]
        for uid in gone:
            self.forget(uid)
        return gone

    # --- quotas ------------------------------------------------------------------------------
    def on_quota_add(self, obj: Obj) -> None:
        name = _name(obj)
        current = self._quota_objs.get(name)
        if _older(obj, current) or (current is not None and _rv(obj) is not None and _rv(obj) == _rv(current)):
            # a write's answer was applied already; the informer is catching up (the same
            # resourceVersion is the same object: converting it again would change nothing and
            # costs the event loop ~1 ms a quota, 16,000 times after a burst)
            return
        try:
            new = convert.quota_from_api(obj, self.opts)
        except (ConversionError, ValueError) as exc:
            self._error(f"Quota/{name}", exc)
            return
        self._ok(f"Quota/{name}")
        self._quota_objs[name] = obj
        old = self.quotas.get(name)
        if old is not None:
            if old.node_name:
                self._quotas_on[old.node_name].discard(name)
                node = self.nodes.get(old.node_name)
                if node is not None and node.has_quota(name):
                    node.remove_quota(name)
            new.take_claims(old)
        if new.reserved:
            self._reservation_expiry[name] = min(r.expires_at for r in new.reserved)
        else:
            self._reservation_expiry.pop(name, None)
        pending = self.pending_reservations.get(name, {})
        persisted = {r.pod_uid for r in new.reserved}
        for uid in list(pending):
            if uid in persisted:
                del pending[uid]  # written: the object now carries it
        new.reserved = (*new.reserved, *pending.values())
        self.quotas[name] = new
        self.drifted.discard(name)
        for uid in new.claims:
            t = self.task(uid)
            if t is not None and t.node and t.status in ON_NODE and t.node != new.node_name:
                self.drifted.add(name)
                break
        entries = entries_of(obj)
        gone = self._inflight.get(name, {}).keys() - entries.keys()
        self._arrived.difference_update(gone)
        if entries:
            self._inflight[name] = entries
        else:
            self._inflight.pop(name, None)
        self._sync_inflight(name)
        _mark(self.static_quotas, name, bool(new.static_bind_node))
        _mark(self.anti_affinity_quotas, name, bool(new.quota_anti_affinity))
        self.dirty_quotas.add(name)
        self._touch(name)
        if new.node_name:
            self._quotas_on[new.node_name].add(name)
            node = self.nodes.get(new.node_name)
            if node is not None:
                node.add_quota(name, new.request, force=True)
        if old is None:
            self._attach_claims(name)
        self.changed_jobs.update(c.job for c in new.claims.values())  # boundQuotas may differ
        self._bump(quotas=old is None or old.queue != new.queue or old.shared_queues != new.shared_queues)

    def on_quota_update(self, old: Obj, new: Obj) -> None:
        self.on_quota_add(new)

    def on_quota_delete(self, obj: Obj) -> None:
        name = _name(obj)
        q = self.quotas.pop(name, None)
        self._quota_objs.pop(name, None)
        self.quota_touched.pop(name, None)
        self.release_candidates.discard(name)
        self.static_quotas.discard(name)
        self.anti_affinity_quotas.discard(name)
        self.drifted.discard(name)
        self.pending_reservations.pop(name, None)
        self._reservation_expiry.pop(name, None)
        self._arrived.difference_update(self._inflight.pop(name, {}))
        self._notify(name)
        if q is None:
            return
        if q.node_name:
            self._quotas_on[q.node_name].discard(name)
            node = self.nodes.get(q.node_name)
            if node is not None and node.has_quota(name):
                node.remove_quota(name)
        self.changed_jobs.update(c.job for c in q.claims.values())
        for uid in q.claims:
            self._waiting_claims[name].add(uid)
            key = self.task_job.get(uid)
            job = self.jobs.get(key) if key else None
            task = job.tasks.get(uid) if job else None
            if task is not None:
                task.quota = ""
                if task.status is TaskStatus.ALLOCATED_TO_QUOTA:
                    task.status = TaskStatus.PENDING
        self._bump(quotas=True)

    def _attach_claims(self, quota_name: str) -> None:
        """Pods that named this quota before it existed now claim it."""
        for uid in self._waiting_claims.pop(quota_name, set()):
            obj = self._pod_objs.get(uid)
            if obj is not None and uid in self.task_job:
                self._apply_pod(obj, obj)

    # --- PodGroups, queues, job queues -------------------------------------------------------
    def on_podgroup_add(self, obj: Obj) -> None:
        what = f"PodGroup/{(obj.get('metadata') or {}).get('namespace')}/{_name(obj)}"
        try:
            pg = convert.podgroup_from_api(obj, self.opts)
        except (ConversionError, ValueError) as exc:
            self._error(what, exc)
            return
        self._ok(what)
        self._podgroups[pg.key] = pg
        self._podgroup_objs[pg.key] = obj
        job = self.jobs.get(pg.key) or self._new_job(pg.key, pg.namespace)
        self._refresh_job(job)
        self._bump()

    def on_podgroup_update(self, old: Obj, new: Obj) -> None:
        self.on_podgroup_add(new)

    def on_podgroup_delete(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{_name(obj)}"
        self._podgroups.pop(key, None)
        self._podgroup_objs.pop(key, None)
        job = self.jobs.get(key)
        if job is not None:
            if not job.tasks:
                del self.jobs[key]
                self.changed_jobs.add(key)
                self.pending_jobs.discard(key)
            else:
                self._refresh_job(job)
        # the job is gone: the places it kept for restarts are not needed any more
        for pending in self.pending_reservations.values():
            for uid in [u for u, r in pending.items() if r.job == key]:
                del pending[uid]
        for q in self.quotas.values():
            if any(r.job == key for r in q.reserved):
                q.reserved = tuple(r for r in q.reserved if r.job != key)
                self.dirty_quotas.add(q.name)
                self._notify(q.name)
        self._bump()

    def _new_job(self, key: str, namespace: str) -> JobInfo:
        job = JobInfo(key=key, namespace=namespace, name=key.split("/", 1)[1])
        self.jobs[key] = job
        return job

    def _pod_tier_limit(self, task: TaskInfo) -> TierLimit | None:
        """The tier limit a pod's annotations name (task_from_api checked them already)."""
        try:
            return pod_tier_limit(task.annotations, self.opts.tier_labels)
        except ValueError:
            return None

    def _refresh_job(self, job: JobInfo) -> None:
        """Job attributes from its PodGroup (if any) and its pods."""
        self.changed_jobs.add(job.key)
        pg = self._podgroups.get(job.key)
        tasks = list(job.tasks.values())
        if pg is not None:
            job.has_podgroup = True
            job.min_member = pg.min_member
            job.queue = pg.queue
            job.priority_class = pg.priority_class
            job.labels = pg.labels
            job.created = pg.created
            job.topology_override = pg.topology_enabled
            job.strict_order = pg.strict_order
            job.affinity_key = pg.affinity_key
            job.resource_version = pg.resource_version
            pg_limit = pg.tier_limit
        else:
            job.has_podgroup = False
            job.min_member = 1
            first = tasks[0] if tasks else None
            # a lone pod's queue: its annotation, else the queue of the quota it names, else default
            named = first.annotations.get(wellknown.ANNO_QUOTA_NAME, "") if first else ""
            claimed = self.quotas.get(named) if named else None
            job.queue = (
                (first.annotations.get(wellknown.ANNO_QUEUE_NAME) if first else None)
                or (claimed.queue if claimed is not None else None)
                or self.opts.default_queue
            )
            job.labels = first.labels if first else {}
            job.created = min((t.created for t in tasks), default=0.0)
            job.topology_override = None
            job.strict_order = False
            job.affinity_key = ""
            pg_limit = None
        limit = job_tier_limit(pg_limit, (self._pod_tier_limit(t) for t in tasks if t.is_alive()))
        job.highest_tier = limit.level if limit is not None else None
        job.tier_mode = limit.mode if limit is not None else "soft"
        # pod annotations can switch topology on/off and name an affinity key
        for t in tasks:
            flag = t.annotations.get(wellknown.ANNO_ENABLE_TOPOLOGY)
            if flag in ("true", "false"):
                job.topology_override = flag == "true"
                job.strict_order = job.strict_order or flag == "true"
            key = t.annotations.get(wellknown.ANNO_TOPOLOGY_AFFINITY_KEY)
            if key:
                job.affinity_key = key
        job.podgroup_missing = pg is None and any(t.annotations.get(wellknown.ANNO_GROUP_NAME) for t in tasks)
        if any(t.is_alive() and not t.spot and not (t.node and t.status in ON_NODE) for t in tasks):
            self.pending_jobs.add(job.key)
        else:
            self.pending_jobs.discard(job.key)
        job.priority = max((t.priority for t in tasks), default=0)
        alive = [t for t in tasks if t.is_alive()]
        if tasks and all(t.status is TaskStatus.SUCCEEDED for t in tasks):
            job.phase = JobPhase.COMPLETED
        elif alive and sum(1 for t in alive if t.status is TaskStatus.RUNNING) >= job.min_member:
            job.phase = JobPhase.RUNNING
        elif any(t.quota for t in alive):
            job.phase = JobPhase.INQUEUE
        else:
            job.phase = JobPhase.PENDING

    def on_queue_add(self, obj: Obj) -> None:
        try:
            q = convert.queue_from_api(obj, self.opts)
        except (ConversionError, ValueError) as exc:
            self._error(f"Queue/{_name(obj)}", exc)
            return
        self.queues[q.name] = q
        self._queue_objs[q.name] = obj
        self._bump()

    def on_queue_update(self, old: Obj, new: Obj) -> None:
        self.on_queue_add(new)

    def on_queue_delete(self, obj: Obj) -> None:
        self.queues.pop(_name(obj), None)
        self._queue_objs.pop(_name(obj), None)
        self._bump()

    def on_jobqueue_add(self, obj: Obj) -> None:
        try:
            q = convert.jobqueue_from_api(obj, self.opts)
        except (ConversionError, ValueError) as exc:
            self._error(f"JobQueue/{_name(obj)}", exc)
            return
        self.jobqueues[q.name] = q
        self._jobqueue_objs[q.name] = obj
        self._bump()

    def on_jobqueue_update(self, old: Obj, new: Obj) -> None:
        self.on_jobqueue_add(new)

    def on_jobqueue_delete(self, obj: Obj) -> None:
        self.jobqueues.pop(_name(obj), None)
        self._jobqueue_objs.pop(_name(obj), None)
        self._bump()

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
        """A view of the cache for one session (O(1): it references the cache's objects; the
        index sets are copied when a session first reads them — most extender requests never do)."""
        return Snapshot(
            now=self.clock() if now is None else now,
            nodes=self.nodes,
            node_order=self.node_order(),
            quotas=self.quotas,
            jobs=self.jobs,
            task_job=self.task_job,
            queues=self.queues,
            jobqueues=self.jobqueues,
            zones=self.zones(),
            quotas_by_queue=self.quotas_by_queue(),
            cluster_total=self.cluster_total(),
            generation=self.generation,
            gpu_resources=self.opts.gpu_resources,
            pending_jobs=CopiedOnRead(self.pending_jobs),
            quota_touched=self.quota_touched,
            release_candidates=CopiedOnRead(self.release_candidates),
            static_quotas=CopiedOnRead(self.static_quotas),
            anti_affinity_quotas=CopiedOnRead(self.anti_affinity_quotas),
            drifted_quotas=CopiedOnRead(self.drifted),
        )

    def take_changed_jobs(self) -> set[str]:
        """The jobs marked changed since the last call (pods, PodGroup, their quotas' binding),
        and forget them: the status reconciler looks at these."""
        out, self.changed_jobs = self.changed_jobs, set()
        return out

    def take_dirty_quotas(self) -> set[str]:
        """Quotas whose derived status may differ from the API since the last call (the binder
        calls this every cycle: quotas whose status shows an expired reservation are among them)."""
        self._expire_reservations(self.clock())
        out, self.dirty_quotas = self.dirty_quotas, set()
        return {q for q in out if q in self.quotas}

    def _expire_reservations(self, now: float) -> None:
        """Expired reservations leave the status every cycle (seed 2.4 ②), also of a quota that
        nothing else changes (still claimed, or statically bound). Judged on what the status
        *shows*, so a write that raced the expiry is simply redone next cycle."""
        for name, expiry in self._reservation_expiry.items():
            if expiry <= now:
                self.dirty_quotas.add(name)
        for name, entries in list(self._inflight.items()):
            if any(e.expired(now) or e.uid in self._arrived for e in entries.values()):
                self._sync_inflight(name)
                self.dirty_quotas.add(name)  # the status still lists them: the leader removes them
        for name, pending in self.pending_reservations.items():
            gone = {uid for uid, r in pending.items() if r.expired(now)}
            if not gone:
                continue
            for uid in gone:  # expired before it was ever written
                del pending[uid]
            q = self.quotas.get(name)
            if q is not None:
                q.reserved = tuple(r for r in q.reserved if r.pod_uid not in gone)
                self._notify(name)
            self.dirty_quotas.add(name)

    def check(self) -> None:
        """Verify every node ledger and every quota's claim sum (raises on drift)."""
        for n in self.nodes.values():
            n.check()
        for q in self.quotas.values():
            total = Resource.total(c.request for c in q.claims.values())
            if total != q.allocated:
                raise ClaimError(f"quota {q.name}: allocated {q.allocated} != Σ claims {total}")
