"""``sylas``: spot GPU scheduling (seed 六 6.1).

Spot pods are marked by requesting the spot resource (serve's ``--spot-resource``, the session's
``spot_resource``; default ``scheduling.infini-ai.com/spot-gpu``); they also request the real GPUs
they use, so they live in the pod ledger (``idle``) and never in the quota ledger. Each node lends
its spot resource in two pools: ``shared`` (low power; several pods share GPUs) sized by the node annotation
``scheduling.infini-ai.com/spot-shared``, and ``exclusive`` (the rest); an annotation that is no
quantity, or more than the node has, refuses spot pods on the node with ``SpotPoolInvalid``
(:func:`extender.model.spot.pools`). A spot pod picks its pool
with the annotation ``spot-pool`` (default exclusive).

* ``tn.predicate`` — a spot pod fits its pool on the node and the node's ``idle``.
* ``tn.node_order`` — spot pods prefer nodes whose GPUs no quota holds (less likely to be
  evicted soon).
* ``qn.node_order`` — binding a quota to a node whose ``idle`` spot pods occupy will mean
  evicting them (``idle`` less the room of quotas bound there whose pods have not started: those
  displace spot pods too, later): predict the victims among the pods reclaim may evict for the
  quota's pods (``victims.may_go``: of lower priority, not kept by the policy; if they cannot
  make room, 0) — exclusive pool first, whole PodGroups at a time, cheapest first, none that
  the shortage does not need — and score ``1 − cost``, cost
  weighing four strategies: priority class, number of pods evicted, resources evicted, and run
  time (shortest- or longest-running first).
* ``job.victims`` — only spot pods may be preempted.
* ``job.evict`` — which of them ``reclaim`` evicts on the preemptor's node: the ones the score
  predicted (the same groups, cheapest first), a job that is no gang giving back the pods it
  need not lose.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import partial
from typing import Any, Final, Literal

from pydantic import Field

from extender import wellknown
from extender.framework.plugin import ArgsModel
from extender.framework.session import Session
from extender.framework.status import SKIP, SUCCESS, Reason, Status
from extender.framework.victims import may_go
from extender.model.node import NodeInfo, NodeTask
from extender.model.quota import QuotaInfo
from extender.model.resources import Resource
from extender.model.spot import pools
from extender.model.task import TaskInfo, TaskStatus

NAME: Final = "sylas"


class SylasArgs(ArgsModel):
    resource: str | None = Field(
        None,
        description="deprecated: the spot resource is serve's --spot-resource; if given, it must name the same one "
        "(a policy naming another is refused at start and on reload)",
    )
    priority_weight: float = Field(1.0, ge=0)
    count_weight: float = Field(1.0, ge=0)
    resource_weight: float = Field(1.0, ge=0)
    runtime_weight: float = Field(1.0, ge=0)
    runtime_order: Literal["shortest", "longest"] = Field(
        "shortest", description="evict the shortest-running spot pods first (lose least work), or the longest"
    )
    low_priority_below: int = Field(1000, description="priority < this: low class")
    high_priority_from: int = Field(100000, description="priority ≥ this: high class")


Args = SylasArgs


def pool_used(node: NodeInfo, resource: str) -> tuple[int, int]:
    shared = exclusive = 0
    for rec in node.tasks.values():
        amount = rec.request.get(resource)
        if not amount:
            continue
        if rec.spot_pool == "shared":
            shared += amount
        else:
            exclusive += amount
    return shared, exclusive


def pool_free(node: NodeInfo, resource: str, pool: str) -> int | str:
    """What is left of ``pool`` (``"shared"``, else exclusive) of the node's spot ``resource``, in
    milli-units: its capacity less what the spot pods here of that pool request; or why the
    node's pools cannot be read (:func:`pools`)."""
    sizes = pools(node, resource)
    if isinstance(sizes, str):
        return sizes
    shared_cap, excl_cap = sizes
    shared_used, excl_used = pool_used(node, resource)
    return shared_cap - shared_used if pool == "shared" else excl_cap - excl_used


def pool_capacity(node: NodeInfo, task: TaskInfo, resource: str) -> int | None:
    """How many spot pods like ``task`` the node's spot pool of theirs still takes (None: the pod
    requests none of ``resource``, no pool limits it). The pool is a limit beside ``idle``: a node
    whose GPUs are idle lends at most its pool's room to the pods of that pool; a node whose
    pools cannot be read (:func:`pools`) lends none."""
    want = task.request.get(resource)
    if want <= 0:
        return None
    free = pool_free(node, resource, task.spot_pool)
    return 0 if isinstance(free, str) else max(0, free) // want


