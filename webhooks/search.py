"""Tiers 2–4 of the admission decision: the quota of the pod's queue that the TQ pipeline prefers.

Pure given the session. The candidates are the queue's quotas that pass a pre-filter (no room at
all, or less room than asked, before reservations: :func:`webhooks.candidates.room_class`), taken
in the order of the policy's ``tq.node_order`` (ties: by name), the predicates run in that order
until the first feasible quota (:func:`search`). With a :class:`~webhooks.candidates.CandidateIndex`
that order is read from heaps kept current by the cache's quota events, with the same answer; the
full scan remains for policies the index does not serve, and for the reason when nothing fits.
The decision around it (the required tier, patches, claims) is :mod:`webhooks.mutate`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping

from extender.framework.pipeline import Placement, place
from extender.framework.session import Session, Snapshot
from extender.framework.status import Reason, Status
from extender.model.job import JobInfo
from extender.model.quota import QuotaInfo
from extender.model.resources import Resource
from extender.model.task import TaskInfo
from webhooks.candidates import CANDIDATE, TOO_SMALL, CandidateIndex, room_class
from webhooks.overlay import Overlay

__all__ = ["choose_quota", "search"]


def choose_quota(
    ssn: Session, task: TaskInfo, job: JobInfo, *, exclude: frozenset[str], index: CandidateIndex | None
) -> QuotaInfo | str:
    """The quota of the job's queue (``exclude`` left out) the TQ pipeline chooses for ``task`` —
    through ``index`` when given, else by :func:`search` over the pre-filtered queue — or the
    reason there is none (the job may not start yet, no quota with room, none that fits)."""
    status = ssn.stages.enqueueable(job)
    if not status.ok:
        return status.message()
    queue = job.queue or "(none)"
    ordered = _indexed(ssn, task, job, exclude, index) if index is not None else None
    result: Placement[QuotaInfo] | None = None
    if ordered is not None:
        # the index's stream is the scan's order: the first feasible quota is the scan's answer
        result = place(ssn.tq, task, ordered, stop_after=1)
        if result.choice is not None:
            return result.choice
        # nothing fits: the reason counts the quotas the pre-filter found too small (a scan)
    # the session has changed nothing: its view of the queue's quotas is the (overlaid) snapshot's
    quotas = _queue_quotas(ssn.snap, job.queue)
    if exclude:
        quotas = (q for q in quotas if q.name not in exclude)
    candidates, too_small = _prefilter(quotas, task.request)
    if not candidates and not too_small:
        status = Status.unschedulable(Reason.NO_QUOTA, f"queue {queue} has no quota with room left")
        return status.message()
    if ordered is None:
        result = search(ssn, task, candidates) if candidates else None
    if result is None or result.choice is None:
        failures = result.failures if result is not None else {}
        return _no_fit(queue, failures, too_small)
    return result.choice


def _indexed(
    ssn: Session, task: TaskInfo, job: JobInfo, exclude: frozenset[str], index: CandidateIndex
) -> Iterator[QuotaInfo] | None:
    quotas = ssn.snap.quotas
    base: Mapping[str, QuotaInfo] = quotas
    overlaid: Iterable[str] = ()
    if isinstance(quotas, Overlay):
        base, overlaid = quotas.base, quotas.extra.keys()
    return index.candidates(ssn, task, job, base=base, overlaid=overlaid, exclude=exclude)


def _queue_quotas(snap: Snapshot, queue: str) -> Iterator[QuotaInfo]:
    quotas = snap.quotas
    names = snap.quotas_by_queue.get(queue, ())
    if isinstance(quotas, Overlay):
        base, extra = quotas.base, quotas.extra
        for n in names:
            q = extra.get(n) or base.get(n)
            if q is not None:
                yield q
    else:
        for n in names:
            q = quotas.get(n)
            if q is not None:
                yield q


def _prefilter(quotas: Iterable[QuotaInfo], request: Resource) -> tuple[list[QuotaInfo], int]:
    """:func:`~webhooks.candidates.room_class` over the queue: the candidates, and how many
    quotas had room, but too little."""
    want = request.q
    out: list[QuotaInfo] = []
    too_small = 0
    for q in quotas:
        c = room_class(q, want)
        if c == CANDIDATE:
            out.append(q)
        elif c == TOO_SMALL:
            too_small += 1
    return out, too_small


def search(ssn: Session, task: TaskInfo, candidates: list[QuotaInfo]) -> Placement[QuotaInfo]:
    """``place(ssn.tq, task, candidates)``, found by scoring first.

    Scores do not depend on feasibility, so ranking every candidate by the policy's
    ``tq.node_order`` first (ties keep candidate order) and then filtering in that order until
    the first feasible one gives the same answer as filtering all and ranking the survivors —
    while running the predicates on one or a few quotas instead of hundreds. Used only when the
    policy's TQ bundle has no ``batch_node_order`` or ``best_n`` participant and is not
    rank-ordered (then ``place`` decides among all feasible candidates and is called as is).
    """
    bundle = ssn.tq
    stages = ssn.policy.stages
    if bundle.rank_ordered or stages["tq.batch_node_order"].participants or stages["tq.best_n"].participants:
        return place(bundle, task, candidates)
    if bundle.has_scores and len(candidates) > 1:
        node_order = bundle.node_order
        scored = sorted(((node_order(task, q), i, q) for i, q in enumerate(candidates)), key=lambda s: (-s[0], s[1]))
        candidates = [q for _, _, q in scored]
    return place(bundle, task, candidates, stop_after=1)


def _no_fit(queue: str, failures: Mapping[str, Status], too_small: int) -> str:
    """``NoQuota(queue q has no quota that fits: …)`` — one refusal verbatim, several counted by
    reason (quotas the pre-filter found too small count as ``InsufficientQuota``)."""
    if len(failures) == 1 and not too_small:
        detail = next(iter(failures.values())).message()
    else:
        counts: Counter[str] = Counter()
        for s in failures.values():
            counts[str(s.reason) if s.reason is not None else s.code.name] += 1
        if too_small:
            counts[str(Reason.INSUFFICIENT_QUOTA)] += too_small
        detail = ", ".join(f"{n}× {r}" for r, n in counts.most_common())
    return Status.unschedulable(Reason.NO_QUOTA, f"queue {queue} has no quota that fits: {detail}").message()
