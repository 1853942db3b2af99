"""``bind`` — hop ③, pod → node, per pod, as kube-scheduler asks (seed 2.6 bind, DESIGN §6).

Pure decisions over a session; the extender's HTTP verbs call them and perform the writes.

* A pod whose quota is bound: only the quota's node can pass, after the TN re-check (node
  Ready, taints, ``idle ≥ request``, storage…); every other candidate is unresolvable with a
  reason naming the quota and its node. When evicting the pods ``/preempt`` may answer
  there (:func:`extender.framework.victims.may_go`) would free the quota's node, the node is
  *resolvable* (``FailedNodes``) so that kube-scheduler's preemption runs.
* A pod whose quota is not bound yet: nothing passes, and the reason says what it waits for
  (the binder's verdict for its job when there is one: ``waiting for gang: 3/4 quotas bound``,
  ``quota q-train-1 not bound: no zone holds 4×1 GPU``).
* A single-pod job without topology whose quota is not bound (or that has no quota yet: the TQ
  pipeline picks one inline): the QN pipeline runs over the candidates right here — the
  feasible nodes pass, prioritize returns their QN scores scaled to 0–10, and bind binds quota
  and pod together. Such a job need not wait for the next binder cycle.
* A spot pod: the TN pipeline (``backfill``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from extender.actions import backfill
from extender.actions.outcome import INLINE, FilterOutcome
from extender.framework.pipeline import place
from extender.framework.session import FitStage, JobVerdict, Session
from extender.framework.status import SUCCESS, Code, Failure, Prefixed, Reason, Status
from extender.model.job import JobInfo
from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo
from extender.model.task import TaskInfo
from extender.plugins.gang import quotas_bound

NAME: Final = "bind"


def is_inline(job: JobInfo | None, task: TaskInfo) -> bool:
    """Single-pod job without topology: placed by the extender itself, quota and pod together."""
    if job is None or task.spot:
        return False
    return not job.topology and len([t for t in job.tasks.values() if t.is_alive()]) <= 1 and job.min_member <= 1


def waiting_reason(ssn: Session, task: TaskInfo, quota: QuotaInfo | None, verdict: JobVerdict | None) -> Status:
    """Why a pod whose quota is not bound cannot pass anywhere yet."""
    if quota is None:
        if verdict is not None:
            return Status.unresolvable(verdict.status.reason or Reason.NO_QUOTA, _verdict_text(verdict))
        return Status.unresolvable(Reason.NO_QUOTA, "waiting for the binder to assign a quota")
    if verdict is not None:
        if verdict.elsewhere is not None:  # the nodes that refuse on their own tell it themselves
            prefix = verdict.status.prefix if isinstance(verdict.status, Prefixed) else ""
            verdict = replace(verdict, status=Prefixed.of(verdict.elsewhere, prefix))
        return Status.unresolvable(
            verdict.status.reason or Reason.QUOTA_NOT_BOUND, f"quota {quota.name} not bound: {_verdict_text(verdict)}"
        )
    return Status.unresolvable(Reason.QUOTA_NOT_BOUND, f"quota {quota.name} not bound yet: waiting for the binder")


_NAMES_NODES = frozenset({FitStage.NODE_PREDICATES, FitStage.ZONE_SELECTION})


def node_waiting_reasons(quota: QuotaInfo, verdict: JobVerdict, candidates: Sequence[str]) -> dict[str, str]:
    """Per candidate the binder judged, why the job's quota could not be bound there, for a pod
    whose ``quota`` is not bound: ``NodeNotReady(quota q-train-1 not bound)`` on the node
    that is not Ready, ``InsufficientQuotaIdle(…)`` on the full one — kube-scheduler counts the
    nodes per message, so each node must tell its own reason, not the job summary's first one
    (the rest keep :func:`waiting_reason`). A verdict of the node-predicates stage names nodes, and
    one of zone selection names those refusing the gang on their own; its ``quota`` may be
    another quota of the pod's job (a gang is bound all at once)."""
    per_node = verdict.per_node
    if verdict.stage not in _NAMES_NODES or not per_node:
        return {}
    if verdict.quota and verdict.quota != quota.name:
        prefix = f"quota {quota.name} not bound: its job's quota {verdict.quota}"
    else:
        prefix = f"quota {quota.name} not bound"
    text: dict[tuple[Reason, str], str] = {}  # one message per distinct reason, not per node
    out: dict[str, str] = {}
    get = per_node.get
    for name in candidates:
        status = get(name)
        failures = status.failures if status is not None else ()
        if not failures:  # not judged, or judged fit
            continue
        first = failures[0]
        # NodeNotReady(n1) on n1: the node says it, and alike nodes share one message
        detail = "" if first.detail == name else first.detail
        if len(failures) > 1:
            out[name] = _lead(first.reason, detail, prefix, failures[1:])
            continue
        key = (first.reason, detail)
        message = text.get(key)
        if message is None:
            message = text[key] = _lead(first.reason, detail, prefix, ())
        out[name] = message
    return out


