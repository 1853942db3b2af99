"""Snapshot and Session (seed 四; Volcano's framework without its repetition).

A :class:`Snapshot` is the cache's view at one instant: it *references* the cache's objects, so
taking one costs O(1). A :class:`Session` reads through it and keeps a copy-on-write overlay:
the first time a statement changes a node, quota or job, that object is cloned into the session
and only the clone changes. The cache is therefore never touched by scheduling; the session is
thrown away at the end of the cycle, and only the intents it committed reach the API writer.

A session must not live across an ``await`` (the cache changes between awaits); everything a
session does is synchronous.

:class:`~extender.framework.statement.Statement` (its own module) is the only way to change
session state; :meth:`Session.statement` opens one.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from extender import wellknown
from extender.framework.intents import Intent
from extender.framework.policy import Policy
from extender.framework.stages import BUNDLE_STAGES, BUNDLES, EVENT_HOOK, JOB_STAGES, BoundBundle, BoundStages, neutral
from extender.framework.statement import Event, EventKind, Statement, StatementError
from extender.framework.status import Status
from extender.model.job import JobInfo, JobQueueInfo, QueueInfo
from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo, claimant_order
from extender.model.resources import Resource
from extender.model.task import ALIVE, TaskInfo

__all__ = ["Event", "EventKind", "FitStage", "Session", "Snapshot", "Statement", "StatementError"]


@dataclass(slots=True)
class Snapshot:
    """The cache at one instant. Mappings are the cache's own: never mutate through them."""

    now: float
    nodes: Mapping[str, NodeInfo]
    node_order: Sequence[str]  # all node names by (index, name): the rank-ordered node index
    quotas: Mapping[str, QuotaInfo]
    jobs: Mapping[str, JobInfo]
    task_job: Mapping[str, str]  # task uid → job key
    queues: Mapping[str, QueueInfo] = field(default_factory=dict)
    jobqueues: Mapping[str, JobQueueInfo] = field(default_factory=dict)
    zones: Mapping[tuple[str, str], Sequence[str]] = field(default_factory=dict)
    """(GPU spec, zone key) → node names in index order: the identical-spec zones."""
    quotas_by_queue: Mapping[str, Sequence[str]] = field(default_factory=dict)
    backoff: Mapping[str, float] = field(default_factory=dict)  # job key → not before (epoch s)
    stuck_cycles: Mapping[str, int] = field(default_factory=dict)  # job key → consecutive stuck cycles
    release_count: Mapping[str, int] = field(default_factory=dict)  # job key → times its quotas were released
    last_fix: float = 0.0  # when fix_quota_binding last ran
    holds: Mapping[str, Any] = field(default_factory=dict)  # job key → topology.holds.Hold (kept by the scheduler)
    spot_zones: Mapping[str, str] = field(default_factory=dict)
    """Job key → a node the extender let the first spot pod of that (topology) job through to, before
    any of its pods was seen bound: kube-scheduler binds asynchronously, so the job's siblings are
    filtered before the first bind is heard (kept by the extender, ``ServiceState.remember_spot_zone``)."""
    gang_waits: Mapping[str, int] = field(default_factory=dict)  # job key → cycles its gang plan failed in a row
    # indices that keep an idle cycle cheap (None: unknown, look at everything)
    pending_jobs: Collection[str] | None = None  # jobs with an alive non-spot task not on a node
    quota_touched: Mapping[str, int] = field(default_factory=dict)  # quota → generation of last change
    changed_quotas: Collection[str] | None = None  # touched since the previous cycle (set by the scheduler)
    release_candidates: Collection[str] | None = None  # bound, non-static, unclaimed or node gone
    static_quotas: Collection[str] | None = None  # quotas with spec.staticBindNode
    anti_affinity_quotas: Collection[str] | None = None  # quotas that declare quota anti-affinity
    drifted_quotas: Collection[str] = ()  # quotas with a pod placed on another node than theirs
    cluster_total: Resource = field(default_factory=Resource.empty)  # Σ allocatable of all nodes
    generation: int = 0  # bumps whenever the cache changes; equal generations = same state
    gpu_resources: tuple[str, ...] = wellknown.DEFAULT_GPU_RESOURCES  # the configured GPU resources
    spot_resource: str = wellknown.RESOURCE_SPOT_GPU  # the resource whose request marks a spot pod


