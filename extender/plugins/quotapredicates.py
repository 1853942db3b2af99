"""``quotapredicates``: the quota checks of each hop.

* TQ (task → quota): the quota serves the task's queue; the task fits what the quota has left
  (``request + shadow − claims − live reservations for other tasks``); a bound quota's node can
  still run it (ready, its nodeSelector).
* QN (quota → node): ``select`` the quota's nodeSelector against the node's labels, and a quota
  with ``spec.staticBindNode`` only that node (pinned by ``allocate_quota``; a gang plan that
  reaches it first must put it there too); ``predicate``
  ``quota.request ≤ node.quota_idle`` per resource name (a name the node does not advertise
  fails) — the place where the logical quota meets the device plugin's numbers.
* TN (task → node), for a task holding a quota: only the quota's node, and the task fits its
  ``idle``; when evicting the pods reclaim may evict (:func:`extender.framework.victims.may_go`,
  the one rule for who may go) would make room, the failure is resolvable by preemption.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from extender.framework.plugin import NoArgs
from extender.framework.session import Session
from extender.framework.status import SKIP, SUCCESS, Reason, Status
from extender.framework.victims import may_go
from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo
from extender.model.resources import Resource
from extender.model.task import TaskInfo

NAME: Final = "quotapredicates"
Args = NoArgs


def fits_detail(shortfalls: list[Any]) -> str:
    return ", ".join(str(s) for s in shortfalls)


def tn_quota_task(ssn: Session, task: TaskInfo, node: NodeInfo) -> Status:
    """The hop-③ re-check for a task holding a quota (also used by the extender's filter)."""
    quota = ssn.quota(task.quota)
    if quota is None:
        return Status.unresolvable(Reason.QUOTA_NOT_FOUND, task.quota)
    if not quota.node_name:
        return Status.unresolvable(Reason.QUOTA_NOT_BOUND, quota.name)
    if quota.node_name != node.name:
        return Status.unresolvable(Reason.QUOTA_BOUND_ELSEWHERE, f"quota {quota.name} is bound to {quota.node_name}")
    if node.has_task(task.uid):
        return SUCCESS  # already accounted here (a retried bind)
    short = task.request.shortfalls(node.idle)
    if not short:
        return SUCCESS
    # Would evicting the pods reclaim may evict make room? Then preemption can help.
    freeable = node.idle.clone()
    for victim in may_go(ssn, task, node):
        freeable.iadd(victim.request)
    if not task.request.shortfalls(freeable):
        return Status.unschedulable(Reason.LOWER_PRIORITY_PODS_USE_NODE, fits_detail(short))
    return Status.unresolvable(Reason.INSUFFICIENT_IDLE, fits_detail(short))


class Plugin:
    NAME: Final = NAME
    Args = Args
    STAGES: Final = frozenset({"tq.select", "tq.predicate", "qn.select", "qn.predicate", "tn.predicate"})

    def __init__(self, args: NoArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        def job_queue(task: TaskInfo) -> str:
            job = ssn.job(task.job)
            return job.queue if job is not None else ""

        def select_tq(task: TaskInfo, quota: QuotaInfo) -> Status:
            queue = job_queue(task)
            if not quota.serves_queue(queue):
                return Status.unresolvable(
                    Reason.QUOTA_QUEUE_MISMATCH,
                    f"quota {quota.name} serves queue {quota.queue}, not {queue or '(none)'}",
                )
            return SUCCESS

        def predicate_tq(task: TaskInfo, quota: QuotaInfo) -> Status:
            if task.uid in quota.claims:
                return SUCCESS
            short = quota.claim_shortfalls(task.request, task=task, now=ssn.now)
            if short:
                held = any(not r.expired(ssn.now) and not r.admits(task) for r in quota.reserved)
                reason = (
                    Reason.QUOTA_RESERVED
                    if held and not quota.claim_shortfalls(task.request)
                    else (Reason.INSUFFICIENT_QUOTA)
                )
                return Status.unschedulable(reason, f"quota {quota.name}: {fits_detail(short)}")
            if quota.node_name:
                node = ssn.node(quota.node_name)
                if (node is None or not node.schedulable()) and quota.reservation_for(task, ssn.now) is None:
                    # a task keeps its reserved place while the node is down (release_quota moves
                    # the quota if the outage lasts); others look for a quota on a working node
                    return Status.unschedulable(Reason.NODE_NOT_READY, f"quota {quota.name} is on {quota.node_name}")
                if node is not None:
                    for k, v in task.node_selector.items():
                        if node.labels.get(k) != v:
                            return Status.unresolvable(
                                Reason.NODE_SELECTOR_MISMATCH,
                                f"quota {quota.name} is on {node.name}, which lacks {k}={v}",
                            )
            elif quota.static_bind_status is not None and not quota.static_bind_status.bound:
                node = ssn.node(quota.static_bind_status.node_name)
                if node is None or not node.schedulable():
                    return Status.unschedulable(
                        Reason.STATIC_BIND_NODE_NOT_READY,
                        f"quota {quota.name} is pinned to {quota.static_bind_status.node_name}",
                    )
            return SUCCESS

        def select_qn(quota: QuotaInfo, node: NodeInfo) -> Status:
            if quota.static_bind_node and node.name != quota.static_bind_node:
                # the operator named the node: no path (a gang plan, a fallback) binds it elsewhere
                return Status.unresolvable(Reason.NODE_SELECTOR_MISMATCH, f"staticBindNode={quota.static_bind_node}")
            labels = node.labels
            for k, v in quota.node_selector.items():
                if labels.get(k) != v:
                    return Status.unresolvable(Reason.NODE_SELECTOR_MISMATCH, f"{k}={v}")
            return SUCCESS

        def predicate_qn(quota: QuotaInfo, node: NodeInfo) -> Status:
            if node.takes_quota(quota.name, quota.request):
                return SUCCESS
            short = node.quota_fits(quota.request)
            if short:
                return Status.unschedulable(Reason.INSUFFICIENT_QUOTA_IDLE, fits_detail(short))
            return SUCCESS

        def predicate_tn(task: TaskInfo, node: NodeInfo) -> Status:
            if not task.quota:
                return SKIP
            return tn_quota_task(ssn, task, node)

        return {
            "tq.select": select_tq,
            "tq.predicate": predicate_tq,
            "qn.select": select_qn,
            "qn.predicate": predicate_qn,
            "tn.predicate": predicate_tn,
        }


def future_quota_idle(ssn: Session, node: NodeInfo) -> Resource:
    """``quota_idle`` once the quotas bound here that nothing holds any more are released."""
    out = node.quota_idle.clone()
    for name, request in node.quota_allocated.items():
        q = ssn.quota(name)
        if q is not None and q.is_idle(ssn.now) and not q.static_bind_node:
            out.iadd(request)
    return out
