"""``backfill`` — spot pods straight onto nodes (TN path), per pod, in the extender's filter.

Spot pods hold no quota: they fill gaps. Their candidates go through the TN bundle (node
predicates, the sylas pools) and, for prioritize, its scores (sylas prefers nodes whose GPUs no
quota holds, so that spot pods are less likely to be evicted soon). A spot pod never preempts
(``reclaim`` refuses it), so every node refused goes in ``FailedAndUnresolvableNodes``: in
``FailedNodes`` kube-scheduler would run a preemption dry run for nothing.

A spot job that requests RDMA is kept in one zone (the topology plugin's TN stage). Its pods are
bound asynchronously, so the zone a pod of it is let into before any of them is seen bound is
remembered (:func:`zone_to_remember`) and its siblings are held to that zone while it holds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from extender.actions.outcome import SPOT, FilterOutcome
from extender.framework.session import Session
from extender.framework.status import Reason, Status
from extender.model.task import TaskInfo

NAME: Final = "backfill"


def filter_spot_pod(ssn: Session, task: TaskInfo, candidates: Sequence[str]) -> FilterOutcome:
    out = FilterOutcome(path=SPOT)
    feasible = []
    for name in candidates:
        node = ssn.node(name)
        if node is None:
            out.unresolvable[name] = Status.unresolvable(Reason.NODE_NOT_FOUND, name).message()
            continue
        s = ssn.tn.predicate(task, node)
        out.put(name, s, may_preempt=False)  # spot pods never preempt (``reclaim``)
        if s.ok:
            feasible.append(node)
    if feasible and ssn.tn.has_scores:
        batch = ssn.tn.batch_node_order(task, feasible)
        for node in feasible:
            out.scores[node.name] = ssn.tn.node_order(task, node) + batch.get(node.name, 0.0)
    return out


def zone_to_remember(ssn: Session, task: TaskInfo, out: FilterOutcome) -> str:
    """A node of the zone the filter let spot pod ``task`` into, when that zone is the one its
    topology job is to start in and is not remembered yet: no pod of the job is on a node (then
    that pod's zone rules), and none of the passed nodes is the one remembered. Else ``""``."""
    if not out.passed:
        return ""
    job = ssn.job(task.job)
    if job is None or not job.topology:
        return ""
    if any(t.spot and t.node for t in job.alive_tasks()):
        return ""
    if ssn.snap.spot_zones.get(job.key) in out.passed:
        return ""
    return out.passed[0]
