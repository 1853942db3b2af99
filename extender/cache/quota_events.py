"""Quota events into the cache: specs and persisted status in, derived claims kept.

A Quota's object gives its spec and what its status persists (``nodeName``/``phase``,
``reservedTasks``, the in-flight entries of ``status.tasks``); its claims are never read from
the object but kept from the pods that claim it (:meth:`QuotaInfo.take_claims`). A delivered
version no newer than the one held (a write's answer applied already, the informer catching
up) changes nothing. A quota's node ledger entry follows ``status.nodeName`` — or, while a
write of this replica binding it is in flight (:mod:`~extender.cache.bindings`) and the object
shows no node yet, the node of that binding; pods that named
the quota before it existed claim it when it appears, and claim nothing once it is deleted
(they wait for it again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from extender.cache import convert_crds, inflight, pod_events, reservations
from extender.cache.convert import ConversionError
from extender.cache.meta import Obj, name_of, older, resource_version, uid_of
from extender.model.quota import QuotaInfo
from extender.model.task import ON_NODE, TaskStatus

if TYPE_CHECKING:
    from extender.cache.cache import ClusterCache

__all__ = ["apply_object", "on_quota_add", "on_quota_delete"]


def _mark(index: set[str], name: str, member: bool) -> None:
    if member:
        index.add(name)
    else:
        index.discard(name)


def on_quota_add(cache: ClusterCache, obj: Obj) -> None:
    name = name_of(obj)
    current = cache._quota_objs.get(name)
    if older(obj, current) or (
        current is not None and resource_version(obj) is not None and resource_version(obj) == resource_version(current)
    ):
        # a write's answer was applied already; the informer is catching up (the same
        # resourceVersion is the same object: converting it again would change nothing and
        # costs the event loop ~1 ms a quota, 16,000 times after a burst)
        return
    apply_object(cache, obj)


def apply_object(cache: ClusterCache, obj: Obj) -> None:
    """The quota as ``obj`` says (the version held may be ``obj`` itself: a binding in flight
    forgotten), its claims kept."""
    name = name_of(obj)
    try:
        new = convert_crds.quota_from_api(obj, cache.opts)
    except (ConversionError, ValueError) as exc:
        cache._error(f"Quota/{name}", exc)
        return
    cache._ok(f"Quota/{name}")
    cache._quota_objs[name] = obj
    old = cache.quotas.get(name)
    if old is not None:
        if old.node_name:
            cache._quotas_on[old.node_name].discard(name)
            node = cache.nodes.get(old.node_name)
            if node is not None and node.has_quota(name):
                node.remove_quota(name)
        new.take_claims(old)
    reservations.read_persisted(cache, name, new)
    _in_flight(cache, obj, new)
    cache.quotas[name] = new
    cache.drifted.discard(name)
    for uid in new.claims:
        t = cache.task(uid)
        if t is not None and t.node and t.status in ON_NODE and t.node != new.node_name:
            cache.drifted.add(name)
            break
    inflight.read_entries(cache, name, obj)
    inflight.sync(cache, name)
    hold = convert_crds.quota_recorded_hold(obj)
    if hold is not None:
        cache.quota_holds[name] = hold
    else:
        cache.quota_holds.pop(name, None)
    _mark(cache.static_quotas, name, bool(new.static_bind_node))
    _mark(cache.anti_affinity_quotas, name, bool(new.quota_anti_affinity))
    cache.dirty_quotas.add(name)
    cache._touch(name)
    if new.node_name:
        cache._quotas_on[new.node_name].add(name)
        node = cache.nodes.get(new.node_name)
        if node is not None:
            node.add_quota(name, new.request, force=True)
    if old is None:
        _attach_claims(cache, name)
    cache.changed_jobs.update(c.job for c in new.claims.values())  # boundQuotas may differ
    cache._bump(quotas=old is None or old.queue != new.queue or old.shared_queues != new.shared_queues)


def _in_flight(cache: ClusterCache, obj: Obj, quota: QuotaInfo) -> None:
    """``quota``, just made from ``obj``: bound to the node of its binding in flight while ``obj``
    shows none; the binding ends when ``obj`` shows a node (ours: answered; another: the object
    wins) or is another object than the one the write was for (``extender/cache/bindings.py``)."""
    b = cache.bindings.get(quota.name)
    if b is None:
        return
    if quota.node_name or uid_of(obj) != b.uid:
        del cache.bindings[quota.name]
        return
    quota.bind_in_flight(b.node)


def on_quota_delete(cache: ClusterCache, obj: Obj) -> None:
    name = name_of(obj)
    cache.bindings.pop(name, None)
    q = cache.quotas.pop(name, None)
    cache._quota_objs.pop(name, None)
    cache.quota_touched.pop(name, None)
    cache.release_candidates.discard(name)
    cache.static_quotas.discard(name)
    cache.anti_affinity_quotas.discard(name)
    cache.drifted.discard(name)
    reservations.forget_quota(cache, name)
    inflight.forget_quota(cache, name)
    cache.quota_holds.pop(name, None)
    cache._notify(name)
    if q is None:
        return
    if q.node_name:
        cache._quotas_on[q.node_name].discard(name)
        node = cache.nodes.get(q.node_name)
        if node is not None and node.has_quota(name):
            node.remove_quota(name)
    cache.changed_jobs.update(c.job for c in q.claims.values())
    for uid in q.claims:
        cache._waiting_claims[name].add(uid)
        key = cache.task_job.get(uid)
        job = cache.jobs.get(key) if key else None
        task = job.tasks.get(uid) if job else None
        if task is not None:
            task.quota = ""
            if task.status is TaskStatus.ALLOCATED_TO_QUOTA:
                task.status = TaskStatus.PENDING
    cache._bump(quotas=True)


def _attach_claims(cache: ClusterCache, quota_name: str) -> None:
    """Pods that named this quota before it existed now claim it."""
    for uid in cache._waiting_claims.pop(quota_name, set()):
        obj = cache._pod_objs.get(uid)
        if obj is not None and uid in cache.task_job:
            pod_events.apply_pod(cache, obj, obj)
