"""Placing one quota on a node: the QN pipeline plus the seed's two tiers and the re-check.

Shared by allocate_zone and allocate_quota (they differ only in their candidate nodes).

* Tier 1: nodes where the quota fits ``quota_idle`` now — scored and chosen from.
* Tier 2: nodes where it fits only once idle quotas there are released — not scored (the seed
  says so); their failure is reported as ``QuotaIdleOnlyAfterRelease`` so /diagnose shows that
  waiting will help.
* Right before binding, ``quota.request ≤ best.quota_idle`` is checked again.
"""

from __future__ import annotations

from collections.abc import Iterable

from extender.framework.pipeline import Placement, place
from extender.framework.session import Session
from extender.framework.status import Code, Reason, Status, aggregate
from extender.model.capacity import largest_allocatable, unholdable
from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo
from extender.model.resources import Resource


def future_quota_idle(ssn: Session, node: NodeInfo) -> Resource:
    """``quota_idle`` once the quotas bound here that release_quota gives back are released: the
    idle ones the scheduler bound (never a static one, never one another controller bound)."""
    out = node.quota_idle.clone()
    for name, request in node.quota_allocated.items():
        q = ssn.quota(name)
        if q is not None and q.bound_by and not q.static_bind_node and q.is_idle(ssn.now):
            out.iadd(request)
    return out


def larger_than_any_node(ssn: Session, quota: QuotaInfo) -> Status | None:
    """``QuotaLargerThanAnyNode`` when some resource of the quota's request exceeds every node's
    allocatable (no release can ever make room: the quota, or the cluster, has to change), else
    None. O(nodes): asked only once a placement has failed."""
    why = unholdable(quota.request, largest_allocatable(ssn.nodes()))
    if not why:
        return None
    return Status.unresolvable(Reason.QUOTA_LARGER_THAN_ANY_NODE, f"quota {quota.name}: {why}")


def place_quota(
    ssn: Session,
    quota: QuotaInfo,
    candidates: Iterable[NodeInfo],
    *,
    rank_ordered: bool = False,
    stop_after: int | None = None,
) -> Placement[NodeInfo]:
    result = place(ssn.qn, quota, candidates, stop_after=stop_after, rank_ordered=rank_ordered)
    if result.choice is not None:
        best = result.choice
        if not best.takes_quota(quota.name, quota.request):  # the re-check
            short = ", ".join(map(str, best.quota_fits(quota.request)))
            result.failures[best.name] = Status.unschedulable(Reason.INSUFFICIENT_QUOTA_IDLE, short)
            result.choice = None
            result.status = result.failures[best.name]
        return result
    # tier 2: report nodes that would fit after releases
    changed = False
    for name, status in list(result.failures.items()):
        if status.code != Code.UNSCHEDULABLE or any(
            f.reason is not Reason.INSUFFICIENT_QUOTA_IDLE for f in status.failures
        ):
            continue
        node = ssn.node(name)
        if node is not None and quota.request.less_equal_with_resource_names(future_quota_idle(ssn, node)):
            result.failures[name] = Status.unschedulable(
                Reason.QUOTA_IDLE_AFTER_RELEASE, "fits once idle quotas on the node are released"
            )
            changed = True
    if changed:
        result.status = aggregate(result.failures)
    return result
