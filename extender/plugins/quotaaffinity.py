"""``quotaaffinity``: quota↔quota affinity / anti-affinity (QN) and pod→quota affinity (TQ).

* ``quotaAffinity`` terms: the quota must share a node with at least one bound quota each term
  selects; while none of them is bound anywhere, the term does not constrain (the first lands
  freely and the others follow it).
* ``quotaAntiAffinity`` terms: the quota must not share a node with any quota a term selects —
  checked both ways, as Kubernetes does for pod anti-affinity: a bound quota whose term selects
  this one keeps it away too.
* ``podAffinity`` on a quota: only pods matching its selector (and namespaces) may claim it.
* ``tq.node_order`` — which quota a task prefers, the seed's tiers after "required" (a pod that
  names its quota keeps it): a quota reserved for this very task (1000) > a bound or statically
  bound quota (100, +50 on a node where the task's siblings already are) > a free quota (10).
  Within a tier: a quota a sibling already claims scores +2 for an ordinary job (its claims stay
  together) and −5 for a topology job (one quota — one node — per rank); then best fit (the
  quota the task fills most tightly, < 1).

  So a task's score on a quota depends on the task only through its request on the quota's
  resource names, except on quotas its job touches (reserved for it, claimed by its job, on its
  siblings' nodes): ``TQ_ORDER_BY_SHAPE``, what the webhook's candidate index relies on
  (``webhooks.candidates``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from extender.framework.plugin import NoArgs
from extender.framework.session import Event, EventKind, Session
from extender.framework.status import SUCCESS, Reason, Status
from extender.model.node import NodeInfo
from extender.model.quota import QuotaAffinityTerm, QuotaInfo
from extender.model.task import TaskInfo

NAME: Final = "quotaaffinity"
Args = NoArgs


class Plugin:
    NAME: Final = NAME
    Args = Args
    STAGES: Final = frozenset({"tq.predicate", "tq.node_order", "qn.pre_predicate", "qn.predicate", "events"})
    TQ_ORDER_BY_SHAPE: Final = True  # see the module docstring

    def __init__(self, args: NoArgs) -> None:
        self.args = args

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        pre_predicate_qn, predicate_qn, affinity_nodes = _quota_affinity(ssn)
        node_order_tq, on_event = _task_preference(ssn, affinity_nodes)
        return {
            "events": on_event,
            "tq.predicate": _predicate_tq,
            "tq.node_order": node_order_tq,
            "qn.pre_predicate": pre_predicate_qn,
            "qn.predicate": predicate_qn,
        }


def _quota_affinity(
    ssn: Session,
) -> tuple[Callable[[QuotaInfo], Status], Callable[[QuotaInfo, NodeInfo], Status], dict[Any, frozenset[str]]]:
    """``qn.pre_predicate``, ``qn.predicate`` and the answers they keep (which the ``events`` hook
    of :func:`_task_preference` drops): quota↔quota affinity (the nodes of the bound quotas each
    term selects) and anti-affinity, both ways.

    The nodes each term selects for a quota are computed when first read and kept until a quota
    is bound or released in the session (or such a change is undone): then every kept answer is
    dropped, as any of them may have changed. A caller that judges nodes without the
    ``pre_predicate`` stage (the topology planner judges each node through ``select`` and
    ``predicate`` only) thus never reads where the partners were before a bind of this session.
    Kept per term, not per quota: a planner may judge a copy of a quota with fewer terms."""
    affinity_nodes: dict[tuple[QuotaAffinityTerm, str], frozenset[str]] = {}

    def bound_nodes_of(term: QuotaAffinityTerm, me: str) -> frozenset[str]:
        nodes = affinity_nodes.get((term, me))
        if nodes is None:
            found = set()
            for q in ssn.quotas():
                if q.name != me and q.node_name and term.matches(q.name, q.labels):
                    found.add(q.node_name)
            nodes = affinity_nodes[term, me] = frozenset(found)
        return nodes

    def pre_predicate_qn(quota: QuotaInfo) -> Status:
        return SUCCESS

    def predicate_qn(quota: QuotaInfo, node: NodeInfo) -> Status:
        for term in quota.quota_affinity:
            nodes = bound_nodes_of(term, quota.name)
            if nodes and node.name not in nodes:
                return Status.unresolvable(Reason.QUOTA_AFFINITY_NOT_MATCH, f"must share a node with {term.describe()}")
        if quota.quota_anti_affinity:
            for other_name in node.quota_allocated:
                if other_name == quota.name:
                    continue
                other = ssn.quota(other_name)
                labels = other.labels if other is not None else {}
                for term in quota.quota_anti_affinity:
                    if term.matches(other_name, labels):
                        return Status.unresolvable(Reason.QUOTA_ANTI_AFFINITY, f"{node.name} holds quota {other_name}")
        for holder_name in ssn.anti_affinity_holders():  # the symmetric check
            if holder_name == quota.name or not node.has_quota(holder_name):
                continue
            holder = ssn.quota(holder_name)
            if holder is None:
                continue
            for term in holder.quota_anti_affinity:
                if term.matches(quota.name, quota.labels):
                    return Status.unresolvable(
                        Reason.QUOTA_ANTI_AFFINITY, f"quota {holder_name} on {node.name} repels it"
                    )
        return SUCCESS

    return pre_predicate_qn, predicate_qn, affinity_nodes


def _predicate_tq(task: TaskInfo, quota: QuotaInfo) -> Status:
    """``tq.predicate``: a quota with a ``podAffinity`` admits only the pods it selects."""
    if quota.pod_affinity is not None and not quota.pod_affinity.admits(task):
        return Status.unresolvable(
            Reason.POD_QUOTA_AFFINITY_NOT_MATCH, f"quota {quota.name} admits only pods matching its podAffinity"
        )
    return SUCCESS


def _task_preference(
    ssn: Session, affinity_nodes: dict[Any, frozenset[str]]
) -> tuple[Callable[[TaskInfo, QuotaInfo], float], Callable[[Event], None]]:
    """``tq.node_order`` (the seed's tiers, the sibling bonus or malus, best fit) and the
    ``events`` hook that forgets where a job's tasks sit when that changes, and, on a quota bound
    or released, the ``affinity_nodes`` :func:`_quota_affinity` keeps."""
    sibling_nodes: dict[str, frozenset[str]] = {}

    def siblings_on(task: TaskInfo) -> frozenset[str]:
        nodes = sibling_nodes.get(task.job)
        if nodes is None:
            job = ssn.job(task.job)
            found: set[str] = set()
            if job is not None:
                for t in job.alive_tasks():
                    if t.uid == task.uid:
                        continue
                    if t.node:
                        found.add(t.node)
                    elif t.quota:
                        q = ssn.quota(t.quota)
                        if q is not None and q.node_name:
                            found.add(q.node_name)
            nodes = sibling_nodes[task.job] = frozenset(found)
        return nodes

    def node_order_tq(task: TaskInfo, quota: QuotaInfo) -> float:
        if quota.reservation_for(task, ssn.now) is not None:
            score = 1000.0
        else:
            node = (
                quota.node_name
                or (quota.static_bind_status.node_name if quota.static_bind_status is not None else "")
                or quota.static_bind_node
            )
            if node:
                score = 100.0 + (50.0 if node in siblings_on(task) else 0.0)
            else:
                score = 10.0
        job = ssn.job(task.job)
        shared_with_sibling = any(c.job == task.job for c in quota.claims.values())
        if job is not None and job.topology:
            # one quota per task: a topology job's tasks go to distinct nodes in rank order
            if shared_with_sibling:
                score -= 5.0
        elif shared_with_sibling:
            score += 2.0  # keeps a job's claims together
        return score + _best_fit(task, quota)

    def on_event(ev: Event) -> None:
        # where a job's tasks sit changes with claims, quota bindings and placements
        if ev.task:
            t = ssn.task(ev.task)
            if t is not None:
                sibling_nodes.pop(t.job, None)
        elif ev.kind in (EventKind.BIND_QUOTA, EventKind.RELEASE_QUOTA):
            sibling_nodes.clear()
            affinity_nodes.clear()

    return node_order_tq, on_event


def _best_fit(task: TaskInfo, quota: QuotaInfo) -> float:
    """In [0, 1): the tighter the task fits what is left of the quota, the higher."""
    request = quota.governed(task.request)
    total = 0.0
    n = 0
    for name, cap in quota.capacity.q.items():
        if cap <= 0:
            continue
        left = cap - quota.allocated.get(name) - request.get(name)
        total += max(0.0, left) / cap
        n += 1
    return 0.999 * (1.0 - total / n) if n else 0.0
