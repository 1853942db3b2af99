"""The stage catalog and the three function bundles TQ, QN, TN (seed 四 ①).

Every extension point has an id ``<bundle>.<stage>`` and a :class:`~extender.framework.expr.Kind`.
The bundles share one mechanism: six stages, each combining the plugins that implement it by the
expression the policy gives (or the default operator over every enabled plugin that has it).

Signatures (``item`` is a task for TQ/TN and a quota for QN; ``target`` is a quota for TQ and a
node for QN/TN)::

    select(item, target)            -> Status   cheap first filter (labels, queue)
    pre_predicate(item)             -> Status   once per item, before any target
    predicate(item, target)         -> Status   veto filter
    node_order(item, target)        -> float    score
    batch_node_order(item, targets) -> {name: float}
    best_n(item, ranked)            -> target | None   ranked = [(target, score)], best first

Job-level stages::

    job.order(job) / job.queue_order(queue) / job.task_order(task) -> sort key (tuple)
    job.enqueueable(job) -> Status    may the job's tasks take quotas now (JobQueue, queue state)
    job.valid(job)       -> Status    is the job complete enough to schedule (gang: ≥ minMember tasks)
    job.tq_ready(job)    -> Status    after allocate_job: enough tasks hold quotas to commit
    job.quota_allocate(job) -> Status the commit gate of allocate_zone/allocate_quota
    job.zone_candidates(job, quota) -> (node, …) | Status | None   nodes the next quota may use, in
                                      order (a failing Status: none, and why)
    job.victims(preemptor, candidates) -> frozenset[task uid] | None   who may be evicted
    job.evict(preemptor, node, allowed) -> [task uid] | None   which of the allowed reclaim evicts
                                      on the node to make room (None: no plugin chooses)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from extender.framework.expr import Kind
from extender.framework.status import SUCCESS, Status

__all__ = ["BUNDLES", "BUNDLE_STAGES", "EVENT_HOOK", "STAGES", "BoundBundle", "BoundStages"]

BUNDLES = ("tq", "qn", "tn")
BUNDLE_STAGES: dict[str, Kind] = {
    "select": Kind.STATUS,
    "pre_predicate": Kind.STATUS,
    "predicate": Kind.STATUS,
    "node_order": Kind.SCORE,
    "batch_node_order": Kind.SCORES,
    "best_n": Kind.CHOICE,
}
JOB_STAGES: dict[str, Kind] = {
    "order": Kind.ORDER,
    "queue_order": Kind.ORDER,
    "task_order": Kind.ORDER,
    "enqueueable": Kind.STATUS,
    "valid": Kind.STATUS,
    "tq_ready": Kind.STATUS,
    "quota_allocate": Kind.STATUS,
    "zone_candidates": Kind.SET,
    "victims": Kind.SET,
    "evict": Kind.CHOICE,
}

STAGES: dict[str, Kind] = {f"{b}.{s}": k for b in BUNDLES for s, k in BUNDLE_STAGES.items()}
STAGES.update({f"job.{s}": k for s, k in JOB_STAGES.items()})

EVENT_HOOK = "events"
"""Not a stage: a plugin may return ``{"events": handler}`` to follow the statement's operations."""


def neutral(kind: Kind) -> Callable[..., Any]:
    """What a stage evaluates to when no enabled plugin implements it."""
    if kind is Kind.STATUS:
        return lambda *a: SUCCESS
    if kind is Kind.SCORE:
        return lambda *a: 0.0
    if kind is Kind.SCORES:
        return lambda *a: {}
    if kind is Kind.CHOICE:
        return lambda *a: None
    if kind is Kind.SET:
        return lambda *a: None
    return lambda *a: ()


class _LazyStages:
    """Stage functions bound on first use: an attribute missing from the instance is bound by
    ``resolve(stage)`` and kept (later reads are plain attribute reads). A request that needs
    only the TN predicates opens only the plugins that take part in them."""

    def __init__(self, resolve: Callable[[str], Any]) -> None:
        self.__dict__["_resolve"] = resolve

    def __getattr__(self, stage: str) -> Any:
        if stage.startswith("__"):
            raise AttributeError(stage)
        fn = self.__dict__["_resolve"](stage)
        self.__dict__[stage] = fn
        return fn


class BoundBundle(_LazyStages):
    """One bundle (TQ, QN or TN) with its six stages bound to this session's plugin functions."""

    name: str
    select: Callable[[Any, Any], Status]
    pre_predicate: Callable[[Any], Status]
    predicate: Callable[[Any, Any], Status]
    node_order: Callable[[Any, Any], float]
    batch_node_order: Callable[[Any, Any], Mapping[str, float]]
    best_n: Callable[[Any, Any], Any]
    has_scores: bool  # whether any plugin scores (lets actions skip scoring entirely)
    rank_ordered: bool  # best_n is decided first by a rank-ordered plugin (first feasible wins)

    def __init__(self, name: str, resolve: Callable[[str], Any], *, has_scores: bool, rank_ordered: bool) -> None:
        super().__init__(resolve)
        self.name, self.has_scores, self.rank_ordered = name, has_scores, rank_ordered


class BoundStages(_LazyStages):
    order: Callable[[Any], Any]
    queue_order: Callable[[Any], Any]
    task_order: Callable[[Any], Any]
    enqueueable: Callable[[Any], Status]
    valid: Callable[[Any], Status]
    tq_ready: Callable[[Any], Status]
    quota_allocate: Callable[[Any], Status]
    zone_candidates: Callable[[Any, Any], Iterable[str] | Status | None]
    victims: Callable[[Any, Any], Sequence[str] | None]
    evict: Callable[[Any, Any, Any], Sequence[str] | None]
