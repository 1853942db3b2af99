"""The work of the extender's ``/bind`` verb: check the pod and the node, judge the placement once
more, assume it in the cache, write the quota's binding (inline placements) and the pod's Binding.

:func:`bind` answers the ``ExtenderBindingResult.Error`` text — ``""`` when the pod is bound to the
node (now, or already: a retry of a bind that landed is success). It judges on the cache as it is
and assumes the placement before its first API write, so that concurrent binds of other pods see
this one's room taken; a write that fails forgets the assumption again. The writes themselves are
:class:`~extender.kube.writer.KubeWriter`'s (the one module that writes to the Kubernetes API).
The join of a retry with a bind still in flight is the verb's (:mod:`extender.api.extender`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from extender import wellknown
from extender.actions import bind as bind_action
from extender.actions.outcome import INLINE, QUOTA, SPOT
from extender.cache.claims import ADMISSION_PREFIX, DEFAULT_CLAIM_TTL, ClaimEntry, NoRoom, record_claim
from extender.cache.meta import same_spec
from extender.framework.session import Session
from extender.framework.status import Reason, Status
from extender.kube.errors import BindConflict, GiveUp, NotFound
from extender.model.job import JobInfo
from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo
from extender.model.task import ON_NODE, TaskInfo
from extender.state import ServiceState

__all__ = ["bind"]


@dataclass(frozen=True, slots=True)
class _Asked:
    """What the bind request asks: pod ``ns/name`` of ``uid`` onto node ``node_name``."""

    ns: str
    name: str
    uid: str
    node_name: str


@dataclass(frozen=True, slots=True)
class _Placement:
    """How the pod goes onto the node: the decision ``path`` (``spot``, ``inline``, ``quota``),
    whether the node passes, and for an inline placement the quota bound with the pod."""

    path: str
    status: Status
    quota: QuotaInfo | None = None


async def bind(state: ServiceState, ns: str, name: str, uid: str, node_name: str) -> str:
    """Bind pod ``ns/name`` (``uid``) to ``node_name``; returns the Error text ("" on success)."""
    # the assume below changes the cache: not while a binder cycle reads it off the loop
    await state.cache.gate.writable()
    asked = _Asked(ns, name, uid, node_name)
    task = _task_to_place(state, asked)
    if isinstance(task, str):
        return task
    ssn = state.session()
    node = ssn.node(node_name)
    if node is None:
        return f"node {node_name} is not in the scheduler's cache"
    placed = _place(ssn, task, node, asked)
    if isinstance(placed, str):
        return placed
    if not placed.status.ok:
        return f"cannot bind {ns}/{name} to {node_name}: {placed.status.message()}"
    return await _write(state, task, placed, asked)


def _task_to_place(state: ServiceState, asked: _Asked) -> TaskInfo | str:
    """The pod's task when it is to be placed now — else the answer without placing it: ``""``
    when it is already bound to the node asked for, or why it cannot be bound."""
    ns, name, uid, node_name = asked.ns, asked.name, asked.uid, asked.node_name
    done = state.recent_binds.get(uid)
    if done is not None:
        return "" if done == node_name else f"pod {ns}/{name} was already bound to {done}"
    if not state.synced():
        return "the scheduler's cache is not synced yet; the bind will be retried"
    if state.writer is None:
        return "this extender has no API access configured; cannot bind"
    cache = state.cache
    task = cache.task(uid)
    if task is None:
        return f"pod {ns}/{name} ({uid}) is not in the scheduler's cache; it may have been deleted"
    if task.node and task.status in ON_NODE and uid not in cache.assumed:
        if task.node == node_name:
            state.recent_binds[uid] = node_name
            return ""
        return f"pod {ns}/{name} is already bound to {task.node}, not {node_name}"
    return task


def _place(ssn: Session, task: TaskInfo, node: NodeInfo, asked: _Asked) -> _Placement | str:
    """The placement of ``task`` on ``node`` by its decision path, or why there is none."""
    ns, name, node_name = asked.ns, asked.name, asked.node_name
    if task.spot:
        return _Placement(SPOT, ssn.tn.predicate(task, node))
    job = ssn.job(task.job)
    quota = ssn.quota(task.quota) if task.quota else None
    if bind_action.is_inline(job, task) and (quota is None or not quota.node_name):
        return _place_inline(ssn, job, task, quota, asked)
    if quota is None:
        return f"pod {ns}/{name} holds no quota yet; the binder assigns one (see /diagnose/pod/{ns}/{name})"
    if quota.node_name != node_name:
        return f"quota {quota.name} of pod {ns}/{name} is bound to {quota.node_name or 'no node'}, not {node_name}"
    if quota.in_flight:
        return f"cannot bind {ns}/{name} yet: {bind_action.in_flight(quota).message()}; kube-scheduler will retry"
    s = bind_action.gang_gate(ssn, job, task)
    if s.ok:
        s = ssn.tn.predicate(task, node)
    return _Placement(QUOTA, s)


def _place_inline(
    ssn: Session, job: JobInfo | None, task: TaskInfo, quota: QuotaInfo | None, asked: _Asked
) -> _Placement | str:
    """A single-pod placement that binds its quota with it: the pod's unbound quota, or one of
    its queue chosen now (after the job's admission)."""
    ns, name, node_name = asked.ns, asked.name, asked.node_name
    if quota is None and job is not None:
        admission = ssn.stages.enqueueable(job)  # JobQueue / Queue admission holds here too
        if not admission.ok:
            return f"cannot bind {ns}/{name}: {admission.message()}"
        quota = bind_action.choose_inline_quota(ssn, task)
    if quota is None:
        return f"pod {ns}/{name}: no quota of its queue fits it; see /diagnose/pod/{ns}/{name}"
    outcome = bind_action.filter_inline(ssn, task, quota, [node_name])
    if node_name in outcome.passed:
        s = Status.merge([])
    else:
        why = outcome.failed.get(node_name) or outcome.unresolvable.get(node_name, "")
        s = Status.unschedulable(Reason.BIND_FAILED, why)
    return _Placement(INLINE, s, quota)


def _annotations(placed: _Placement, node_name: str) -> dict[str, str]:
    """The annotations the Binding stores on the pod, in this order: the inline quota's name, the
    quota's node (every placement but spot), the decision path."""
    annotations: dict[str, str] = {}
    if placed.quota is not None:
        annotations[wellknown.ANNO_QUOTA_NAME] = placed.quota.name
    if placed.path != SPOT:
        annotations[wellknown.ANNO_QUOTA_NODE] = node_name
    annotations[wellknown.ANNO_BIND_DECISION] = placed.path
    return annotations


async def _write(state: ServiceState, task: TaskInfo, placed: _Placement, asked: _Asked) -> str:
    """Assume the placement, then write the inline quota's binding and the pod's Binding; a
    failed write forgets the assumption."""
    ns, name, uid, node_name = asked.ns, asked.name, asked.uid, asked.node_name
    assert state.writer is not None
    cache = state.cache
    annotations = _annotations(placed, node_name)
    quota = placed.quota.name if placed.quota is not None else ""
    # assume before the first await — the pod, and an inline placement's quota binding:
    # concurrent binds of other pods, and the binder's next cycle, see this one's room taken
    try:
        if quota:  # first: the pod then counts inside its quota on the node, not as a stray
            cache.assume_binding(quota, node_name)
        cache.assume(uid, node_name)
    except (KeyError, RuntimeError) as exc:
        _forget(state, uid, quota)
        return f"cannot bind {ns}/{name}: {exc}"
    try:
        if placed.quota is not None:
            claim = _admission_claim(state, task, placed.quota, asked)
            error = await _bind_quota_inline(state, quota, node_name, claim)
            if error:
                await cache.gate.writable()
                _forget(state, uid, quota)
                return error
        await state.writer.bind_pod(ns, name, uid, node_name, annotations)
    except Exception as exc:
        await cache.gate.writable()
        _forget(state, uid, quota)
        return _bind_error(ns, name, node_name, exc)
    state.recent_binds[uid] = node_name
    return ""


def _forget(state: ServiceState, uid: str, quota: str) -> None:
    """The bind failed: forget what :func:`_write` assumed, the pod and its quota's binding (the
    caller has passed the cache's gate)."""
    state.cache.forget_binding(quota)
    state.cache.forget(uid)


def _admission_claim(state: ServiceState, task: TaskInfo, quota: QuotaInfo, asked: _Asked) -> ClaimEntry | None:
    """The pod's claim on ``quota``, recorded with the quota's binding when the quota was chosen
    here (None: the pod already holds it)."""
    if task.quota == quota.name:
        return None
    return ClaimEntry(
        uid=ADMISSION_PREFIX + asked.uid,
        namespace=asked.ns,
        name=asked.name,
        job=task.job,
        index=task.index,
        request=quota.governed(task.request),
        expires_at=state.cache.clock() + DEFAULT_CLAIM_TTL,
    )


async def _bind_quota_inline(state: ServiceState, quota: str, node: str, claim: ClaimEntry | None) -> str:
    """Write the quota's binding for an inline (single-pod) placement, unless someone was faster
    — with the pod's claim recorded in the same write when the quota was chosen here (room judged
    on the object as read: a webhook replica's claim recorded first wins)."""
    assert state.writer is not None
    moved: list[str] = []  # the node another writer bound it to
    changed: list[bool] = []  # its spec changed, or it is another object, since the room was judged
    known = state.cache.quotas.get(quota)
    judged = state.cache.quota_object(quota)

    def mutate(obj: dict[str, Any]) -> dict[str, Any] | None:
        moved.clear()  # what the last call (the one the writer acted on) found
        changed.clear()
        status = dict(obj.get("status") or {})
        current = status.get("nodeName") or ""
        if not same_spec(obj, judged):
            changed.append(True)
            return None
        if current and current != node:
            moved.append(current)
            return None
        if claim is not None:
            status = record_claim(obj, claim, now=state.cache.clock(), known=known) or status
        if current == node and status == (obj.get("status") or {}):
            return None
        status["nodeName"] = node
        status["phase"] = "QuotaBound"
        status["boundBy"] = wellknown.COMPONENT
        return status

    try:
        obj = await state.writer.update_quota_status(quota, mutate)
    except NoRoom as exc:
        return f"quota {quota} was claimed meanwhile ({exc}); kube-scheduler will retry"
    except Exception as exc:
        return f"binding quota {quota} to {node} failed: {exc}"
    if changed:
        return f"quota {quota} was changed or re-created meanwhile; kube-scheduler will retry"
    if moved:
        return f"quota {quota} was bound to {moved[0]} meanwhile; kube-scheduler will retry"
    if obj is not None:
        await state.cache.gate.writable()
        state.cache.on_quota_update(obj, obj)
    return ""


def _bind_error(ns: str, name: str, node: str, exc: Exception) -> str:
    """The Binding failed: say what happened and what happens next, for ``kubectl describe pod``."""
    if isinstance(exc, BindConflict):
        where = f"already bound to {exc.node}" if exc.node else "being deleted, or re-created with another UID"
        return f"binding {ns}/{name} to {node} refused: the pod is {where} ({exc})"
    if isinstance(exc, NotFound):
        return f"binding {ns}/{name} to {node} failed: the pod no longer exists (deleted while being bound)"
    if isinstance(exc, GiveUp):
        return (
            f"binding {ns}/{name} to {node} failed: the API server kept failing ({exc.last}); "
            "kube-scheduler retries the pod after its back-off"
        )
    return f"binding {ns}/{name} to {node} failed: {type(exc).__name__}: {exc}; kube-scheduler retries the pod"
