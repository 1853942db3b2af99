"""Who may go when a pod preempts on a node: one rule for the filter and ``reclaim``.

The filter tells kube-scheduler a quota pod's node is resolvable by preemption
(``LowerPriorityPodsUseNode``) and kube-scheduler then runs a preemption whose victims reclaim
chooses; both must agree on the pods that may be evicted, or kube-scheduler runs a preemption
reclaim refuses (a wasted round each cycle, and a reason promising evictions that never come).

* :func:`eligible` — what the seed and Kubernetes allow whatever the policy says: spot
  (``preemptible``) pods on the node in kube-scheduler's eyes, of strictly lower priority than
  the preemptor, not already being preempted;
* :func:`may_go` — those, narrowed by the policy's ``job.victims`` stage (conformance keeps
  critical pods; a stage no enabled plugin implements narrows nothing).
"""

from __future__ import annotations

from typing import Final

from extender.framework.session import Session
from extender.model.node import NodeInfo
from extender.model.task import TaskInfo, TaskStatus

__all__ = ["eligible", "may_go"]

ON_NODE_FOR_KUBE: Final = frozenset({TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.RELEASING})
"""Statuses of a pod kube-scheduler has on its node: bound, assumed for a bind, or terminating
(not ``ALLOCATED`` or ``PIPELINED``: placed only in a session)."""


def eligible(ssn: Session, preemptor: TaskInfo, node: NodeInfo) -> list[TaskInfo]:
    """The pods of ``node`` that may be evicted for ``preemptor`` at all, before the policy
    narrows them: spot (``preemptible``) pods on the node in kube-scheduler's eyes too (bound,
    binding, running or terminating: it looks the answered UIDs up among the pods of that node),
    of strictly lower priority than the preemptor; none for a preemptor that never preempts
    (``preemptionPolicy: Never``: kube-scheduler runs no preemption for it). A policy may keep
    more pods (``job.victims``), never add any: kube-scheduler deletes whatever UIDs of the node
    the extender answers.

    Not a pod a preemption is already deleting (``preempted``): its room is promised to the pod
    that preempted it (nominated there), and answering it again would nominate a second pod onto
    the same room — which then needs another preemption round once the first has taken it.
    kube-scheduler's own dry run counts that nominated pod, so it would evict another. A pod
    terminating for another reason frees room for anyone: it stays a candidate."""
    if not preemptor.preempts:
        return []
    return [
        t
        for t in map(ssn.task, node.tasks)
        if t is not None
        and t.node == node.name
        and t.status in ON_NODE_FOR_KUBE
        and t.preemptible
        and not t.preempted
        and t.priority < preemptor.priority
    ]


def may_go(ssn: Session, preemptor: TaskInfo, node: NodeInfo) -> list[TaskInfo]:
    """:func:`eligible` narrowed by the policy's ``job.victims`` stage: the pods of ``node`` a
    preemption for ``preemptor`` may evict, in the node's order."""
    candidates = eligible(ssn, preemptor, node)
    if not candidates:
        return candidates
    allowed = ssn.stages.victims(preemptor, candidates)
    if allowed is None:
        return candidates
    narrowed = set(allowed)
    return [t for t in candidates if t.uid in narrowed]