def unpromised_idle(node: NodeInfo, besides: str = "") -> Resource:
    """The node's ``idle`` less what the quotas bound here (but ``besides``) hold that their pods
    here do not use yet: the room a further quota takes without evicting spot pods. A quota bound
    but not yet running (its pods wait for hop ③) displaces spot pods as surely as a running one,
    only later; ``idle`` alone would count its room twice."""
    if not node.quota_allocated or (besides in node.quota_allocated and len(node.quota_allocated) == 1):
        return node.idle
    used: dict[str, Resource] = {}
    for rec in node.tasks.values():
        if rec.quota in node.quota_allocated and rec.status is not TaskStatus.PIPELINED:
            used.setdefault(rec.quota, Resource.empty()).iadd(rec.request)
    free = node.idle.clone()
    for name, request in node.quota_allocated.items():
        if name == besides:
            continue
        running = used.get(name)
        free.isub(
            request if running is None else Resource({n: max(0, v - running.get(n)) for n, v in request.q.items()})
        )
    return free


class Plugin:
    NAME: Final = NAME
    Args = SylasArgs
    STAGES: Final = frozenset({"tn.predicate", "tn.node_order", "qn.node_order", "job.victims", "job.evict"})

    def __init__(self, args: SylasArgs) -> None:
        self.args = args

    def predicted_victims(
        self,
        node: NodeInfo,
        shortage: Resource,
        now: float,
        gpus: Sequence[str] = wellknown.DEFAULT_GPU_RESOURCES,
        among: Collection[str] | None = None,
    ) -> list[list[NodeTask]] | None:
        """Groups (one per job) of spot pods to evict until ``shortage`` is covered: the cheapest
        first, then, the costliest first, each group given back whose room the others cover
        without it (as kube-scheduler's preemption reprieves victims: a cheap group that frees
        nothing the shortage needs is not evicted beside the one that does). ``among``: only
        these pods (uids) may go; None: every preemptible pod of the node."""
        chosen = self._victim_groups(node, shortage, now, gpus, among)
        return None if chosen is None else [[node.tasks[u] for u in g] for g in chosen]

    def _victim_groups(
        self, node: NodeInfo, shortage: Resource, now: float, gpus: Sequence[str], among: Collection[str] | None
    ) -> list[list[str]] | None:
        """:meth:`predicted_victims` as uids."""
        groups: defaultdict[str, list[str]] = defaultdict(list)
        for uid, rec in node.tasks.items():
            if rec.preemptible and (among is None or uid in among):
                groups[rec.job].append(uid)
        if not groups:
            return None
        costs = sorted(groups.values(), key=lambda g: self.group_cost([node.tasks[u] for u in g], node, now, gpus))
        chosen: list[list[str]] = []
        left = shortage.clone()
        for g in costs:
            if _covered(left):
                break
            chosen.append(g)
            for u in g:
                left.isub(node.tasks[u].request)
        if not _covered(left):
            return None
        for i in range(len(chosen) - 1, -1, -1):
            back = left.clone()
            for u in chosen[i]:
                back.iadd(node.tasks[u].request)
            if _covered(back):
                del chosen[i]
                left = back
        return chosen

    def victims_to_evict(
        self, ssn: Session, preemptor: TaskInfo, node: NodeInfo, allowed: Collection[str]
    ) -> list[str] | None:
        """The pods (uids, among ``allowed``) reclaim evicts on ``node`` so that ``preemptor`` fits
        its ``idle``: the groups :meth:`predicted_victims` chose — the eviction the node's score
        was priced on —, then, of a job that is no gang (``minMember`` ≤ 1, its pods run on
        their own), the pods one at a time, the costliest first, that the others cover without
        (a gang's pods go together: one of them gone stops them all). None: they cannot make
        room."""
        shortage = _shortage(preemptor.request, node.idle.q)
        chosen = self._victim_groups(node, shortage, ssn.now, ssn.gpu_resources, allowed)
        if chosen is None:
            return None
        left = shortage.clone()
        for u in (u for g in chosen for u in g):
            left.isub(node.tasks[u].request)
        victims = [u for g in chosen for u in g]
        loose = [u for u in victims if (job := ssn.job(node.tasks[u].job)) is None or job.min_member <= 1]
        loose.sort(key=lambda u: -self.group_cost([node.tasks[u]], node, ssn.now, ssn.gpu_resources))
        for u in loose:
            back = left.clone()
            back.iadd(node.tasks[u].request)
            if _covered(back):
                victims.remove(u)
                left = back
        return victims

    def group_cost(
        self,
        group: Sequence[NodeTask],
        node: NodeInfo,
        now: float,
        gpus: Sequence[str] = wellknown.DEFAULT_GPU_RESOURCES,
    ) -> float:
        """The cost of evicting ``group`` (0 cheapest … about 1.5): the four strategies, weighted.

        * priority class: 0 below ``low_priority_below``, 1 from ``high_priority_from``, else 0.5;
        * task count: pods evicted per GPU slot of the node (one 4-pod job costs four times one pod);
        * resources: GPUs (of every resource in ``gpus``) evicted over the node's GPUs;
        * run time: the longest run among them over a day (``runtime_order: longest`` inverts it).
        Shared-pool pods cost 0.5 more: the exclusive pool is the one meant to make room."""
        a = self.args
        top = max(r.priority for r in group)
        pclass = 0.0 if top < a.low_priority_below else (1.0 if top >= a.high_priority_from else 0.5)
        gpu_cap = _gpus(node.allocatable, gpus) or 1
        slots = max(1, gpu_cap // 1000)
        count = min(1.0, len(group) / slots)
        res = min(1.0, sum(_gpus(r.request, gpus) for r in group) / gpu_cap)
        runtimes = [now - r.started for r in group if r.started]
        runtime = min(1.0, (max(runtimes) if runtimes else 0.0) / 86400.0)
        if a.runtime_order == "longest":
            runtime = 1.0 - runtime
        shared_penalty = 0.5 if any(r.spot_pool == "shared" for r in group) else 0.0
        total_w = (a.priority_weight + a.count_weight + a.resource_weight + a.runtime_weight) or 1.0
        return (
            a.priority_weight * pclass + a.count_weight * count + a.resource_weight * res + a.runtime_weight * runtime
        ) / total_w + shared_penalty

    def open(self, ssn: Session) -> dict[str, Callable[..., Any]]:
        res = ssn.spot_resource  # one source of truth: what marks a spot pod is what its pool lends
        gpus = ssn.gpu_resources

        def predicate_tn(task: TaskInfo, node: NodeInfo) -> Status:
            if not task.spot:
                return SKIP
            if node.has_task(task.uid):
                return SUCCESS
            want = task.request.get(res)
            pool = "shared" if task.spot_pool == "shared" else "exclusive"
            free = pool_free(node, res, pool)
            if isinstance(free, str):
                return Status.unresolvable(Reason.SPOT_POOL_INVALID, free)
            if want > free:
                return Status.unresolvable(
                    Reason.SPOT_POOL_EXHAUSTED, f"{pool} spot pool has {free / 1000:g} of {want / 1000:g} left"
                )
            short = task.request.shortfalls(node.idle)
            if short:
                return Status.unresolvable(Reason.INSUFFICIENT_IDLE, ", ".join(map(str, short)))
            return SUCCESS

        def node_order_tn(task: TaskInfo, node: NodeInfo) -> float:
            if not task.spot:
                return 0.0
            cap = _gpus(node.allocatable, gpus)
            if cap <= 0:
                return 0.0
            promised = cap - _gpus(node.quota_idle, gpus)
            return 1.0 - min(1.0, max(0, promised) / cap)

        def node_order_qn(quota: QuotaInfo, node: NodeInfo) -> float:
            idle = node.idle.q
            fits = all(v <= idle.get(n, 0) for n, v in quota.request.q.items())
            if fits and not node.quota_allocated:
                return 1.0  # nothing to evict
            if not node.tasks or not any(rec.preemptible for rec in node.tasks.values()):
                return 1.0 if fits else 0.0  # no spot pod to evict: room or none
            free = unpromised_idle(node, quota.name).q
            if all(v <= free.get(n, 0) for n, v in quota.request.q.items()):
                return 1.0  # nothing to evict
            shortage = _shortage(quota.request, free)
            victims = self.predicted_victims(node, shortage, ssn.now, gpus, may_go_for(quota, node))
            if victims is None:
                return 0.0
            # the cost of everything evicted, as one group: two victims cost more than one
            cost = self.group_cost([rec for g in victims for rec in g], node, ssn.now, gpus)
            return max(0.0, 1.0 - cost)

        def may_go_for(quota: QuotaInfo, node: NodeInfo) -> frozenset[str] | None:
            """The pods of ``node`` reclaim may evict for the quota's pods (``may_go``, the one
            rule): for the claimant allowed the least — one that never preempts, else the lowest
            priority —, as each of its pods preempts on its own. None: no claimant yet, every
            spot pod of the node (a guess)."""
            weakest = min(ssn.claimants(quota), key=lambda t: (t.preempts, t.priority), default=None)
            return None if weakest is None else frozenset(t.uid for t in may_go(ssn, weakest, node))

        def victims(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> frozenset[str]:
            return frozenset(t.uid for t in candidates if t.preemptible)

        return {
            "tn.predicate": predicate_tn,
            "tn.node_order": node_order_tn,
            "qn.node_order": node_order_qn,
            "job.victims": victims,
            "job.evict": partial(self.victims_to_evict, ssn),
        }


def _shortage(request: Resource, free: Mapping[str, int]) -> Resource:
    """What of ``request`` the ``free`` room lacks, per resource (only those it lacks)."""
    return Resource({n: v - free.get(n, 0) for n, v in request.q.items() if v > free.get(n, 0)})


def _covered(left: Resource) -> bool:
    """Nothing of a shortage is left."""
    return all(v <= 0 for v in left.q.values())


def _gpus(resources: Resource, names: Sequence[str]) -> int:
    """How many GPUs ``resources`` holds, over every configured GPU resource (``--gpu-resources``)."""
    return sum(resources.get(n) for n in names)
