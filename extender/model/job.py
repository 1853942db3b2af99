"""Jobs (PodGroups, or a lone pod as a job of one), queues and job queues."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from extender.model.enums import Enum
from extender.model.resources import Resource
from extender.model.selectors import LabelSelector
from extender.model.task import ALIVE, TaskInfo, TaskStatus

__all__ = ["JobInfo", "JobPhase", "JobQueueInfo", "QueueInfo", "by_precedence", "governing_jobqueue"]


class JobPhase(Enum):
    PENDING = "Pending"
    INQUEUE = "Inqueue"
    RUNNING = "Running"
    COMPLETED = "Completed"
    UNKNOWN = "Unknown"

    def __str__(self) -> str:
        return self.value


@dataclass(slots=True)
class JobInfo:
    key: str  # "namespace/name"
    namespace: str
    name: str
    queue: str = ""
    min_member: int = 1
    priority: int = 0
    priority_class: str = ""
    has_podgroup: bool = False  # False: a lone pod, a job of one
    podgroup_missing: bool = False  # pods name a group whose PodGroup does not exist (yet)
    labels: dict[str, str] = field(default_factory=dict)
    created: float = 0.0
    topology_override: bool | None = None  # None: automatic (on when a task requests rdma/*)
    strict_order: bool = False  # node index must ascend with task index
    affinity_key: str = ""  # topology-affinity-key: jobs sharing it gather in one zone
    # highestTierAllowed (0 NVLink domain, 1 leaf, 2 spine, 3 core …): None = no limit
    highest_tier: int | None = None
    tier_mode: str = "soft"  # "hard": never place above highest_tier; "soft": prefer it, fall back upward
    phase: JobPhase = JobPhase.PENDING
    resource_version: str = ""
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    # tasks that finished (pod uid → Succeeded / Failed): finished pods leave the cache, the
    # PodGroup's status still counts them
    finished: dict[str, TaskStatus] = field(default_factory=dict)
    # needs_rdma, worked out on first read and forgotten when a task is added or removed (the
    # binder reads it several times per job and cycle): change tasks through add_task/remove_task
    _rdma: bool | None = field(default=None, repr=False, compare=False)

    # --- topology ----------------------------------------------------------------------------
    @property
    def needs_rdma(self) -> bool:
        rdma = self._rdma
        if rdma is None:
            rdma = self._rdma = any(t.rdma for t in self.tasks.values())
        return rdma

    @property
    def topology(self) -> bool:
        """Topology scheduling on: requested explicitly, or automatically by an rdma/* request."""
        if self.topology_override is not None:
            return self.topology_override
        return self.needs_rdma

    @property
    def tier_hard(self) -> bool:
        """A hard tier limit: the job is never placed above :attr:`highest_tier` (it waits)."""
        return self.hard_tier is not None

    @property
    def hard_tier(self) -> int | None:
        """The tier a hard limit keeps the job within (0: one NVLink domain, 1: one leaf, …);
        None: no hard limit."""
        return self.highest_tier if self.tier_mode == "hard" else None

    # --- tasks -------------------------------------------------------------------------------
    def add_task(self, task: TaskInfo) -> None:
        self.tasks[task.uid] = task
        self._rdma = None

    def remove_task(self, uid: str) -> TaskInfo | None:
        self._rdma = None
        return self.tasks.pop(uid, None)

    def alive_tasks(self) -> list[TaskInfo]:
        return [t for t in self.tasks.values() if t.status in ALIVE]

    def tasks_in(self, *statuses: TaskStatus) -> list[TaskInfo]:
        wanted = frozenset(statuses)
        return [t for t in self.tasks.values() if t.status in wanted]

    def ordered_tasks(self) -> list[TaskInfo]:
        """Alive tasks by task index (tasks without an index last, by name)."""
        return sorted(
            self.alive_tasks(),
            key=lambda t: (t.index is None, t.index if t.index is not None else 0, t.name),
        )

    def request(self) -> Resource:
        return Resource.total(t.request for t in self.alive_tasks())

    def is_single(self) -> bool:
        return not self.has_podgroup and len(self.tasks) <= 1

    def clone(self) -> JobInfo:
        j = JobInfo.__new__(JobInfo)
        j.key = self.key
        j.namespace = self.namespace
        j.name = self.name
        j.queue = self.queue
        j.min_member = self.min_member
        j.priority = self.priority
        j.priority_class = self.priority_class
        j.has_podgroup = self.has_podgroup
        j.podgroup_missing = self.podgroup_missing
        j.labels = self.labels
        j.created = self.created
        j.topology_override = self.topology_override
        j.strict_order = self.strict_order
        j.affinity_key = self.affinity_key
        j.highest_tier = self.highest_tier
        j.tier_mode = self.tier_mode
        j.phase = self.phase
        j.resource_version = self.resource_version
        j.tasks = {uid: t.clone() for uid, t in self.tasks.items()}
        j.finished = self.finished
        j._rdma = self._rdma
        return j


@dataclass(slots=True)
class QueueInfo:
    name: str
    weight: int = 1
    capability: Resource | None = None  # None: unlimited
    reclaimable: bool = True
    open: bool = True
    resource_version: str = ""


@dataclass(slots=True)
class JobQueueInfo:
    """A priority sub-queue selecting jobs by label; closed or full means its jobs wait."""

    name: str
    selector: LabelSelector
    namespaces: tuple[str, ...] = ()
    priority: int = 0
    open: bool = True
    max_running: int | None = None
    resource_version: str = ""

    def selects(self, job: JobInfo) -> bool:
        if self.namespaces and job.namespace not in self.namespaces:
            return False
        return self.selector.matches(job.labels)


def by_precedence(jobqueues: Iterable[JobQueueInfo]) -> list[JobQueueInfo]:
    """JobQueues in the order that decides which governs a job: highest priority first, ties by
    name."""
    return sorted(jobqueues, key=lambda q: (-q.priority, q.name))


def governing_jobqueue(job: JobInfo, ordered: Iterable[JobQueueInfo]) -> JobQueueInfo | None:
    """The JobQueue that governs ``job``: the first of ``ordered`` (:func:`by_precedence`) that
    selects it (None: none does)."""
    return next((q for q in ordered if q.selects(job)), None)