class FitStage(enum.IntEnum):
    """The FitAction ladder of /diagnose: the first stage that stops a job."""

    JOB_QUEUE = 1
    QUOTA_ASSIGNMENT = 2
    GANG = 3
    ZONE_SELECTION = 4
    NODE_PREDICATES = 5
    BIND = 6

    @property
    def label(self) -> str:
        """The rung's name as /diagnose, PodGroup conditions and Events spell it (``ZoneSelection``)."""
        return "".join(part.capitalize() for part in self.name.split("_"))


@dataclass(slots=True)
class JobVerdict:
    """Why a job did not (fully) progress this cycle, as one rung of the ladder."""

    stage: FitStage
    status: Status
    per_node: Mapping[str, Status] | None = None
    quota: str = ""
    elsewhere: Status | None = None  # what the nodes not in per_node wait for (None: the status)


class Session:
    def __init__(self, snap: Snapshot, policy: Policy) -> None:
        self.snap = snap
        self.now = snap.now
        self.policy = policy
        self.gpu_resources: tuple[str, ...] = snap.gpu_resources
        """The extended resources that count as GPUs (``--gpu-resources``), for plugins that weigh GPUs."""
        self.spot_resource: str = snap.spot_resource
        """The resource whose request marks a spot pod (``--spot-resource``): what its spot pool lends."""
        # the snapshot's maps under the overlay (read on every lookup: one attribute, not two)
        self._base_nodes, self._base_quotas, self._base_jobs = snap.nodes, snap.quotas, snap.jobs
        self._nodes: dict[str, NodeInfo] = {}
        self._quotas: dict[str, QuotaInfo] = {}
        self._jobs: dict[str, JobInfo] = {}
        # event kind → the handlers that follow it (a plugin's EVENT_KINDS, else every kind)
        self._handlers: dict[EventKind, list[Callable[[Event], None]]] = {k: [] for k in EventKind}
        self.intents: list[Intent] = []
        self.verdicts: dict[str, JobVerdict] = {}
        self.notes: dict[str, Any] = {}  # per-action outputs for the caller (metrics, back-off)
        self._by_index: dict[int, str] | None = None
        self._claim_order: dict[str, tuple[str, ...]] = {}  # quota → claimant uids in index order
        self._claimant_keys: dict[str, tuple[tuple[object, ...], ...]] = {}  # quota → their placement keys
        self._anti_holders: list[str] | None = None
        # job → the names of the quotas its alive tasks claim, rank order (dropped when one of its
        # tasks changes in a statement, or the claims of one of those quotas change)
        self._job_quota_names: dict[str, tuple[str, ...]] = {}

        # Plugins are opened, and stages bound, on first use: an extender request that only
        # re-checks one node opens the few plugins its stages name, not the whole policy.
        self._opened: dict[str, Mapping[str, Callable[..., Any]]] = {}
        self._events_ready = False

        def bundle(b: str) -> BoundBundle:
            scoring = bool(policy.stages[f"{b}.node_order"].participants) or bool(
                policy.stages[f"{b}.batch_node_order"].participants
            )
            best = policy.stages[f"{b}.best_n"].participants
            first = policy.plugins.get(best[0]) if best else None
            ranked = bool(getattr(type(first), "RANK_ORDERED_BEST_N", False))
            return BoundBundle(b, lambda s: self._bind_stage(f"{b}.{s}"), has_scores=scoring, rank_ordered=ranked)

        self.tq, self.qn, self.tn = (bundle(b) for b in BUNDLES)
        self.stages = BoundStages(lambda s: self._bind_stage(f"job.{s}"))

    def _plugin_fns(self, name: str) -> Mapping[str, Callable[..., Any]]:
        fns = self._opened.get(name)
        if fns is None:
            plugin = self.policy.plugins[name]
            fns = plugin.open(self)
            declared = plugin.STAGES
            if set(fns) != set(declared):
                raise StatementError(f"plugin {name} returned stages {sorted(fns)} but declares {sorted(declared)}")
            self._opened[name] = fns
            hook = fns.get(EVENT_HOOK)
            if hook is not None:
                kinds: Iterable[EventKind] = getattr(plugin, "EVENT_KINDS", None) or EventKind
                for kind in kinds:
                    self._handlers[kind].append(hook)
        return fns

    def _bind_stage(self, stage: str) -> Callable[..., Any]:
        if stage.split(".", 1)[1] not in (BUNDLE_STAGES if not stage.startswith("job.") else JOB_STAGES):
            raise AttributeError(f"no stage {stage!r}")
        compiled = self.policy.stages[stage]
        if compiled.binder is None:
            return neutral(compiled.kind)
        return compiled.binder({p: self._plugin_fns(p)[stage] for p in compiled.participants})

    def _follow_events(self) -> None:
        """Open every plugin that follows statement events before the first operation, so that
        no tracker misses one."""
        if not self._events_ready:
            self._events_ready = True
            for name, plugin in self.policy.plugins.items():
                if EVENT_HOOK in plugin.STAGES:
                    self._plugin_fns(name)

    # --- reading (overlay first, then the snapshot) ------------------------------------------
    def node(self, name: str) -> NodeInfo | None:
        n = self._nodes.get(name)
        return n if n is not None else self._base_nodes.get(name)

    def nodes(self) -> Iterator[NodeInfo]:
        """Every node in rank order (node index ascending)."""
        over, base = self._nodes, self.snap.nodes
        for name in self.snap.node_order:
            n = over.get(name)
            yield n if n is not None else base[name]

    def node_by_index(self, index: int) -> NodeInfo | None:
        """The node with this node index (the first by name if an index is used twice)."""
        if self._by_index is None:
            self._by_index = {}
            for n in self.nodes():
                self._by_index.setdefault(n.index, n.name)
        name = self._by_index.get(index)
        return None if name is None else self.node(name)

    def quota(self, name: str) -> QuotaInfo | None:
        q = self._quotas.get(name)
        return q if q is not None else self._base_quotas.get(name)

    def quotas(self) -> Iterator[QuotaInfo]:
        over = self._quotas
        for name, q in self.snap.quotas.items():
            o = over.get(name)
            yield o if o is not None else q

    def quotas_of_queue(self, queue: str) -> Iterator[QuotaInfo]:
        for name in self.snap.quotas_by_queue.get(queue, ()):
            q = self.quota(name)
            if q is not None:
                yield q

    def job(self, key: str) -> JobInfo | None:
        j = self._jobs.get(key)
        return j if j is not None else self._base_jobs.get(key)

    def jobs(self) -> Iterator[JobInfo]:
        over = self._jobs
        for key, j in self.snap.jobs.items():
            o = over.get(key)
            yield o if o is not None else j

    def pending_jobs(self) -> Iterator[JobInfo]:
        """Jobs that may have work: an alive non-spot task not on a node (all jobs if unknown)."""
        keys = self.snap.pending_jobs
        if keys is None:
            yield from self.jobs()
            return
        for key in sorted(keys):
            job = self.job(key)
            if job is not None:
                yield job

    def task(self, uid: str) -> TaskInfo | None:
        key = self.snap.task_job.get(uid)
        if key is None:
            return None
        job = self._jobs.get(key)
        if job is None:
            job = self._base_jobs.get(key)
        return None if job is None else job.tasks.get(uid)

    def claimants(self, quota: QuotaInfo) -> Iterator[TaskInfo]:
        """The tasks claiming ``quota``, in task-index order."""
        order = self._claim_order.get(quota.name)
        if order is None:
            if len(quota.claims) <= 1:
                order = tuple(quota.claims)  # keyed by task uid
            else:
                claims = sorted(quota.claims.values(), key=claimant_order)
                order = tuple(c.uid for c in claims)
            self._claim_order[quota.name] = order
        for uid in order:
            t = self.task(uid)
            if t is not None:
                yield t

    def anti_affinity_holders(self) -> list[str]:
        """Quotas that declare quota anti-affinity (few in practice), by name, found once per
        session: they repel the quotas their terms match, by name or by label, from the nodes
        they hold."""
        if self._anti_holders is None:
            held = self._with_spec(self.snap.anti_affinity_quotas, lambda q: bool(q.quota_anti_affinity))
            self._anti_holders = [q.name for q in held]
        return self._anti_holders

    def static_quotas(self) -> list[QuotaInfo]:
        """Quotas with ``spec.staticBindNode``, by name (the session's current copies)."""
        return self._with_spec(self.snap.static_quotas, lambda q: bool(q.static_bind_node))

    def _with_spec(self, index: Collection[str] | None, has: Callable[[QuotaInfo], bool]) -> list[QuotaInfo]:
        """The quotas whose spec ``has`` a trait, by name: read from the cache's index of them
        when the snapshot carries one (a session never changes a spec), else found by a scan."""
        if index is None:
            return sorted((q for q in self.quotas() if has(q)), key=lambda q: q.name)
        found = (self.quota(name) for name in sorted(index))
        return [q for q in found if q is not None and has(q)]

    def claimant_keys(self, quota: QuotaInfo) -> tuple[tuple[object, ...], ...]:
        """The placement keys (:meth:`TaskInfo.placement_key`) of the quota's claimants, in
        task-index order: what node filters read of its pods. The quota keeps them as claims
        come and go (a claim carries its pod's key); found through the tasks otherwise."""
        keys = quota.claimant_keys
        if keys is not None:
            return keys
        keys = self._claimant_keys.get(quota.name)
        if keys is None:
            keys = self._claimant_keys[quota.name] = tuple(t.placement_key() for t in self.claimants(quota))
        return keys

    def filter_key(self, quota: QuotaInfo) -> tuple[object, ...]:
        """What node filters read of a quota and of its pods: its placement key and its
        claimants'. Quotas with equal keys pass or fail the same nodes — except under quota
        (anti-)affinity, which reads names and labels (the caller's to consider)."""
        return (quota.placement_key(), self.claimant_keys(quota))

    def job_quotas(self, job: JobInfo) -> list[QuotaInfo]:
        """The quotas a job's alive tasks claim, in rank order (smallest task index first)."""
        over, base = self._quotas, self._base_quotas
        out = []
        for name in self.job_quota_names(job):
            q = over.get(name)
            if q is None:
                q = base.get(name)
            if q is not None:
                out.append(q)
        return out

    def job_quota_names(self, job: JobInfo) -> tuple[str, ...]:
        """The names of :meth:`job_quotas`, as the session's copy of the job has them now."""
        names = self._job_quota_names.get(job.key)
        if names is None:
            current = self.job(job.key) or job
            over, base = self._quotas, self._base_quotas
            ranked = []
            for name in {t.quota for t in current.tasks.values() if t.quota and t.status in ALIVE}:
                q = over.get(name)
                if q is None:
                    q = base.get(name)
                if q is not None:
                    idx = q.rank
                    ranked.append((idx is None, idx or 0, name))
            ranked.sort()
            names = self._job_quota_names[job.key] = tuple(r[2] for r in ranked)
        return names

    def _claims_changed(self, quota: str) -> None:
        self._claim_order.pop(quota, None)
        self._claimant_keys.pop(quota, None)
        q = self.quota(quota)
        for c in q.claims.values() if q is not None else ():
            self._job_quota_names.pop(c.job, None)  # the quota's rank within them may have moved

    def zone_nodes(self, spec: str, zone: str) -> Sequence[str]:
        return self.snap.zones.get((spec, zone), ())

    # --- copy-on-write (Statement only) ------------------------------------------------------
    def _mut_node(self, name: str) -> NodeInfo:
        n = self._nodes.get(name)
        if n is None:
            base = self.snap.nodes.get(name)
            if base is None:
                raise StatementError(f"node {name} does not exist")
            n = self._nodes[name] = base.clone()
        return n

    def _mut_quota(self, name: str) -> QuotaInfo:
        q = self._quotas.get(name)
        if q is None:
            base = self.snap.quotas.get(name)
            if base is None:
                raise StatementError(f"quota {name} does not exist")
            q = self._quotas[name] = base.clone()
        return q

    def _mut_job(self, key: str) -> JobInfo:
        j = self._jobs.get(key)
        if j is None:
            base = self.snap.jobs.get(key)
            if base is None:
                raise StatementError(f"job {key} does not exist")
            j = self._jobs[key] = base.clone()
        return j

    def _mut_task(self, uid: str) -> TaskInfo:
        key = self.snap.task_job.get(uid)
        if key is None:
            raise StatementError(f"task {uid} does not exist")
        task = self._mut_job(key).tasks.get(uid)
        if task is None:
            raise StatementError(f"task {uid} is not in job {key}")
        self._job_quota_names.pop(key, None)  # its claim or its liveness is about to change
        return task

    def _fire(self, event: Event) -> None:
        for h in self._handlers[event.kind]:
            h(event)

    # --- results -----------------------------------------------------------------------------
    def statement(self) -> Statement:
        self._follow_events()
        return Statement(self)

    def verdict(self, job: str, stage: FitStage, status: Status, **kw: Any) -> None:
        """Record why ``job`` stopped at ``stage`` (the lowest rung recorded wins)."""
        prev = self.verdicts.get(job)
        if prev is None or stage <= prev.stage:
            self.verdicts[job] = JobVerdict(stage, status, **kw)

    def touched_quotas(self) -> Mapping[str, QuotaInfo]:
        return self._quotas

    def touched_jobs(self) -> Mapping[str, JobInfo]:
        return self._jobs

    def touched_nodes(self) -> Mapping[str, NodeInfo]:
        return self._nodes
