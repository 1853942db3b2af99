"""Tasks (pods) and the seed's task state machine (2.5).

::

    Pending ──► AllocatedToQuota ──► Allocated ──► Binding ──► Bound ──► Running
       │  (claimed a quota,          (placed on     (Binding    (spec.nodeName)
       │   quota maybe unbound)       a node)        in flight)
       └──► Allocated (spot / TN path: straight to a node)       Running ──► Succeeded | Failed
                                                    Bound/Running ──► Releasing (being deleted)

``AllocatedToQuota`` is the two-hop invention: the task holds a logical share but no place yet.
Only in-session operations move a task along this machine (:meth:`TaskInfo.transition`); the
cache builds tasks directly in the state the API shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from extender.model.enums import Enum
from extender.model.resources import Resource
from extender.model.selectors import NodeAffinity, Toleration, map_key
from extender.wellknown import ANNO_GROUP_NAME, ANNO_REQUIRED_QUOTA

__all__ = ["IllegalTransition", "TaskInfo", "TaskStatus", "group_name", "job_key"]


class TaskStatus(Enum):
    PENDING = "Pending"
    ALLOCATED_TO_QUOTA = "AllocatedToQuota"
    ALLOCATED = "Allocated"
    PIPELINED = "Pipelined"
    BINDING = "Binding"
    BOUND = "Bound"
    RUNNING = "Running"
    RELEASING = "Releasing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    def __str__(self) -> str:
        return self.value


S = TaskStatus

_TRANSITIONS: dict[TaskStatus, frozenset[TaskStatus]] = {
    S.PENDING: frozenset({S.ALLOCATED_TO_QUOTA, S.ALLOCATED, S.PIPELINED}),
    S.ALLOCATED_TO_QUOTA: frozenset({S.PENDING, S.ALLOCATED, S.PIPELINED}),
    S.ALLOCATED: frozenset({S.PENDING, S.ALLOCATED_TO_QUOTA, S.BINDING}),
    S.PIPELINED: frozenset({S.PENDING, S.ALLOCATED_TO_QUOTA, S.ALLOCATED}),
    S.BINDING: frozenset({S.BOUND, S.PENDING, S.ALLOCATED_TO_QUOTA}),
    S.BOUND: frozenset({S.RUNNING, S.RELEASING, S.SUCCEEDED, S.FAILED}),
    S.RUNNING: frozenset({S.RELEASING, S.SUCCEEDED, S.FAILED}),
    S.RELEASING: frozenset({S.RUNNING, S.BOUND}),  # an eviction may be undone by discard()
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
}

ON_NODE: frozenset[TaskStatus] = frozenset({S.ALLOCATED, S.BINDING, S.BOUND, S.RUNNING, S.RELEASING})
"""Statuses whose request counts in the node's ``used`` ledger (``PIPELINED`` counts in ``pipelined``)."""

ALIVE: frozenset[TaskStatus] = frozenset(set(S) - {S.SUCCEEDED, S.FAILED})


class IllegalTransition(RuntimeError):
    """A task was asked to move along an edge the state machine does not have."""


def job_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def group_name(annotations: Mapping[str, str], labels: Mapping[str, str]) -> str:
    """The PodGroup a pod names: ``scheduling.k8s.io/group-name``, as an annotation (Volcano's
    way) or else a label; "" when it names none."""
    return str(annotations.get(ANNO_GROUP_NAME) or labels.get(ANNO_GROUP_NAME) or "")


@dataclass(slots=True)
class TaskInfo:
    """One pod, as the scheduler sees it."""

    uid: str
    namespace: str
    name: str
    job: str  # job key "namespace/name"
    request: Resource
    status: TaskStatus = S.PENDING
    index: int | None = None  # task index (rank) within the job
    quota: str = ""  # claimed quota (annotation quota-name), "" when none
    node: str = ""  # node the task is placed on (spec.nodeName, or the session's allocation)
    priority: int = 0
    priority_class: str = ""
    created: float = 0.0  # creationTimestamp, seconds since the epoch
    started: float = 0.0  # status.startTime, seconds since the epoch (0: not started)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    node_affinity: NodeAffinity | None = None
    spec: str = ""  # GPU spec the task asks for through its nodeSelector ("" = any)
    spot: bool = False  # requests the spot resource: TN path, no quota
    spot_pool: str = ""  # "shared" | "exclusive" for spot tasks
    rdma: bool = False  # requests an rdma/* resource: topology scheduling
    mount_points: tuple[str, ...] = ()  # required mount points (storage plugin)
    inherit_from: str = ""  # pod name whose reservation this task may inherit
    scheduler_name: str = ""
    resource_version: str = ""
    preemptible: bool = False  # a spot pod that reclaim may evict
    preempts: bool = True
    """kube-scheduler runs a preemption for it when it does not fit (``spec.preemptionPolicy`` is
    not ``Never``, which the pod gets from its PriorityClass)."""
    preempted: bool = False
    """Terminating because kube-scheduler preempted it (condition DisruptionTarget, reason
    PreemptionByScheduler): its room is promised to its preemptor, it is no victim for another."""
    # what node filters read of the pod, built on first use (those fields never change once built)
    _placement_key: tuple[object, ...] | None = field(default=None, repr=False, compare=False)

    def transition(self, to: TaskStatus) -> None:
        if to is self.status:
            return
        if to not in _TRANSITIONS[self.status]:
            raise IllegalTransition(f"task {self.namespace}/{self.name}: {self.status} → {to} is not allowed")
        self.status = to

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def clone(self) -> TaskInfo:
        return TaskInfo(
            uid=self.uid,
            namespace=self.namespace,
            name=self.name,
            job=self.job,
            request=self.request,  # treated as immutable once built
            status=self.status,
            index=self.index,
            quota=self.quota,
            node=self.node,
            priority=self.priority,
            priority_class=self.priority_class,
            created=self.created,
            started=self.started,
            labels=self.labels,
            annotations=self.annotations,
            node_selector=self.node_selector,
            tolerations=self.tolerations,
            node_affinity=self.node_affinity,
            spec=self.spec,
            spot=self.spot,
            spot_pool=self.spot_pool,
            rdma=self.rdma,
            mount_points=self.mount_points,
            inherit_from=self.inherit_from,
            scheduler_name=self.scheduler_name,
            resource_version=self.resource_version,
            preemptible=self.preemptible,
            preempts=self.preempts,
            preempted=self.preempted,
            _placement_key=self._placement_key,
        )

    def is_alive(self) -> bool:
        return self.status in ALIVE

    @property
    def names_group(self) -> bool:
        """The pod names the PodGroup it belongs to (:func:`group_name`)."""
        return bool(group_name(self.annotations, self.labels))

    @property
    def required_quota(self) -> str:
        """The quota the pod's creator named (annotation ``required-quota``): the only one it may get."""
        return self.annotations.get(ANNO_REQUIRED_QUOTA, "")

    def placement_key(self) -> tuple[object, ...]:
        """A hashable key of what node filters and scores read of this pod: tolerations, node
        selector, node affinity, mount points, and its priority and whether it preempts (which
        spot pods may go for it, which the eviction-cost score prices). Pods with equal keys pass
        or fail, and score, the same nodes."""
        key = self._placement_key
        if key is None:
            key = self._placement_key = (
                self.tolerations,
                map_key(self.node_selector),
                self.node_affinity,
                self.mount_points,
                self.priority,
                self.preempts,
            )
        return key
