"""``allocate_zone`` — hop ②, quota → node for topology jobs, inside RDMA zones (seed 2.6, 三 3.4).

A job qualifies when topology scheduling is on for it and every one of its alive tasks holds a
quota (``canAllocateZone``). Its unbound quotas are placed in rank order (smallest task index
first); each quota's candidates are the nodes ``job.zone_candidates`` returns (the topology
plugin's zone plan: the zone of the bound siblings, or the zones chosen for the whole gang), in
node-index order, through the QN pipeline. When the best_n stage is rank-ordered (topology), the
first feasible node in index order is the answer. The ``job.quota_allocate`` gate (gang
``quota_ready`` AND topology ``force_node_order``) commits the job's bindings or discards them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from extender.actions.allocate_quota import admissible, bind_job_quotas
from extender.framework.ordering import ordered_jobs
from extender.framework.plugin import NoArgs
from extender.framework.session import FitStage, Session
from extender.framework.status import Reason, Status
from extender.model.job import JobInfo
from extender.model.quota import QuotaInfo
from extender.plugins.gang import can_allocate_zone

NAME: Final = "allocate_zone"
Args = NoArgs


class Action:
    NAME: Final = NAME
    Args = NoArgs

    def __init__(self, args: NoArgs) -> None:
        self.args = args

    def execute(self, ssn: Session) -> None:
        jobs = []
        unbound: dict[str, list[QuotaInfo]] = {}
        for job in ssn.pending_jobs():
            if not job.topology:
                continue
            quotas = [q for q in ssn.job_quotas(job) if not q.node_name]
            if not quotas:
                continue
            if not can_allocate_zone(job):
                # a consequence: when quota assignment already said why tasks hold none (NoQuota:
                # the queue has no quota left, …), that cause stays the job's reason
                prev = ssn.verdicts.get(job.key)
                if prev is None or prev.stage > FitStage.QUOTA_ASSIGNMENT:
                    missing = sum(1 for t in job.alive_tasks() if not t.spot and not t.quota)
                    ssn.verdict(
                        job.key,
                        FitStage.QUOTA_ASSIGNMENT,
                        Status.unschedulable(Reason.WAITING_FOR_GANG, f"{missing} task(s) still without a quota"),
                    )
                continue
            jobs.append(job)
            unbound[job.key] = quotas
        for job in ordered_jobs(ssn, jobs):
            if not admissible(ssn, job):
                continue
            # bind_job_quotas re-reads each quota: one an earlier job bound meanwhile is skipped
            bind_job_quotas(
                ssn, job, unbound[job.key], self.candidates(ssn, job), rank_ordered=ssn.qn.rank_ordered, stop_after=None
            )

    @staticmethod
    def candidates(ssn: Session, job: JobInfo) -> Callable[[QuotaInfo], Iterable[str] | Status]:
        """A quota's candidate nodes: the topology plan's, as a lazy ordered sequence (the
        pipeline may stop at the first feasible one), else every node in rank order."""
        zone_candidates = ssn.stages.zone_candidates

        def of(quota: QuotaInfo) -> Iterable[str] | Status:
            zone = zone_candidates(job, quota)
            return [n.name for n in ssn.nodes()] if zone is None else zone

        return of
