"""Nodes and their two ledgers (seed 2.8).

Two ledgers per node, never mixed:

* the **pod ledger**: ``used`` (requests of tasks placed here), ``idle = allocatable − used``,
  ``releasing`` (tasks being deleted, still counted in ``used``), ``pipelined`` (tasks promised the
  space that ``releasing`` will free; not in ``used``), ``future_idle = idle + releasing − pipelined``;
* the **quota ledger**: ``quota_allocated[q]`` (request of each quota bound here) and
  ``quota_idle = allocatable − Σ quota_allocated``.

A quota is bound only where it fits ``quota_room = quota_idle − stray``: ``stray`` is what the
pods placed here take that no quota bound here accounts for — pods of quotas bound to another
node (found running here: drift, until fix_quota_binding moves their quota). So a node's live
pods plus its bound quotas never exceed its allocatable (invariant 1 holds even mid-drift).
Preemptible (spot) pods are not stray: quotas displace them.

A task that reaches its node through a quota consumes the pod ledger when it is placed; its
quota consumed the quota ledger when the quota was bound. A spot task (TN path) consumes only the
pod ledger. The two paths never count the same resource twice.

All mutation goes through the methods below, which keep every derived field exact; ``check()``
recomputes everything from scratch and raises on any drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from extender.model.resources import Resource, Shortfall
from extender.model.selectors import Taint
from extender.model.task import ON_NODE, TaskInfo, TaskStatus

__all__ = ["LedgerError", "NodeCondition", "NodeInfo", "NodeTask"]


class LedgerError(RuntimeError):
    """An operation that would make a ledger wrong (double add, remove of an absent entry, overcommit)."""


@dataclass(frozen=True, slots=True)
class NodeCondition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    heartbeat: float = 0.0  # lastHeartbeatTime, epoch seconds
    transition: float = 0.0  # lastTransitionTime, epoch seconds


@dataclass(frozen=True, slots=True)
class NodeTask:
    """What the node remembers of a task: enough to reverse its effect on the ledger exactly."""

    status: TaskStatus
    request: Resource
    job: str
    quota: str
    priority: int
    preemptible: bool
    spot_pool: str = ""
    started: float = 0.0
    priority_class: str = ""


@dataclass(slots=True)
class NodeInfo:
    name: str
    allocatable: Resource
    index: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False
    spec: str = ""  # GPU spec code ("" = none)
    zone: str = ""  # RDMA zone key ("" = no RDMA topology known)
    tiers: tuple[str, ...] = ()
    """Name of the node's unit per fabric level, ``""`` when unknown: 0 NVLink / accelerator domain,
    1 leaf (always equal to ``zone``), 2 spine, 3 core, … (:func:`extender.model.topology.node_tiers`)."""
    conditions: dict[str, NodeCondition] = field(default_factory=dict)
    ready_since: float = 0.0  # lastTransitionTime of the Ready condition
    resource_version: str = ""

    # pod ledger (start empty: tasks are added through add_task)
    used: Resource = field(init=False)
    idle: Resource = field(init=False)
    releasing: Resource = field(init=False)
    pipelined: Resource = field(init=False)
    tasks: dict[str, NodeTask] = field(init=False)
    # the pod ledger may be shared with a copy (clone): whichever edits it first copies it
    # (_own_tasks). A quota bind clones the node and edits only its quota ledger.
    _tasks_shared: bool = field(default=False, init=False, repr=False, compare=False)

    # quota ledger (starts empty: quotas are added through add_quota)
    quota_idle: Resource = field(init=False)
    quota_allocated: dict[str, Resource] = field(init=False)
    _stray: Resource | None = field(default=None, init=False, repr=False, compare=False)  # None: recompute

    def __post_init__(self) -> None:
        self._align_tiers()
        self.used = Resource.empty()
        self.idle = self.allocatable.clone()
        self.releasing = Resource.empty()
        self.pipelined = Resource.empty()
        self.tasks = {}
        self.quota_idle = self.allocatable.clone()
        self.quota_allocated = {}

    def set_allocatable(self, allocatable: Resource) -> None:
        """The device plugin changed what the node advertises: rebase both ledgers on it."""
        self.allocatable = allocatable
        self.idle = allocatable - self.used
        self.quota_idle = allocatable - Resource.total(self.quota_allocated.values())

    def _align_tiers(self) -> None:
        """``tiers[1]`` is ``zone``: a zone given alone fills it, tiers given alone give the zone."""
        if not self.zone and len(self.tiers) > 1:
            self.zone = self.tiers[1]
        elif self.zone and (len(self.tiers) < 2 or self.tiers[1] != self.zone):
            padded = (*self.tiers, "", "")[: max(2, len(self.tiers))]
            self.tiers = (padded[0], self.zone, *padded[2:])

    def tier(self, level: int) -> str:
        """The name of the node's level-``level`` unit, ``""`` when unknown."""
        return self.tiers[level] if 0 <= level < len(self.tiers) else ""

    # --- derived -----------------------------------------------------------------------------
    @property
    def future_idle(self) -> Resource:
        out = self.idle + self.releasing
        out.isub(self.pipelined)
        return out

    def schedulable(self) -> bool:
        return self.ready and not self.unschedulable

    # --- quota ledger ------------------------------------------------------------------------
    def stray(self) -> Resource:
        """Σ request of the non-preemptible pods placed here whose quota is not bound here."""
        out = self._stray
        if out is None:
            out = Resource.empty()
            for rec in self.tasks.values():
                if rec.status is TaskStatus.PIPELINED or rec.preemptible or not rec.quota:
                    continue
                if rec.quota not in self.quota_allocated:
                    out.iadd(rec.request)
            self._stray = out
        return out

    def quota_room(self) -> Resource:
        """What a quota may still be bound against: ``quota_idle − stray``."""
        stray = self.stray()
        if not stray.q:
            return self.quota_idle
        out = self.quota_idle.clone()
        out.isub(stray)
        return out

    def quota_fits(self, request: Resource) -> list[Shortfall]:
        """Why a quota of ``request`` cannot be bound here (empty list: it fits ``quota_room``)."""
        return request.shortfalls(self.quota_room())

    def takes_quota(self, name: str, request: Resource) -> bool:
        """The ledger's rule: quota ``name`` is bound here already, or ``request`` fits
        ``quota_room`` (what :meth:`add_quota` lets through without ``force``)."""
        return name in self.quota_allocated or request.less_equal_with_resource_names(self.quota_room())

    def add_quota(self, name: str, request: Resource, *, force: bool = False) -> None:
        """Bind quota ``name`` here: ``quota_idle −= request``.

        Refuses (LedgerError) when the quota is already here or does not fit, unless ``force`` —
        used only when mirroring what the API says is already true (a drifted binding).
        """
        if name in self.quota_allocated:
            raise LedgerError(f"node {self.name}: quota {name} is already bound here")
        if not force and not request.less_equal_with_resource_names(self.quota_room()):  # shortfalls' rule
            short = self.quota_fits(request)
            if short:
                room = "quota_idle less the pods of quotas bound elsewhere" if self.stray().q else "quota_idle"
                raise LedgerError(f"node {self.name}: quota {name} does not fit {room}: " + ", ".join(map(str, short)))
        self.quota_allocated[name] = request
        self.quota_idle.isub(request)
        self._quota_moved(name)

    def remove_quota(self, name: str) -> Resource:
        """Unbind quota ``name``: its request goes back to ``quota_idle``."""
        request = self.quota_allocated.pop(name, None)
        if request is None:
            raise LedgerError(f"node {self.name}: quota {name} is not bound here")
        self.quota_idle.iadd(request)
        self._quota_moved(name)
        return request

    def _quota_moved(self, name: str) -> None:
        """Quota ``name`` was bound here or unbound: of the stray pods (:meth:`stray`) only its
        own pods here can change."""
        if self._stray is not None and self.tasks and any(rec.quota == name for rec in self.tasks.values()):
            self._stray = None

    def update_quota(self, name: str, request: Resource, *, force: bool = False) -> None:
        """Change the request of a quota bound here (its spec changed)."""
        old = self.remove_quota(name)
        try:
            self.add_quota(name, request, force=force)
        except LedgerError:
            self.add_quota(name, old, force=True)
            raise

    def has_quota(self, name: str) -> bool:
        return name in self.quota_allocated

    # --- pod ledger --------------------------------------------------------------------------
    def task_fits(self, request: Resource) -> list[Shortfall]:
        """Why a task of ``request`` does not fit ``idle`` (empty list: it fits)."""
        return request.shortfalls(self.idle)

    def add_task(self, task: TaskInfo, *, force: bool = False) -> None:
        """Account for ``task`` placed here, according to its status."""
        if task.uid in self.tasks:
            raise LedgerError(f"node {self.name}: task {task.key} is already accounted here")
        self._own_tasks()
        status = task.status
        if status is TaskStatus.PIPELINED:
            self.pipelined.iadd(task.request)
        elif status in ON_NODE:
            if not force:
                short = task.request.shortfalls(self.idle)
                if short:
                    raise LedgerError(
                        f"node {self.name}: task {task.key} does not fit idle: " + ", ".join(map(str, short))
                    )
            self.idle.isub(task.request)
            self.used.iadd(task.request)
            if status is TaskStatus.RELEASING:
                self.releasing.iadd(task.request)
        else:
            raise LedgerError(f"node {self.name}: task {task.key} in status {status} is not on a node")
        self.tasks[task.uid] = NodeTask(
            status,
            task.request,
            task.job,
            task.quota,
            task.priority,
            task.preemptible,
            task.spot_pool,
            task.started,
            task.priority_class,
        )

    def remove_task(self, uid: str) -> None:
        if uid not in self.tasks:
            raise LedgerError(f"node {self.name}: task {uid} is not accounted here")
        self._own_tasks()
        rec = self.tasks.pop(uid)
        if rec.status is TaskStatus.PIPELINED:
            self.pipelined.isub(rec.request)
            return
        self.idle.iadd(rec.request)
        self.used.isub(rec.request)
        if rec.status is TaskStatus.RELEASING:
            self.releasing.isub(rec.request)

    def update_task(self, task: TaskInfo, *, force: bool = True) -> None:
        """Re-account a task whose status changed (e.g. Running → Releasing); all or nothing."""
        old = self.tasks.get(task.uid)
        self.remove_task(task.uid)
        try:
            self.add_task(task, force=force)
        except LedgerError:
            if old is not None:
                self._restore(task.uid, old)
            raise

    def _own_tasks(self) -> None:
        """Before editing the pod ledger: a copy of its own, if it is shared with a clone."""
        if self._tasks_shared:
            self.used = self.used.clone()
            self.idle = self.idle.clone()
            self.releasing = self.releasing.clone()
            self.pipelined = self.pipelined.clone()
            self.tasks = dict(self.tasks)
            self._tasks_shared = False
        self._stray = None  # every caller edits the tasks next

    def _restore(self, uid: str, rec: NodeTask) -> None:
        self._own_tasks()
        if rec.status is TaskStatus.PIPELINED:
            self.pipelined.iadd(rec.request)
        else:
            self.idle.isub(rec.request)
            self.used.iadd(rec.request)
            if rec.status is TaskStatus.RELEASING:
                self.releasing.iadd(rec.request)
        self.tasks[uid] = rec

    def has_task(self, uid: str) -> bool:
        return uid in self.tasks

    def task_status(self, uid: str) -> TaskStatus | None:
        rec = self.tasks.get(uid)
        return rec.status if rec else None

    # --- copies and checks -------------------------------------------------------------------
    def clone(self) -> NodeInfo:
        n = NodeInfo.__new__(NodeInfo)
        n.name = self.name
        n.allocatable = self.allocatable
        n.index = self.index
        n.labels = self.labels
        n.annotations = self.annotations
        n.taints = self.taints
        n.ready = self.ready
        n.unschedulable = self.unschedulable
        n.spec = self.spec
        n.zone = self.zone
        n.tiers = self.tiers  # immutable
        n.conditions = self.conditions
        n.ready_since = self.ready_since
        n.resource_version = self.resource_version
        n.used = self.used  # the pod ledger: shared until either side edits it (_own_tasks)
        n.idle = self.idle
        n.releasing = self.releasing
        n.pipelined = self.pipelined
        n.tasks = self.tasks  # records are immutable
        n._tasks_shared = self._tasks_shared = True
        n.quota_idle = self.quota_idle.clone()
        n.quota_allocated = dict(self.quota_allocated)
        n._stray = None
        return n

    def ledger_state(self) -> tuple[object, ...]:
        """Everything the ledgers hold, for field-by-field equality checks."""
        return (
            self.used,
            self.idle,
            self.releasing,
            self.pipelined,
            self.quota_idle,
            tuple(sorted((k, v) for k, v in self.quota_allocated.items())),
            tuple(sorted((uid, r.status.value, r.request) for uid, r in self.tasks.items())),
        )

    def check(self) -> None:
        """Recompute every derived ledger field from its parts; raise LedgerError on drift."""
        used = Resource.empty()
        releasing = Resource.empty()
        pipelined = Resource.empty()
        for rec in self.tasks.values():
            if rec.status is TaskStatus.PIPELINED:
                pipelined.iadd(rec.request)
            else:
                used.iadd(rec.request)
                if rec.status is TaskStatus.RELEASING:
                    releasing.iadd(rec.request)
        quota_total = Resource.total(self.quota_allocated.values())
        problems = []
        if used != self.used:
            problems.append(f"used {self.used} != Σ tasks {used}")
        if self.allocatable - used != self.idle:
            problems.append(f"idle {self.idle} != allocatable − used {self.allocatable - used}")
        if releasing != self.releasing:
            problems.append(f"releasing {self.releasing} != Σ releasing tasks {releasing}")
        if pipelined != self.pipelined:
            problems.append(f"pipelined {self.pipelined} != Σ pipelined tasks {pipelined}")
        if self.allocatable - quota_total != self.quota_idle:
            problems.append(f"quota_idle {self.quota_idle} != allocatable − Σ quotas {self.allocatable - quota_total}")
        if problems:
            raise LedgerError(f"node {self.name}: " + "; ".join(problems))
