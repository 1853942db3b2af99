"""Pods that went away while no replica watched: their places are kept all the same (seed 2.4 ②,
DESIGN §4 invariant 5 — a restarted service rebuilds the same ledgers from the API objects).

A replica that watches a claiming pod go (deleted, evicted, failed) keeps its place in the quota
(:mod:`extender.cache.reservations`), and the leader writes the reservation into the quota's
``status.reservedTasks`` on its next cycle. A pod that goes while no replica watches — the service
is being rolled out, has crashed, or the leader died between the event and its next write — would
lose that place: a fresh cache knows it only as an entry of ``status.tasks`` (which the leader
writes for every pod claiming the quota) whose pod it does not hold once its informers have
synced, and without the pod the quota looks idle and is released.

:func:`unseen` lists those entries that would have left a reservation had the pod been seen
going, by the same rules (:func:`extender.cache.pod_events._remove_task`): the entry is a pod's,
not an in-flight claim (no ``expiresAt``) nor a finished task's (phase ``Succeeded``); nothing
reserves its place yet; its job still exists (a pod of a group keeps a place only while the
group's PodGroup exists; a lone pod always); and no live pod of its job has taken its place
already (a replacement created before anyone looked). What the API says of the pod *now* then
decides (:func:`adopt`, given the object read by name): gone, or its name taken by another pod,
→ ``Deleted``; still there and failed or evicted → that reason; still there and succeeded → no
place kept (a finished task does not restart). A pod that cannot be read keeps its place
(``Deleted``): the reservation only keeps room until ``reservation_ttl``, losing the place is what
cannot be undone.

The converse holds too: a PodGroup deleted while no replica watched takes its job's places with
it, as a watching replica's :func:`extender.cache.reservations.forget_jobs` would have
(:func:`forget_orphaned`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extender.cache import jobs, reservations
from extender.cache.meta import Obj
from extender.model.resources import QuantityError, Resource
from extender.model.task import TaskInfo, TaskStatus, job_key

if TYPE_CHECKING:
    from extender.cache.cache import ClusterCache

__all__ = ["Departure", "adopt", "forget_orphaned", "unseen"]


@dataclass(frozen=True, slots=True)
class Departure:
    """A ``status.tasks`` entry of ``quota`` whose pod the synced cache does not hold."""

    quota: str
    uid: str
    namespace: str
    name: str
    job: str
    index: int | None
    request: Resource  # on the quota's resource names, as the entry records it

    def task(self) -> TaskInfo:
        """The departed pod as far as the entry tells (for the successor rule)."""
        return TaskInfo(self.uid, self.namespace, self.name, self.job, self.request, index=self.index)


def _departure(quota: str, raw: object) -> Departure | None:
    """The pod entry ``raw`` as a departure candidate, or None (an in-flight claim, a finished
    task's entry, unreadable)."""
    if not isinstance(raw, Mapping) or raw.get("expiresAt") or not raw.get("uid") or not raw.get("name"):
        return None
    if raw.get("phase") == TaskStatus.SUCCEEDED.value:
        return None
    try:
        request = Resource.from_list(raw.get("request"))
    except (QuantityError, ValueError, TypeError):
        return None
    namespace = str(raw.get("namespace") or "default")
    index = raw.get("taskIndex")
    return Departure(
        quota=quota,
        uid=str(raw["uid"]),
        namespace=namespace,
        name=str(raw["name"]),
        job=str(raw.get("job") or job_key(namespace, str(raw["name"]))),
        index=index if isinstance(index, int) and not isinstance(index, bool) else None,
        request=request,
    )


def _still_unseen(cache: ClusterCache, d: Departure) -> bool:
    """``d`` would have left a reservation had its pod been seen going (the module's rules)."""
    quota = cache.quotas.get(d.quota)
    if quota is None or cache.reservation_ttl <= 0 or d.uid in cache._pod_objs or d.uid in cache.task_job:
        return False
    if any(r.pod_uid == d.uid for r in quota.reserved):
        return False
    if _orphaned(cache, d.job, d.namespace, d.name):
        return False  # its group's PodGroup is gone (or never was): the job keeps no places
    job = cache.jobs.get(d.job)
    return job is None or not jobs.has_successor(job, d.task())


def unseen(cache: ClusterCache) -> list[Departure]:
    """Every pod entry of every quota's ``status.tasks`` that the module's rules would keep a
    place for (call once the cache's informers have synced)."""
    out: list[Departure] = []
    for name, obj in cache.quota_objects().items():
        for raw in (obj.get("status") or {}).get("tasks") or ():
            d = _departure(name, raw)
            if d is not None and _still_unseen(cache, d):
                out.append(d)
    return out


def reason_now(d: Departure, pod: Obj | None) -> str | None:
    """Why ``d``'s pod is gone, from the pod the API holds under its name now (None: none), or
    None when it keeps no place (it succeeded, or it is running after all)."""
    meta: Mapping[str, Any] = (pod or {}).get("metadata") or {}
    if pod is None or meta.get("uid") != d.uid:
        return "Deleted"  # gone, or the name was taken by a pod created since
    phase = (pod.get("status") or {}).get("phase")
    if phase == TaskStatus.FAILED.value:
        return reservations.disruption_reason(pod)
    return None


def adopt(cache: ClusterCache, d: Departure, pod: Obj | None, *, readable: bool = True) -> bool:
    """Keep ``d``'s place as a watching replica would have (``pod``: the API's pod of that name
    now, None if there is none; ``readable`` False: it could not be read — the place is kept).
    Judged again on the cache as it is now. Returns whether a reservation was recorded."""
    if not _still_unseen(cache, d):
        return False
    reason = reason_now(d, pod) if readable else "Deleted"
    if reason is None:
        return False
    reservations.reserve(cache, d.quota, d.task(), reason)
    return True


def _orphaned(cache: ClusterCache, job: str, namespace: str, pod_name: str) -> bool:
    """The pod ``pod_name`` of ``job`` belongs to a group (its job is not the pod itself, as a
    lone pod's is) whose PodGroup the cache does not hold: a group's pod keeps a place only while
    its PodGroup exists."""
    return job != job_key(namespace, pod_name) and job not in cache._podgroups


def forget_orphaned(cache: ClusterCache) -> list[str]:
    """Forget the places the quotas show for pods of groups whose PodGroup is gone (deleted while
    no replica watched), as a watching replica does when a PodGroup goes
    (:func:`extender.cache.reservations.forget_jobs`). A lone pod's places are never orphaned.
    Call once the cache's informers have synced; returns the jobs forgotten, sorted."""
    orphaned = {
        r.job
        for quota in cache.quotas.values()
        for r in quota.reserved
        if r.job and _orphaned(cache, r.job, r.namespace, r.pod_name)
    }
    reservations.forget_jobs(cache, orphaned)
    return sorted(orphaned)