def _lead(reason: Reason, detail: str, prefix: str, others: Sequence[Failure]) -> str:
    """``Reason(prefix: detail)`` then the other failures, as :meth:`Status.message` writes them."""
    first = Failure(reason, f"{prefix}: {detail}" if detail else prefix)
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (first, *others)).message()


def _verdict_text(v: JobVerdict) -> str:
    """The job verdict's first failure in words, after what already went right when the verdict
    says it (a gang that runs while the rest waits: ``placed 3 of 4 (minMember 2); 1 waits: …``)."""
    f = v.status.failures[0] if v.status.failures else None
    if f is None:
        return v.status.message()
    text = f"waiting for gang: {f.detail}" if f.reason is Reason.WAITING_FOR_GANG else f.detail or f.reason.value
    return f"{v.status.prefix}: {text}" if isinstance(v.status, Prefixed) else text


def choose_inline_quota(ssn: Session, task: TaskInfo) -> QuotaInfo | None:
    job = ssn.job(task.job)
    if job is None:
        return None
    if task.required_quota:  # the quota its creator named, or none
        named = ssn.quota(task.required_quota)
        candidates = [named] if named is not None else []
    else:
        candidates = list(ssn.quotas_of_queue(job.queue))
    result = place(ssn.tq, task, candidates)
    return result.choice


@dataclass(frozen=True, slots=True)
class Rest:
    """Every candidate but ``skip`` fails with the same ``message`` (``FailedAndUnresolvableNodes``).

    A pod whose quota is bound may run on one node: the other N−1 candidates all fail the same
    way. Kept as this one entry instead of an N-entry dict, the extender serialises it straight
    from the candidate list (building a 5,000-entry dict per request was the filter's largest
    cost); :func:`expand` gives the dict to whoever wants one."""

    message: str
    skip: str = ""


def position(candidates: Sequence[str], name: str) -> int:
    """Index of the first ``name`` in ``candidates``, −1 if absent (one scan, in C for a list)."""
    try:
        return candidates.index(name)
    except ValueError:
        return -1


def expand(out: FilterOutcome, rest: Rest | None, candidates: Sequence[str]) -> FilterOutcome:
    """``out`` with ``rest`` written into its ``unresolvable`` map."""
    if rest is not None:
        merged = dict.fromkeys(candidates, rest.message)
        merged.pop(rest.skip, None)
        merged.update(out.unresolvable)
        out.unresolvable = merged
    return out


def filter_quota_pod(
    ssn: Session,
    task: TaskInfo,
    candidates: Sequence[str],
    verdicts: Mapping[str, JobVerdict],
) -> FilterOutcome:
    return expand(*decide_pod(ssn, task, candidates, verdicts), candidates)


def decide_pod(
    ssn: Session,
    task: TaskInfo,
    candidates: Sequence[str],
    verdicts: Mapping[str, JobVerdict],
) -> tuple[FilterOutcome, Rest | None]:
    """The filter decision for a pod of ours: (outcome, the candidates that all fail alike)."""
    job = ssn.job(task.job)
    out = FilterOutcome()
    if task.spot:
        return backfill.filter_spot_pod(ssn, task, candidates), None
    quota = ssn.quota(task.quota) if task.quota else None
    chosen_inline = False
    if quota is None and not task.quota and is_inline(job, task):
        assert job is not None
        admission = ssn.stages.enqueueable(job)  # JobQueue / Queue admission: no path bypasses it
        if not admission.ok:
            return out, Rest(admission.message())
        quota = choose_inline_quota(ssn, task)
        chosen_inline = quota is not None
    if quota is not None and quota.in_flight:  # hop ③ waits for the API to show the binding
        out.quota = quota.name
        return out, Rest(in_flight(quota).message())
    if quota is not None and not quota.node_name and is_inline(job, task):
        return filter_inline(ssn, task, quota, candidates), None
    if quota is None or not quota.node_name:
        verdict = verdicts.get(task.job)
        why = waiting_reason(ssn, task, quota, verdict)
        out.quota = quota.name if quota is not None else ""
        if quota is not None and verdict is not None:
            out.unresolvable.update(node_waiting_reasons(quota, verdict, candidates))
        return out, Rest(why.message())
    out.quota = quota.name
    gang = gang_gate(ssn, job, task)
    if not gang.ok:
        return out, Rest(gang.message())
    home = quota.node_name
    elsewhere = Status.unresolvable(Reason.QUOTA_BOUND_ELSEWHERE, f"quota {quota.name} is bound to {home}")
    at = position(candidates, home)
    if at >= 0:
        node = ssn.node(home)
        if node is None:
            out.unresolvable[home] = Status.unresolvable(Reason.NODE_NOT_FOUND, home).message()
        elif chosen_inline:
            # a bound quota the pod does not claim yet (bind claims it): the TN checks without
            # the quota's own, which needs the claim — idle ≥ request included
            out.put(home, _tn_without_quota_check(ssn, task, node))
        else:
            out.put(home, ssn.tn.predicate(task, node))
    return out, Rest(elsewhere.message(), skip=home)


