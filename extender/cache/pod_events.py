"""Pod events into the cache: tasks, their jobs, node ledgers and quota claims.

Every event first takes the pod's old contributions out (:func:`_remove_task`) and then puts
the new ones in (:func:`_add_task`), so the ledgers stay exact under any event order. The
cache keeps the pods its scheduler manages and, of other schedulers, the pods bound to a node
(``others``: counted in node ledgers only). A managed pod:

* joins its job (``scheduling.k8s.io/group-name``, else a job of one) and the ledger of the node
  it is on — or, while the extender's bind is in flight (``assumed``), of the node it goes to;
* claims the quota its ``quota-name`` annotation names if that quota exists (else it waits for
  it: attached when the quota appears), consuming a reservation kept for it;
* when it held a claim and fails, or is deleted without having succeeded, leaves a reservation
  (:mod:`extender.cache.reservations`) — unless its job is gone or a pod replacing it is alive.

An event older than the version held (resourceVersion) is ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from extender import wellknown
from extender.cache import convert, inflight, jobs, reservations
from extender.cache.convert import ConversionError
from extender.cache.meta import Obj, name_of, older, uid_of
from extender.model.task import ON_NODE, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from extender.cache.cache import ClusterCache

__all__ = ["apply_pod", "on_pod_delete"]


def on_pod_delete(cache: ClusterCache, obj: Obj) -> None:
    uid = uid_of(obj)
    cache._pod_objs.pop(uid, None)
    cache._ok(f"Pod/{(obj.get('metadata') or {}).get('namespace')}/{name_of(obj)}")  # its error goes with it
    named = ((obj.get("metadata") or {}).get("annotations") or {}).get(wellknown.ANNO_QUOTA_NAME)
    if named and named in cache._waiting_claims:
        cache._waiting_claims[named].discard(uid)
    _remove_task(cache, uid, deleted=obj)
    cache.assumed.pop(uid, None)
    cache._bump()


def apply_pod(cache: ClusterCache, old: Obj | None, obj: Obj) -> None:
    """A pod added (``old`` None) or updated (``old``: the version the cache held; ``obj`` itself
    to re-apply the version held)."""
    uid = uid_of(obj)
    if old is not obj and older(obj, cache._pod_objs.get(uid)):
        return
    managed = cache.is_managed(obj)
    bound = bool((obj.get("spec") or {}).get("nodeName"))
    if not managed and not bound:
        if uid in cache._pod_objs:
            cache._pod_objs.pop(uid)
            _remove_task(cache, uid, deleted=None)
            cache._bump()
        return
    what = f"Pod/{(obj.get('metadata') or {}).get('namespace')}/{name_of(obj)}"
    try:
        task = convert.task_from_api(obj, cache.opts)
    except (ConversionError, ValueError) as exc:
        cache._error(what, exc)
        return
    cache._ok(what)
    prev = cache._pod_objs.get(uid)
    cache._pod_objs[uid] = obj
    terminal_now = task.status in (TaskStatus.SUCCEEDED, TaskStatus.FAILED)
    had_claim = _claim_of(cache, uid)
    _remove_task(cache, uid, deleted=None)
    if bound or not managed:
        cache.assumed.pop(uid, None)
    elif uid in cache.assumed:
        a = cache.assumed[uid]
        if a.expires > cache.clock():
            task.status = TaskStatus.BINDING
            task.node = a.node
        else:
            del cache.assumed[uid]
    if not managed:
        if task.status in ON_NODE:
            cache.others[uid] = task
            cache._tasks_on_node[task.node].add(uid)
            node = cache.nodes.get(task.node)
            if node is not None:
                node.add_task(task, force=True)
        cache._bump()
        return
    # a claiming pod that just failed leaves a reservation (a succeeded one does not)
    if had_claim and terminal_now and task.status is TaskStatus.FAILED and prev is not None:
        reservations.reserve(cache, had_claim, task, "Failed")
    _add_task(cache, task)
    cache._bump()


def _claim_of(cache: ClusterCache, uid: str) -> str:
    key = cache.task_job.get(uid)
    if key is None:
        return ""
    job = cache.jobs.get(key)
    t = job.tasks.get(uid) if job else None
    return t.quota if t is not None else ""


def _add_task(cache: ClusterCache, task: TaskInfo) -> None:
    key = task.job
    job = cache.jobs.get(key)
    if job is None:
        job = jobs.new_job(cache, key, task.namespace)
    job.add_task(task)
    cache.task_job[task.uid] = key
    jobs.refresh_job(cache, job)
    if task.status in ON_NODE and task.node:
        cache._tasks_on_node[task.node].add(task.uid)
        node = cache.nodes.get(task.node)
        if node is not None:
            node.add_task(task, force=True)
    claim = task.quota
    task.quota = ""
    if claim and task.is_alive():
        quota = cache.quotas.get(claim)
        if quota is not None:
            quota.add_claim(task, force=True)  # what the API says, even if over-claimed
            task.quota = claim
            cache.dirty_quotas.add(claim)
            cache._touch(claim)
            reservations.consume(cache, quota, task)
            inflight.sync(cache, claim)
            if task.node and task.status in ON_NODE and task.node != quota.node_name:
                cache.drifted.add(claim)  # fix_quota_binding moves it next cycle, unthrottled
    if claim and task.is_alive() and not task.quota:
        cache._waiting_claims[claim].add(task.uid)  # attached if the quota appears
    # a claim naming a quota that does not exist stays unattached: allocate_job re-assigns it
    if task.status is TaskStatus.ALLOCATED_TO_QUOTA and not task.quota:
        task.status = TaskStatus.PENDING
    elif task.status is TaskStatus.PENDING and task.quota:
        task.status = TaskStatus.ALLOCATED_TO_QUOTA


def _remove_task(cache: ClusterCache, uid: str, *, deleted: Obj | None) -> None:
    other = cache.others.pop(uid, None)
    if other is not None:
        cache._tasks_on_node[other.node].discard(uid)
        node = cache.nodes.get(other.node)
        if node is not None and node.has_task(uid):
            node.remove_task(uid)
        return
    key = cache.task_job.pop(uid, None)
    if key is None:
        return
    job = cache.jobs.get(key)
    if job is None:
        return
    task = job.remove_task(uid)
    if task is None:
        return
    final = ((deleted or {}).get("status") or {}).get("phase")
    if final in (TaskStatus.SUCCEEDED.value, TaskStatus.FAILED.value):
        job.finished[uid] = TaskStatus(final)
    if task.node:
        cache._tasks_on_node[task.node].discard(uid)
        node = cache.nodes.get(task.node)
        if node is not None and node.has_task(uid):
            node.remove_task(uid)
    if task.quota:
        quota = cache.quotas.get(task.quota)
        if quota is not None and uid in quota.claims:
            quota.remove_claim(uid)
            cache.dirty_quotas.add(quota.name)
            cache._touch(quota.name)
            finished = ((deleted or {}).get("status") or {}).get("phase") == "Succeeded"
            if (
                deleted is not None
                and task.status is not TaskStatus.SUCCEEDED
                and not finished
                and not job.podgroup_missing  # its PodGroup was deleted: the job is gone
                and not jobs.has_successor(job, task)
            ):
                reservations.reserve(cache, task.quota, task, reservations.disruption_reason(deleted))
    if not job.tasks and not job.has_podgroup:
        del cache.jobs[key]
        cache.changed_jobs.add(key)
        cache.pending_jobs.discard(key)
    else:
        jobs.refresh_job(cache, job)
