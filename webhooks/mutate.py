"""The admission decision for one pod (hop ①, seed 2.2 / 2.4): pure given its inputs.

Inputs: the parsed request, the cache (read through one ``snapshot()``), the policy, the
namespace labels, the in-flight registry (read, never written here), the configuration and
``now``. Output: a :class:`Decision` — the JSON Patch, warnings, audit annotations, and the
in-flight entry the caller records unless the request is a dry run.

Which pods: ``spec.schedulerName`` is ours, or the namespace is labelled
``scheduling.infini-ai.com/inject=enabled`` and the pod asks for no scheduler in particular and
requests GPUs, ``rdma/*`` or the spot resource (then ``schedulerName`` is set too). Pods that
already name a node are not scheduled by anyone and are left alone; spot pods get no quota (spot
bypasses quotas).

What it adds: ``task-index`` (from the frameworks' index labels, else the ordinal at the end of
the pod name) and ``quota-name``, chosen by the seed's four tiers:

1. **required** — the pod names its quota: kept if it exists and passes the TQ filters; if not,
   the pod is still admitted unchanged and the reason recorded (an explicit choice is never moved);
2. **reserved** — a live reservation this pod may inherit (``inherit-resource-from``, or the same
   job and task index);
3. **bound / static-bound** quotas of its queue, the node its siblings are on first;
4. **free** quotas of its queue or of queues sharing theirs (``sharedQueues``).

Tiers 2–4 are the real TQ pipeline (``place(ssn.tq, …)``: queue, room incl. reservations and
in-flight claims, pod→quota affinity, spec, node readiness; quotaaffinity's tier scores) over a
:class:`~extender.framework.session.Session` opened on the cache snapshot overlaid with the
admitted task and the in-flight entries (:func:`webhooks.overlay.overlay_snapshot`). The candidates are the queue's
quotas that pass a pre-filter (no room at all, or less room than asked, before reservations:
:func:`webhooks.candidates.room_class`), taken in the order of the policy's ``tq.node_order``
(ties: by name), the predicates run in that order until the first feasible quota
(:func:`webhooks.search.search`). With a :class:`~webhooks.candidates.CandidateIndex` that order is read from
heaps kept current by the cache's quota events — O(log n) per admission instead of scoring the
whole queue, with the same answer (the full scan remains for policies the index does not serve,
and for the reason when nothing fits). No quota (or a job a JobQueue holds back): the pod is
admitted without one, annotated with ``scheduling-reason``, and the binder loop takes over.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from extender import wellknown
from extender.cache import convert
from extender.cache.claims import ADMISSION_PREFIX, ClaimEntry
from extender.cache.convert import ConversionError, ConvertOptions
from extender.framework.pipeline import place
from extender.framework.policy import Policy
from extender.framework.session import Session, Snapshot
from extender.framework.status import Reason, Status
from extender.model.claimant import is_stand_in
from extender.model.job import JobInfo
from extender.model.quota import QuotaInfo
from extender.model.resources import QuantityError, Resource, gpu_summary
from extender.model.task import TaskInfo
from webhooks.candidates import CandidateIndex
from webhooks.inflight import InFlight, InFlightRegistry
from webhooks.namespaces import NamespaceLabels
from webhooks.overlay import overlay_snapshot
from webhooks.patch import Patch
from webhooks.review import AdmissionRequest
from webhooks.search import choose_quota
from webhooks.state import CacheView, WebhookConfig

__all__ = ["Decision", "Outcome", "Tier", "decide", "fingerprint"]

ANNOTATIONS: Final = ("metadata", "annotations")
SCHEDULER_NAME: Final = ("spec", "schedulerName")


class Tier(enum.StrEnum):
    REQUIRED = "required"
    RESERVED = "reserved"
    BOUND = "bound"
    STATIC = "static"
    FREE = "free"


class Outcome(enum.StrEnum):
    """What happened to the request (the ``outcome`` audit annotation and log field)."""

    IGNORED = "ignored"  # not a pod of ours: no patch
    ASSIGNED = "assigned"  # quota chosen (or the pod's own quota kept)
    NO_QUOTA = "no-quota"  # admitted without a quota, reason recorded
    NOT_SYNCED = "not-synced"  # cache not ready: no quota decision
    SPOT = "spot"  # spot pod: no quota by design
    BAD_OBJECT = "bad-object"  # the pod cannot be read: admitted unchanged with a status message


@dataclass(slots=True)
class Decision:
    outcome: Outcome
    ops: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    audit: dict[str, str] = field(default_factory=dict)
    quota: str = ""
    tier: Tier | None = None
    reason: str = ""  # why no quota (also written to the scheduling-reason annotation)
    message: str = ""  # a status message for the reply (bad input)
    claim: InFlight | None = None  # to record unless dryRun
    entry: ClaimEntry | None = None  # the claim to record on the quota (status.tasks) unless dryRun
    inherit_from: str = ""  # the admitted pod's inherit-resource-from (who it replaces)
    snapshot: Snapshot | None = None  # the cache snapshot decided on (to reconcile in-flight entries)
    note: str = ""  # why the request was ignored (logs)


def fingerprint(namespace: str, name: str, job: str, index: int | None) -> str:
    """Identifies one pod across re-invocations (the second call sees the first call's output)."""
    return f"{namespace}\x00{name}\x00{job}\x00{'' if index is None else index}"


# --- entry point -----------------------------------------------------------------------------
def decide(
    req: AdmissionRequest,
    *,
    cache: CacheView,
    policy: Policy,
    namespaces: NamespaceLabels,
    inflight: InFlightRegistry,
    config: WebhookConfig,
    now: float,
    synced: bool,
    exclude: frozenset[str] = frozenset(),
    no_quota: str = "",
    candidates: CandidateIndex | None = None,
) -> Decision:
    """``exclude``: quotas a claim was just refused on (another replica was faster): not offered.
    ``no_quota``: choose none, for this reason (no claim could be recorded). ``candidates``: the
    candidate index over ``cache`` (None: the full scan)."""
    if not req.is_pod_create or req.object is None:
        return Decision(Outcome.IGNORED, note=f"{req.operation} of {req.kind.kind or req.resource}: not a pod CREATE")
    obj = req.object
    meta: Mapping[str, Any] = obj["metadata"]
    spec: Mapping[str, Any] = obj.get("spec") or {}
    if spec.get("nodeName"):
        return Decision(Outcome.IGNORED, note="the pod names its node: nobody schedules it")
    namespace = req.namespace or _str(meta.get("namespace")) or "default"
    opts = cache.opts
    inject = _injects(obj, namespace, namespaces=namespaces, config=config, opts=opts)
    if isinstance(inject, Decision):
        return inject

    patch = Patch(obj)
    if inject:
        patch.set(SCHEDULER_NAME, config.scheduler_name)
    annotations = _str_map(meta.get("annotations"))
    labels_ = _str_map(meta.get("labels"))
    name = req.name or _str(meta.get("name"))
    index = convert.task_index(name, labels_, annotations)

    if not synced:
        return _finish(_not_synced(config), patch, index)

    try:
        task = _task(obj, req, namespace=namespace, name=name, index=index, opts=opts)
    except (ConversionError, QuantityError, ValueError) as exc:
        return _bad_object(f"the pod cannot be read: {exc}")
    if task.spot:
        return _finish(Decision(Outcome.SPOT, note="spot pod: no quota"), patch, index)
    d = _quota_decision(
        req,
        task,
        patch,
        annotations=annotations,
        namespace=namespace,
        index=index,
        cache=cache,
        policy=policy,
        inflight=inflight,
        config=config,
        now=now,
        exclude=exclude,
        no_quota=no_quota,
        candidates=candidates,
    )
    return _finish(d, patch, index)


def _quota_decision(
    req: AdmissionRequest,
    task: TaskInfo,
    patch: Patch,
    *,
    annotations: Mapping[str, str],
    namespace: str,
    index: int | None,
    cache: CacheView,
    policy: Policy,
    inflight: InFlightRegistry,
    config: WebhookConfig,
    now: float,
    exclude: frozenset[str],
    no_quota: str,
    candidates: CandidateIndex | None,
) -> Decision:
    """The quota of a (readable, non-spot) pod of ours, decided on a session over the cache
    snapshot overlaid with the pod and the in-flight entries; its annotations go into ``patch``,
    and the claims to record (a quota chosen) into the Decision."""
    required = annotations.get(wellknown.ANNO_REQUIRED_QUOTA) or annotations.get(wellknown.ANNO_QUOTA_NAME, "")
    fp = fingerprint(namespace, task.name, task.job, index)
    snap = cache.snapshot(now)
    live = inflight.live(snap.quotas, now)
    again = _reinvoked(required, fp, task, annotations, live)
    view = overlay_snapshot(snap, task, live, (required, fp) if again else None, cache.opts)
    ssn = Session(view, policy)
    job = ssn.job(task.job)
    assert job is not None  # the overlay put it there

    d = _choose_tier(ssn, task, job, required=required, no_quota=no_quota, exclude=exclude, now=now, index=candidates)
    d.snapshot = snap
    d.inherit_from = task.inherit_from
    # a re-invocation sees this webhook's own earlier answer in quota-name: not the creator's choice
    own = again and not annotations.get(wellknown.ANNO_REQUIRED_QUOTA)
    if required and not own:
        # the creator's choice is kept in required-quota; quota-name only while it holds room
        patch.set_entry(ANNOTATIONS, wellknown.ANNO_REQUIRED_QUOTA, required)
        if not d.quota:
            patch.remove_entry(ANNOTATIONS, wellknown.ANNO_QUOTA_NAME)
    if d.quota:
        _annotate_quota(d, patch)
        quota = ssn.quota(d.quota)
        if quota is not None:
            # a re-invocation keeps the entry its first pass recorded and named on the pod
            named = annotations.get(wellknown.ANNO_CLAIM_ENTRY, "") if again else ""
            d.entry, d.claim = _claims(
                quota,
                task,
                job,
                uid=named or ADMISSION_PREFIX + req.uid,
                namespace=namespace,
                index=index,
                fingerprint=fp,
                again=again,
                snap=snap,
                inflight=inflight,
                now=now,
            )
            # the pod names the entry, so that its claim accounts for exactly this one on arrival
            patch.set_entry(ANNOTATIONS, wellknown.ANNO_CLAIM_ENTRY, d.entry.uid)
            idle = "" if required else _gpus_kept_idle(task, quota, ssn.gpu_resources)
            if idle:
                d.warnings.append(
                    f"{config.scheduler_name}: the pod asks for no GPU, yet its quota {quota.name} holds "
                    f"{idle}: they stay idle while it runs; a quota of queue {job.queue or '(none)'} "
                    "sized to such pods keeps them free"
                )
    else:
        _annotate_no_quota(d, patch, config, required)
    d.audit["outcome"] = str(d.outcome)
    return d


def _gpus_kept_idle(task: TaskInfo, quota: QuotaInfo, gpu_resources: Iterable[str]) -> str:
    """The GPUs ``quota`` holds that a pod asking for no GPU at all keeps from every other pod
    while it runs (an MPIJob launcher given a worker's quota), e.g. ``8 nvidia.com/gpu``; "" when
    the pod asks for a GPU or the quota holds none."""
    gpus = tuple(gpu_resources)
    if any(task.request.q.get(r, 0) for r in gpus):
        return ""
    return gpu_summary(quota.request, gpus)


def _reinvoked(
    required: str, fp: str, task: TaskInfo, annotations: Mapping[str, str], live: Iterable[InFlight]
) -> bool:
    """This admission is the webhook called again on its own answer (``reinvocationPolicy:
    IfNeeded``): the pod names the quota of one of this replica's in-flight entries with its
    fingerprint. Pods of one ``generateName`` template share their stand-in name, hence their
    fingerprint; for them it also takes the ``claim-entry`` this webhook wrote — a sibling
    created from the same template, naming the same quota, is a new pod."""
    if not required or not any(e.quota == required and e.fingerprint == fp for e in live):
        return False
    return not is_stand_in(task.name) or bool(annotations.get(wellknown.ANNO_CLAIM_ENTRY))


def _injects(
    obj: Mapping[str, Any], namespace: str, *, namespaces: NamespaceLabels, config: WebhookConfig, opts: ConvertOptions
) -> bool | Decision:
    """Whether the pod is ours: False when it names our scheduler, True when it is ours once
    ``schedulerName`` is set (an injected namespace, no scheduler in particular, GPUs or RDMA
    asked for) — else the Decision that leaves it alone (or says it cannot be read)."""
    spec: Mapping[str, Any] = obj.get("spec") or {}
    scheduler = _str(spec.get("schedulerName"))
    if scheduler == config.scheduler_name:
        return False
    if scheduler not in config.injectable_schedulers:
        return Decision(Outcome.IGNORED, note=f"the pod asks for scheduler {scheduler!r}")
    labels = namespaces.labels(namespace)
    if labels is None or labels.get(config.inject_label) != config.inject_value:
        return Decision(Outcome.IGNORED, note=f"scheduler {scheduler!r}, namespace {namespace} not injected")
    try:
        request = convert.pod_request(obj)
    except (ConversionError, QuantityError) as exc:
        return _bad_object(f"the pod's resource requests cannot be read: {exc}")
    if not _wants_accelerators(request, config, opts):
        return Decision(Outcome.IGNORED, note="injected namespace, but the pod requests no GPU or RDMA")
    return True


def _not_synced(config: WebhookConfig) -> Decision:
    """The cache is still syncing: admitted without a quota decision, with a warning."""
    d = Decision(Outcome.NOT_SYNCED)
    d.warnings.append(
        f"{config.scheduler_name}: the scheduler's cache is still syncing; no quota was chosen at "
        "admission, the binder loop will assign one"
    )
    d.audit["outcome"] = str(d.outcome)
    return d


def _choose_tier(
    ssn: Session,
    task: TaskInfo,
    job: JobInfo,
    *,
    required: str,
    no_quota: str,
    exclude: frozenset[str],
    now: float,
    index: CandidateIndex | None,
) -> Decision:
    """The decision by tier: none when ``no_quota`` says why, the required tier when the pod
    names its quota (a quota just refused counts as full), else the other tiers."""
    if no_quota:
        return (
            _required_full(required, no_quota)
            if required
            else Decision(Outcome.NO_QUOTA, reason=Status.unschedulable(Reason.NO_QUOTA, no_quota).message())
        )
    if required:
        return _choose_required(ssn, task, required) if required not in exclude else _required_full(required, "")
    return _choose(ssn, task, job, now=now, exclude=exclude, index=index)


def _claims(
    quota: QuotaInfo,
    task: TaskInfo,
    job: JobInfo,
    *,
    uid: str,
    namespace: str,
    index: int | None,
    fingerprint: str,
    again: bool,
    snap: Snapshot,
    inflight: InFlightRegistry,
    now: float,
) -> tuple[ClaimEntry, InFlight | None]:
    """The two records of the pod's claim on the chosen ``quota``: the entry recorded on the
    quota (``status.tasks``, with ``uid``) and the in-flight entry — none when this pod's entry
    is already in flight (``again``: a re-invocation)."""
    entry = ClaimEntry(
        uid=uid,
        namespace=namespace,
        name=task.name,
        job=task.job,
        index=index,
        request=quota.governed(task.request),
        expires_at=now + inflight.ttl,
    )
    if again:
        return entry, None
    claim = inflight.new_entry(
        quota=snap.quotas.get(quota.name) or quota,
        namespace=namespace,
        name=task.name,
        job=task.job,
        queue=job.queue,
        index=index,
        request=task.request,
        fingerprint=fingerprint,
        now=now,
    )
    return entry, claim


def _annotate_quota(d: Decision, patch: Patch) -> None:
    """A quota was chosen: it goes into ``quota-name`` (any ``scheduling-reason`` is removed) and
    the audit annotations."""
    patch.set_entry(ANNOTATIONS, wellknown.ANNO_QUOTA_NAME, d.quota)
    patch.remove_entry(ANNOTATIONS, wellknown.ANNO_SCHEDULING_REASON)
    d.audit["quota"] = d.quota
    d.audit["tier"] = str(d.tier)


def _annotate_no_quota(d: Decision, patch: Patch, config: WebhookConfig, required: str) -> None:
    """No quota: the (clipped) reason goes into ``scheduling-reason``, the audit annotations and
    a warning saying the binder loop takes over."""
    reason = _clip(d.reason, config.max_reason_chars)
    d.reason = reason
    patch.set_entry(ANNOTATIONS, wellknown.ANNO_SCHEDULING_REASON, reason)
    d.audit["scheduling-reason"] = reason
    what = f"waits for its named quota {required}: " if required else "no quota at admission: "
    d.warnings.append(f"{config.scheduler_name}: {what}{reason}; the binder loop takes over")


def _finish(d: Decision, patch: Patch, index: int | None) -> Decision:
    if index is not None:
        patch.set_entry(ANNOTATIONS, wellknown.ANNO_TASK_INDEX, str(index))
    d.ops = patch.ops
    return d


# --- the tiers -------------------------------------------------------------------------------
def _choose_required(ssn: Session, task: TaskInfo, required: str) -> Decision:
    """The required tier: the named quota or nothing — the pod then waits for that quota, never
    another (``required-quota`` keeps the choice; the binder assigns it once it has room)."""
    quota = ssn.quota(required)
    if quota is None:
        return _required_full(required, "it does not exist yet")
    job = ssn.job(task.job)
    if job is not None:
        status = ssn.stages.enqueueable(job)
        if not status.ok:
            return _required_full(required, f"the job may not start yet: {status.message()}")
    result = place(ssn.tq, task, [quota])
    if result.choice is None:
        return _required_full(required, result.status.message())
    return Decision(Outcome.ASSIGNED, quota=quota.name, tier=Tier.REQUIRED)


def _required_full(required: str, why: str) -> Decision:
    detail = f"pod names quota {required}; waiting for room on it" + (f": {why}" if why else " (claimed meanwhile)")
    return Decision(Outcome.NO_QUOTA, reason=Status.unschedulable(Reason.WAITING_FOR_NAMED_QUOTA, detail).message())


def _choose(
    ssn: Session, task: TaskInfo, job: JobInfo, *, now: float, exclude: frozenset[str], index: CandidateIndex | None
) -> Decision:
    """Tiers 2–4: the quota of the job's queue the TQ pipeline prefers, or why there is none."""
    found = choose_quota(ssn, task, job, exclude=exclude, index=index)
    if isinstance(found, str):
        return Decision(Outcome.NO_QUOTA, reason=found)
    return Decision(Outcome.ASSIGNED, quota=found.name, tier=_tier(found, task, now))


def _tier(quota: QuotaInfo, task: TaskInfo, now: float) -> Tier:
    """Which tier the chosen quota belongs to (for audit and metrics; the scores decided)."""
    if quota.reservation_for(task, now) is not None:
        return Tier.RESERVED
    if quota.node_name:
        return Tier.BOUND
    if quota.static_bind_node or quota.static_bind_status is not None:
        return Tier.STATIC
    return Tier.FREE


# --- the admitted pod as a task --------------------------------------------------------------
def _task(
    obj: Mapping[str, Any], req: AdmissionRequest, *, namespace: str, name: str, index: int | None, opts: ConvertOptions
) -> TaskInfo:
    """``convert.task_from_api`` on the object as admitted: a pod from ``generateName`` has no name
    and no pod has a uid yet, so both are stood in for (``admission:<request uid>``, and the
    ``generateName`` prefix followed by ``*``); the task index is the one computed from the real
    name (or labels and annotations only)."""
    meta = dict(obj["metadata"])
    meta["uid"] = _str(meta.get("uid")) or f"admission:{req.uid}"
    meta["name"] = name or (_str(meta.get("generateName")) + "*")
    meta["namespace"] = namespace
    task = convert.task_from_api({**obj, "metadata": meta}, opts)
    task.index = index
    return task


def _wants_accelerators(request: Resource, config: WebhookConfig, opts: ConvertOptions) -> bool:
    for k, v in request.q.items():
        if v > 0 and (k in config.gpu_resources or k.startswith(opts.rdma_prefix) or k == opts.spot_resource):
            return True
    return False


def _bad_object(message: str) -> Decision:
    return Decision(Outcome.BAD_OBJECT, message=message, warnings=[message], audit={"outcome": str(Outcome.BAD_OBJECT)})


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _str_map(raw: object) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): str(v) for k, v in raw.items()}


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