def in_flight(quota: QuotaInfo) -> Status:
    """Why a pod waits whose quota's binding is being written: no pod goes to a node before the
    API shows its quota bound there (invariant 2 at every instant on the API objects)."""
    return Status.unresolvable(
        Reason.QUOTA_NOT_BOUND, f"quota {quota.name}'s binding to {quota.node_name} is being written"
    )


def gang_gate(ssn: Session, job: JobInfo | None, task: TaskInfo) -> Status:
    """Hop ③ of a gang is all or nothing: a pod passes only when at least ``minMember`` of its
    job's tasks exist and hold quotas bound to nodes — however they got bound (statically, by
    another controller, by the binder), the API showing the binding — and a pod of a strict-order
    job only once every lower rank holds a bound quota too. Else ``GangNotReady(3/4 quotas
    bound)``."""
    if job is None or (job.min_member <= 1 and not job.strict_order):
        return SUCCESS
    bound = quotas_bound(ssn, job, written=True)
    if bound < job.min_member:
        return Status.unresolvable(Reason.GANG_NOT_READY, f"{bound}/{job.min_member} quotas bound")
    if job.strict_order and task.index is not None:
        for t in job.tasks.values():
            if t.index is None or t.index >= task.index or not t.is_alive():
                continue
            q = ssn.quota(t.quota) if t.quota else None
            if q is None or not q.node_name or q.in_flight:
                return Status.unresolvable(
                    Reason.GANG_NOT_READY, f"rank {task.index} waits for rank {t.index}'s quota to be bound"
                )
    return SUCCESS


def filter_inline(ssn: Session, task: TaskInfo, quota: QuotaInfo, candidates: Sequence[str]) -> FilterOutcome:
    """QN (can the quota bind there) AND TN (can the pod run there) over the candidates."""
    out = FilterOutcome(path=INLINE, quota=quota.name)
    nodes: list[NodeInfo] = []
    for name in candidates:
        node = ssn.node(name)
        if node is None:
            out.unresolvable[name] = Status.unresolvable(Reason.NODE_NOT_FOUND, name).message()
            continue
        nodes.append(node)
    pre = ssn.qn.pre_predicate(quota)
    if not pre.ok:
        for n in nodes:
            out.put(n.name, pre)
        return out
    feasible: list[NodeInfo] = []
    for node in nodes:
        s = ssn.qn.select(quota, node)
        if s.ok:
            s = ssn.qn.predicate(quota, node)
        if s.ok:
            s = _tn_without_quota_check(ssn, task, node)
        if s.ok:
            feasible.append(node)
        out.put(node.name, s)
    if feasible and ssn.qn.has_scores:
        batch = ssn.qn.batch_node_order(quota, feasible)
        for node in feasible:
            out.scores[node.name] = ssn.qn.node_order(quota, node) + batch.get(node.name, 0.0)
    return out


def _tn_without_quota_check(ssn: Session, task: TaskInfo, node: NodeInfo) -> Status:
    """The TN predicates for a pod whose quota is not bound yet (it will be bound to ``node``)."""
    short = task.request.shortfalls(node.idle)
    if short:
        return Status.unresolvable(Reason.INSUFFICIENT_IDLE, ", ".join(map(str, short)))
    # every TN predicate except the quota's own "bound to this node" check
    probe = task.clone()
    probe.quota = ""
    return ssn.tn.predicate(probe, node)


def scale_scores(scores: Mapping[str, float], names: Sequence[str]) -> dict[str, int]:
    """Raw scores → the extender's 0..10 (MaxExtenderPriority), min-max over the candidates."""
    if not scores:
        return dict.fromkeys(names, 0)
    lo = min(scores.values())
    hi = max(scores.values())
    out: dict[str, int] = {}
    for n in names:
        s = scores.get(n)
        if s is None:
            out[n] = 0
        elif hi == lo:
            out[n] = 10
        else:
            out[n] = round(10 * (s - lo) / (hi - lo))
    return out
