"""The custom resources' translation into the domain model: Quota, PodGroup, Queue, JobQueue.

The same rules as :mod:`extender.cache.convert` (which also holds the built-in kinds, Node and
Pod): every function takes the object exactly as the API serves it and raises
:class:`~extender.cache.convert.ConversionError`, naming the object and the field, for anything
the model cannot represent. A Quota's claims are not read here (the cache derives them from
live pods); its persisted ``reservedTasks`` are, and :func:`reserved_to_api` writes one back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.cache.convert import (
    ConversionError,
    ConvertOptions,
    describe,
    format_time,
    metadata_of,
    parse_time,
    read_node_affinity,
    read_resources,
    read_tolerations,
    str_map,
)
from extender.cache.tierlimit import TierLimit, podgroup_tier_limit
from extender.model.job import JobQueueInfo, QueueInfo
from extender.model.quota import (
    PodQuotaAffinity,
    QuotaAffinityTerm,
    QuotaInfo,
    QuotaPhase,
    ReservedTask,
    StaticBindStatus,
)
from extender.model.resources import format_quantity
from extender.model.selectors import LabelSelector, SelectorError
from extender.model.task import job_key
from extender.model.topology import gpu_spec_code

__all__ = [
    "PodGroupSpec",
    "jobqueue_from_api",
    "podgroup_from_api",
    "queue_from_api",
    "quota_from_api",
    "quota_recorded_hold",
    "reserved_to_api",
]


# --- quotas ----------------------------------------------------------------------------------
def _affinity_terms(obj: Mapping[str, Any], raw: object, where: str) -> tuple[QuotaAffinityTerm, ...]:
    terms = []
    for t in raw if isinstance(raw, list) else []:
        if not isinstance(t, Mapping):
            continue
        try:
            sel = LabelSelector.from_api(t["labelSelector"]) if t.get("labelSelector") else None
        except SelectorError as exc:
            raise ConversionError(f"{describe(obj)}: {where}: {exc}") from None
        terms.append(QuotaAffinityTerm(tuple(str(n) for n in t.get("quotaNames") or ()), sel))
    return tuple(terms)


def quota_from_api(obj: Mapping[str, Any], opts: ConvertOptions) -> QuotaInfo:
    """A Quota's spec and its persisted status. Claims (``status.tasks``) are *not* taken from
    the object: they are derived from live pods by the cache."""
    meta = metadata_of(obj)
    name = str(meta.get("name") or "")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    request = read_resources(obj, spec.get("request"), "spec.request")
    affinity = spec.get("affinity") or {}
    pod_aff = affinity.get("podAffinity")
    pod_affinity = None
    if isinstance(pod_aff, Mapping):
        try:
            pod_affinity = PodQuotaAffinity(
                LabelSelector.from_api(pod_aff.get("podSelector")),
                tuple(str(n) for n in pod_aff.get("namespaces") or ()),
            )
        except SelectorError as exc:
            raise ConversionError(f"{describe(obj)}: affinity.podAffinity: {exc}") from None
    node_selector = str_map(spec.get("nodeSelector"))
    sbs = status.get("staticBindStatus")
    static = (
        StaticBindStatus(str(sbs.get("nodeName") or ""), bool(sbs.get("bound")))
        if isinstance(sbs, Mapping) and sbs.get("nodeName")
        else None
    )
    phase = QuotaPhase.BOUND if status.get("phase") == QuotaPhase.BOUND.value else QuotaPhase.EMPTY
    node_name = str(status.get("nodeName") or "")
    if node_name and phase is QuotaPhase.EMPTY:
        phase = QuotaPhase.BOUND  # nodeName is the truth (DESIGN §1)
    if not node_name:
        phase = QuotaPhase.EMPTY
    reserved = []
    for r in status.get("reservedTasks") or ():
        if not isinstance(r, Mapping):
            continue
        reserved.append(
            ReservedTask(
                job=str(r.get("job") or ""),
                index=int(r["taskIndex"]) if isinstance(r.get("taskIndex"), int) else None,
                namespace=str(r.get("namespace") or ""),
                pod_name=str(r.get("podName") or ""),
                pod_uid=str(r.get("podUID") or ""),
                reason=str(r.get("reason") or "Deleted"),
                expires_at=parse_time(r.get("expiresAt")),
                request=read_resources(obj, r.get("request"), "status.reservedTasks.request"),
            )
        )
    quota = QuotaInfo(
        name=name,
        queue=str(spec.get("queueName") or opts.default_queue),
        request=request,
        labels=str_map(meta.get("labels")),
        node_selector=node_selector,
        tolerations=read_tolerations(obj, spec.get("tolerations")),
        node_affinity=read_node_affinity(obj, affinity.get("nodeAffinity")),
        quota_affinity=_affinity_terms(obj, affinity.get("quotaAffinity"), "affinity.quotaAffinity"),
        quota_anti_affinity=_affinity_terms(obj, affinity.get("quotaAntiAffinity"), "affinity.quotaAntiAffinity"),
        pod_affinity=pod_affinity,
        shared_queues=tuple(str(q) for q in spec.get("sharedQueues") or ()),
        static_bind_node=str(spec.get("staticBindNode") or ""),
        bound_by=str(status.get("boundBy") or "") if node_name else "",
        spec=gpu_spec_code(node_selector, opts.gpu_spec_labels),
        created=parse_time(meta.get("creationTimestamp")),
        resource_version=str(meta.get("resourceVersion") or ""),
        generation=int(meta.get("generation") or 0),
        phase=phase,
        node_name=node_name,
        shadow=read_resources(obj, spec.get("shadowResource"), "spec.shadowResource"),
        static_bind_status=static,
        reserved=tuple(reserved),
        reason=str(status.get("reason") or ""),
        message=str(status.get("message") or ""),
    )
    quota.placement_key()  # built here, as the informer delivers the quota: not in a cycle
    return quota


# --- PodGroups, queues, job queues ----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PodGroupSpec:
    key: str
    namespace: str
    name: str
    min_member: int
    queue: str
    priority_class: str
    labels: dict[str, str] = field(default_factory=dict)
    topology_enabled: bool | None = None
    strict_order: bool = False
    affinity_key: str = ""
    tier_limit: TierLimit | None = None  # spec.topology / spec.networkTopology highestTierAllowed + mode
    created: float = 0.0
    resource_version: str = ""
    phase: str = ""
    recorded_hold: tuple[tuple[str, ...], float] | None = None  # status.hold: (nodes, since)


def _recorded_hold(status: Mapping[str, Any]) -> tuple[tuple[str, ...], float] | None:
    """``status.hold`` as (nodes, since), or None when there is none (or it cannot be read: the
    hold then lives in the leader's memory only, as before it was recorded)."""
    hold = status.get("hold")
    if not isinstance(hold, Mapping):
        return None
    nodes = hold.get("nodes")
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, str) and n for n in nodes):
        return None
    since = parse_time(hold.get("since"))
    return (tuple(nodes), since) if since > 0 else None


