"""Reservations: the place a quota keeps for a pod of it that went away (seed 2.4 ②).

A pod that claimed a quota and fails, or is deleted without having succeeded, leaves a
*pending reservation* (``pending_reservations``: quota → pod uid → :class:`ReservedTask`) for
``reservation_ttl`` seconds, which the binder writes into the quota's ``status.reservedTasks``;
the quota's :class:`QuotaInfo` shows the persisted ones and the pending ones together. A pod
restarted in the slot (:meth:`QuotaInfo.reservation_for`) consumes it; a deleted job's
reservations go at once. Expired reservations leave the status every binder cycle, judged on
what the status *shows* (``_reservation_expiry``: quota → earliest expiry it shows), so a write
that raced the expiry is simply redone next cycle. A pod that went while no replica watched gets
its reservation once the cache has synced (:mod:`extender.cache.departures`).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

from extender.cache.meta import Obj
from extender.model.quota import QuotaInfo, ReservedTask
from extender.model.task import TaskInfo

if TYPE_CHECKING:
    from extender.cache.cache import ClusterCache

__all__ = [
    "consume",
    "disruption_reason",
    "drop_expired_pending",
    "forget_jobs",
    "forget_quota",
    "mark_expired_shown",
    "read_persisted",
    "reserve",
]


def disruption_reason(obj: Obj) -> str:
    """Why a pod went away, as a reservation records it: Failed, Evicted, Preempted or Deleted."""
    status = obj.get("status") or {}
    if status.get("phase") == "Failed":
        return "Evicted" if status.get("reason") == "Evicted" else "Failed"
    for c in status.get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == "DisruptionTarget" and c.get("status") == "True":
            reason = str(c.get("reason") or "")
            if "Preemption" in reason:
                return "Preempted"
            if "Eviction" in reason or "Taint" in reason:
                return "Evicted"
    return "Deleted"


def reserve(cache: ClusterCache, quota_name: str, task: TaskInfo, reason: str) -> None:
    """Keep ``task``'s place in the quota it claimed (nothing when the quota is gone or
    reservations are off: ``reservation_ttl`` ≤ 0); the binder leader writes it."""
    quota = cache.quotas.get(quota_name)
    if quota is None or cache.reservation_ttl <= 0:
        return
    r = ReservedTask(
        job=task.job,
        index=task.index,
        namespace=task.namespace,
        pod_name=task.name,
        pod_uid=task.uid,
        reason=reason,
        expires_at=cache.clock() + cache.reservation_ttl,
        request=quota.governed(task.request),  # what the slot keeps free, as a claim counts it
    )
    cache.pending_reservations[quota_name][task.uid] = r
    cache.dirty_quotas.add(quota_name)
    quota.reserved = (*tuple(x for x in quota.reserved if x.pod_uid != task.uid), r)
    cache._notify(quota_name)


def consume(cache: ClusterCache, quota: QuotaInfo, task: TaskInfo) -> None:
    """A restarted pod claimed its reserved quota: the reservation has done its job."""
    now = cache.clock()
    taken = quota.reservation_for(task, now)
    if taken is None:
        return
    quota.reserved = tuple(r for r in quota.reserved if r is not taken)
    cache.pending_reservations.get(quota.name, {}).pop(taken.pod_uid, None)
    cache.dirty_quotas.add(quota.name)
    cache._notify(quota.name)


def read_persisted(cache: ClusterCache, name: str, new: QuotaInfo) -> None:
    """The quota's object was delivered as ``new``: the reservations its status shows are
    persisted (no longer pending); ``new`` shows those and the ones still pending."""
    if new.reserved:
        cache._reservation_expiry[name] = min(r.expires_at for r in new.reserved)
    else:
        cache._reservation_expiry.pop(name, None)
    pending = cache.pending_reservations.get(name, {})
    persisted = {r.pod_uid for r in new.reserved}
    for uid in list(pending):
        if uid in persisted:
            del pending[uid]  # written: the object now carries it
    new.reserved = (*new.reserved, *pending.values())


def forget_quota(cache: ClusterCache, name: str) -> None:
    """The quota was deleted: nothing of its reservations is kept."""
    cache.pending_reservations.pop(name, None)
    cache._reservation_expiry.pop(name, None)


def forget_jobs(cache: ClusterCache, keys: AbstractSet[str]) -> None:
    """The jobs are gone (their PodGroups were deleted): the places they kept for restarts are
    not needed any more. One pass over the reservations, however many jobs."""
    for pending in cache.pending_reservations.values():
        for uid in [u for u, r in pending.items() if r.job in keys]:
            del pending[uid]
    for q in cache.quotas.values():
        if any(r.job in keys for r in q.reserved):
            q.reserved = tuple(r for r in q.reserved if r.job not in keys)
            cache.dirty_quotas.add(q.name)
            cache._notify(q.name)


def mark_expired_shown(cache: ClusterCache, now: float) -> None:
    """Quotas whose status shows a reservation expired by ``now`` are dirty (also a quota that
    nothing else changes: still claimed, or statically bound)."""
    for name, expiry in cache._reservation_expiry.items():
        if expiry <= now:
            cache.dirty_quotas.add(name)


def drop_expired_pending(cache: ClusterCache, now: float) -> None:
    """Pending reservations that expired before they were ever written are dropped."""
    for name, pending in cache.pending_reservations.items():
        gone = {uid for uid, r in pending.items() if r.expired(now)}
        if not gone:
            continue
        for uid in gone:  # expired before it was ever written
            del pending[uid]
        q = cache.quotas.get(name)
        if q is not None:
            q.reserved = tuple(r for r in q.reserved if r.pod_uid not in gone)
            cache._notify(name)
        cache.dirty_quotas.add(name)
