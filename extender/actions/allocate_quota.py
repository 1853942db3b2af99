"""``allocate_quota`` — hop ②, quota → node over the whole cluster (seed 2.6).

The general case, after allocate_zone has placed the topology jobs:

* quotas with ``spec.staticBindNode`` are pinned to that node first (when its predicates pass),
  independently of any job — the operator asked for it;
* then, job by job (queues by fair share, jobs by priority), every unbound quota its tasks claim
  is placed through the QN pipeline over all nodes (tiers and re-check in ``placement``), in one
  statement per job; the ``job.quota_allocate`` gate (gang ``quota_ready`` …) decides commit or
  discard. A quota whose ``status.nodeName`` is already set is skipped entirely (static binding).

Topology jobs are left to allocate_zone: binding their quotas node by node here would scatter
the gang across switches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from pydantic import Field

from extender.actions.placement import larger_than_any_node, place_quota
from extender.framework.ordering import ordered_jobs
from extender.framework.pipeline import Prejudged, adaptive_stop_after
from extender.framework.plugin import ArgsModel
from extender.framework.session import FitStage, Session
from extender.framework.statement import Statement
from extender.framework.status import Reason, Refused, Status
from extender.model.job import JobInfo
from extender.model.node import LedgerError, NodeInfo
from extender.model.quota import QuotaInfo
from extender.plugins.gang import part_running

NAME: Final = "allocate_quota"


class AllocateQuotaArgs(ArgsModel):
    percentage_of_nodes_to_score: int = Field(
        0, ge=0, le=100, description="like kube-scheduler's: 0 = adaptive, 100 = every feasible node"
    )


Args = AllocateQuotaArgs


def admissible(ssn: Session, job: JobInfo) -> bool:
    """The job may move now (gang complete, no back-off, JobQueue and Queue admit it); else its
    verdict says why — also for gangs whose pods all hold quotas, which allocate_job skips."""
    status = ssn.stages.valid(job)
    if not status.ok:
        stage = FitStage.JOB_QUEUE if status.reason is Reason.BACKOFF else FitStage.GANG
        ssn.verdict(job.key, stage, status)
        return False
    status = ssn.stages.enqueueable(job)
    if not status.ok:
        ssn.verdict(job.key, FitStage.JOB_QUEUE, status)
        return False
    return True


def bind_job_quotas(
    ssn: Session,
    job: JobInfo,
    quotas: list[QuotaInfo],
    candidates: Callable[[QuotaInfo], Iterable[str] | Status | None] | None,
    *,
    rank_ordered: bool,
    stop_after: int | None,
) -> bool:
    """Place ``quotas`` of ``job`` in one statement and apply the commit gate. True if committed.

    ``candidates(quota)`` gives, for the session's current copy of a quota about to be placed,
    the node names it may use, or a Status saying why there are none (None, or no function:
    all nodes in rank order). A quota bound meanwhile (by an earlier job) is skipped. When a
    quota cannot be placed, that failure is the job's verdict (the gang gate failing as a
    consequence is not).
    """
    stmt = ssn.statement()
    failed: tuple[FitStage, Status, dict[str, Any]] | None = None  # the quota that could not be placed
    for quota in quotas:
        current = ssn.quota(quota.name)
        if current is None or current.node_name:
            continue
        names = candidates(current) if candidates is not None else None
        if isinstance(names, Status):
            big = larger_than_any_node(ssn, current)
            where: dict[str, Any] = {"quota": quota.name}
            if big is None and isinstance(names, Refused):  # the nodes refusing it on their own, each its reason
                where.update(per_node=names.per_node, elsewhere=names.elsewhere)
            failed = (FitStage.ZONE_SELECTION, big or names, where)
            break
        if isinstance(names, Prejudged) and _bind_judged(stmt, quota.name, names.first):
            continue
        nodes: Iterable[NodeInfo]
        if names is None:
            nodes = ssn.nodes()
        else:  # lazily, in the order given (the topology plugin orders its candidates)
            nodes = filter(None, map(ssn.node, names))
        result = place_quota(ssn, current, nodes, rank_ordered=rank_ordered, stop_after=stop_after)
        if result.choice is None:
            why = larger_than_any_node(ssn, current) or result.status  # never fits: say so, not "wait"
            failed = (FitStage.NODE_PREDICATES, why, {"per_node": result.failures, "quota": quota.name})
            break
        try:
            stmt.allocate_quota_to_node(quota.name, result.choice.name)
        except LedgerError as exc:  # the pipeline and the ledger disagree: never bind blindly
            failed = (FitStage.NODE_PREDICATES, Status.error(str(exc)), {"quota": quota.name})
            break
    gate = ssn.stages.quota_allocate(ssn.job(job.key) or job)  # the session's current copy
    committed = gate.ok and bool(stmt.ops)
    if committed:
        stmt.commit()
    else:
        stmt.discard()
    if failed is not None:  # told after the commit: a job that runs says so before why the rest waits
        stage, why, where = failed
        ssn.verdict(job.key, stage, part_running(ssn, ssn.job(job.key) or job, why), **where)
    elif not gate.ok:
        ssn.verdict(job.key, FitStage.GANG if gate.reason is Reason.WAITING_FOR_GANG else FitStage.ZONE_SELECTION, gate)
    return committed


def _bind_judged(stmt: Statement, quota: str, node: str) -> bool:
    """Bind a quota to a node its candidate source judged already; False when the ledger refuses."""
    try:
        stmt.allocate_quota_to_node(quota, node)
    except LedgerError:
        return False
    return True


class Action:
    NAME: Final = NAME
    Args = AllocateQuotaArgs

    def __init__(self, args: AllocateQuotaArgs) -> None:
        self.args = args

    def execute(self, ssn: Session) -> None:
        self.pin_static(ssn)
        stop_after = adaptive_stop_after(len(ssn.snap.node_order), self.args.percentage_of_nodes_to_score)
        jobs = []
        unbound: dict[str, list[QuotaInfo]] = {}
        for job in ssn.pending_jobs():
            if job.topology:
                continue
            quotas = [q for q in ssn.job_quotas(job) if not q.node_name]
            if quotas:
                jobs.append(job)
                unbound[job.key] = quotas
        for job in ordered_jobs(ssn, jobs):
            if not admissible(ssn, job):
                continue
            # bind_job_quotas re-reads each quota: one an earlier job bound meanwhile is skipped
            bind_job_quotas(ssn, job, unbound[job.key], None, rank_ordered=False, stop_after=stop_after)

    def pin_static(self, ssn: Session) -> None:
        for quota in ssn.static_quotas():  # each statement below binds only the quota at hand
            if quota.node_name:
                continue
            node = ssn.node(quota.static_bind_node)
            if node is None:
                continue
            result = place_quota(ssn, quota, [node])
            if result.choice is None:
                for c in quota.claims.values():
                    ssn.verdict(
                        c.job, FitStage.NODE_PREDICATES, result.status, per_node=result.failures, quota=quota.name
                    )
                continue
            stmt = ssn.statement()
            stmt.allocate_quota_to_node(quota.name, node.name)
            stmt.commit()