def quota_recorded_hold(obj: Mapping[str, Any]) -> tuple[str, tuple[str, ...], float] | None:
    """A Quota's ``status.hold`` — the hold of the job of one pod that claims it — as (job,
    nodes, since); None when there is none or it cannot be read (as for a PodGroup's)."""
    status = obj.get("status")
    if not isinstance(status, Mapping):
        return None
    hold = status.get("hold")
    job = hold.get("job") if isinstance(hold, Mapping) else None
    if not isinstance(job, str) or "/" not in job:
        return None
    read = _recorded_hold(status)
    return (job, *read) if read is not None else None


def podgroup_from_api(obj: Mapping[str, Any], opts: ConvertOptions) -> PodGroupSpec:
    meta = metadata_of(obj)
    spec = obj.get("spec") or {}
    try:
        tier_limit = podgroup_tier_limit(spec)
    except ValueError as exc:
        raise ConversionError(f"{describe(obj)}: {exc}") from None
    topo = spec.get("topology") or {}
    ns = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    mm = spec.get("minMember", 1)
    if not isinstance(mm, int) or mm < 1:
        raise ConversionError(f"{describe(obj)}: spec.minMember must be a positive integer, got {mm!r}")
    enabled = topo.get("enabled")
    status = obj.get("status") or {}
    return PodGroupSpec(
        key=job_key(ns, name),
        namespace=ns,
        name=name,
        min_member=mm,
        queue=str(spec.get("queue") or opts.default_queue),
        priority_class=str(spec.get("priorityClassName") or ""),
        labels=str_map(meta.get("labels")),
        topology_enabled=bool(enabled) if isinstance(enabled, bool) else None,
        strict_order=bool(topo.get("strictOrder")),
        affinity_key=str(topo.get("affinityKey") or ""),
        tier_limit=tier_limit,
        created=parse_time(meta.get("creationTimestamp")),
        resource_version=str(meta.get("resourceVersion") or ""),
        phase=str(status.get("phase") or ""),
        recorded_hold=_recorded_hold(status),
    )


def queue_from_api(obj: Mapping[str, Any], opts: ConvertOptions) -> QueueInfo:
    meta = metadata_of(obj)
    spec = obj.get("spec") or {}
    cap = spec.get("capability")
    weight = spec.get("weight", 1)
    return QueueInfo(
        name=str(meta.get("name") or ""),
        weight=weight if isinstance(weight, int) and weight > 0 else 1,
        capability=read_resources(obj, cap, "spec.capability") if cap else None,
        reclaimable=spec.get("reclaimable", True) is not False,
        open=(spec.get("state") or "Open") == "Open",
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def jobqueue_from_api(obj: Mapping[str, Any], opts: ConvertOptions) -> JobQueueInfo:
    meta = metadata_of(obj)
    spec = obj.get("spec") or {}
    try:
        selector = LabelSelector.from_api(spec.get("jobSelector"))
    except SelectorError as exc:
        raise ConversionError(f"{describe(obj)}: spec.jobSelector: {exc}") from None
    mr = spec.get("maxRunningJobs")
    return JobQueueInfo(
        name=str(meta.get("name") or ""),
        selector=selector,
        namespaces=tuple(str(n) for n in spec.get("namespaces") or ()),
        priority=int(spec.get("priority") or 0),
        open=(spec.get("state") or "Open") == "Open",
        max_running=mr if isinstance(mr, int) and mr >= 0 else None,
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def reserved_to_api(r: ReservedTask) -> dict[str, Any]:
    out: dict[str, Any] = {
        "job": r.job,
        "namespace": r.namespace,
        "podName": r.pod_name,
        "podUID": r.pod_uid,
        "reason": r.reason,
        "expiresAt": format_time(r.expires_at),
        "request": {k: format_quantity(k, v) for k, v in sorted(r.request.q.items())},
    }
    if r.index is not None:
        out["taskIndex"] = r.index
    return out
