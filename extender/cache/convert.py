"""The one translation from Kubernetes API JSON into the domain model.

Every function takes the object exactly as the API serves it (a dict) and raises
:class:`ConversionError` — naming the object and the field — for anything the model cannot
represent, so that the cache can log one clear line and skip the object instead of crashing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from extender import wellknown
from extender.cache.tierlimit import TierLimit, pod_tier_limit, podgroup_tier_limit
from extender.model.job import JobQueueInfo, QueueInfo
from extender.model.node import NodeCondition, NodeInfo
from extender.model.quota import (
    PodQuotaAffinity,
    QuotaAffinityTerm,
    QuotaInfo,
    QuotaPhase,
    ReservedTask,
    StaticBindStatus,
)
from extender.model.resources import QuantityError, Resource, format_quantity
from extender.model.selectors import LabelSelector, NodeAffinity, SelectorError, Taint, Toleration
from extender.model.task import TaskInfo, TaskStatus, job_key
from extender.model.topology import gpu_spec_code, node_tiers, node_zone_key

__all__ = [
    "ConversionError",
    "ConvertOptions",
    "PodGroupSpec",
    "format_time",
    "jobqueue_from_api",
    "node_from_api",
    "parse_time",
    "pod_job_key",
    "podgroup_from_api",
    "queue_from_api",
    "quota_from_api",
    "reserved_to_api",
    "task_from_api",
    "topology_switches",
    "topology_tiers",
]


class ConversionError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ConvertOptions:
    gpu_spec_labels: tuple[str, ...] = wellknown.DEFAULT_GPU_SPEC_LABELS
    tier_labels: tuple[tuple[int, str], ...] = wellknown.DEFAULT_TIER_LABELS
    """(tier, node label key) read for the nodes' topology tiers (``--topology-labels``)."""
    gpu_resources: tuple[str, ...] = wellknown.DEFAULT_GPU_RESOURCES
    """The extended resources that are GPUs (``--gpu-resources``: nvidia.com/gpu, amd.com/gpu, …)."""
    spot_resource: str = wellknown.RESOURCE_SPOT_GPU
    rdma_prefix: str = wellknown.RDMA_RESOURCE_PREFIX
    default_queue: str = "default"


def parse_time(value: object) -> float:
    """RFC 3339 (``2026-11-29T08:41:07Z``) → epoch seconds; 0.0 for absent or unparsable."""
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise ConversionError("object without metadata")
    return meta


def _what(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    kind = obj.get("kind", "object")
    ns = meta.get("namespace")
    return f"{kind} {ns + '/' if ns else ''}{meta.get('name', '?')}"


def _resources(obj: Mapping[str, Any], raw: object, where: str) -> Resource:
    try:
        return Resource.from_list(raw if isinstance(raw, Mapping) else None, what=f"{_what(obj)}: {where}")
    except QuantityError as exc:
        raise ConversionError(str(exc)) from None


def _tolerations(obj: Mapping[str, Any], raw: object) -> tuple[Toleration, ...]:
    try:
        items = raw if isinstance(raw, list) else []
        return tuple(Toleration.from_api(t) for t in items if isinstance(t, Mapping))
    except SelectorError as exc:
        raise ConversionError(f"{_what(obj)}: tolerations: {exc}") from None


def _node_affinity(obj: Mapping[str, Any], raw: object) -> NodeAffinity | None:
    if not isinstance(raw, Mapping):
        return None
    try:
        return NodeAffinity.from_api(raw)
    except (SelectorError, ValueError, TypeError) as exc:
        raise ConversionError(f"{_what(obj)}: nodeAffinity: {exc}") from None


def _str_map(raw: object) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): str(v) for k, v in raw.items()}


# --- nodes -----------------------------------------------------------------------------------
_TRAILING_NUMBER = re.compile(r"(\d+)$")


def node_index(name: str, annotations: Mapping[str, str]) -> int:
    """Annotation ``node-index``, else the number at the end of the name, else 0."""
    raw = annotations.get(wellknown.ANNO_NODE_INDEX)
    if raw is not None:
        try:
            return int(raw)
        except ValueError:
            pass
    m = _TRAILING_NUMBER.search(name)
    return int(m.group(1)) if m else 0


def topology_switches(topo: Mapping[str, Any] | None) -> tuple[list[str], list[str]]:
    """(RoCE switch names, IB switch names) from a NodeTopology object."""
    if not topo:
        return [], []
    net = (topo.get("spec") or {}).get("net") or {}
    roce = [str(n.get("switchName") or "") for n in net.get("roce") or () if isinstance(n, Mapping)]
    ib = [str(n.get("switchName") or "") for n in net.get("ib") or () if isinstance(n, Mapping)]
    return roce, ib


def topology_tiers(topo: Mapping[str, Any] | None) -> dict[int, str]:
    """level → name from a NodeTopology's ``spec.tiers`` (entries without a level ≥ 0 or a name
    are skipped; the first entry of a level wins)."""
    out: dict[int, str] = {}
    if not topo:
        return out
    for t in (topo.get("spec") or {}).get("tiers") or ():
        if not isinstance(t, Mapping):
            continue
        level, name = t.get("level"), t.get("name")
        if isinstance(level, int) and not isinstance(level, bool) and level >= 0 and isinstance(name, str) and name:
            out.setdefault(level, name)
    return out


def node_from_api(obj: Mapping[str, Any], topo: Mapping[str, Any] | None, opts: ConvertOptions) -> NodeInfo:
    meta = _meta(obj)
    name = str(meta.get("name") or "")
    if not name:
        raise ConversionError("Node without a name")
    labels = _str_map(meta.get("labels"))
    annotations = _str_map(meta.get("annotations"))
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    allocatable = _resources(obj, status.get("allocatable"), "status.allocatable")
    taints = tuple(Taint.from_api(t) for t in spec.get("taints") or () if isinstance(t, Mapping))
    conditions: dict[str, NodeCondition] = {}
    ready = False
    ready_since = 0.0
    for c in status.get("conditions") or ():
        if not isinstance(c, Mapping) or not c.get("type"):
            continue
        cond = NodeCondition(
            str(c["type"]),
            str(c.get("status", "Unknown")),
            parse_time(c.get("lastHeartbeatTime")),
            parse_time(c.get("lastTransitionTime")),
        )
        conditions[cond.type] = cond
        if cond.type == "Ready":
            ready = cond.status == "True"
            ready_since = cond.transition
    roce, ib = topology_switches(topo)
    zone = node_zone_key(annotations, labels, roce, ib, opts.tier_labels) or ""
    return NodeInfo(
        name=name,
        allocatable=allocatable,
        index=node_index(name, annotations),
        labels=labels,
        annotations=annotations,
        taints=taints,
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
        spec=gpu_spec_code(labels, opts.gpu_spec_labels),
        zone=zone,
        tiers=node_tiers(annotations, labels, zone, topology_tiers(topo), opts.tier_labels),
        conditions=conditions,
        ready_since=ready_since,
        resource_version=str(meta.get("resourceVersion") or ""),
    )


# --- pods ------------------------------------------------------------------------------------
def pod_request(obj: Mapping[str, Any]) -> Resource:
    """Effective request: max(Σ containers, each init container) + overhead (kube-scheduler's rule)."""
    spec = obj.get("spec") or {}
    total = Resource.empty()
    for c in spec.get("containers") or ():
        total.iadd(_resources(obj, (c.get("resources") or {}).get("requests"), f"container {c.get('name')}"))
    for c in spec.get("initContainers") or ():
        init = _resources(obj, (c.get("resources") or {}).get("requests"), f"initContainer {c.get('name')}")
        if (c.get("restartPolicy") or "") == "Always":  # sidecar: runs alongside
            total.iadd(init)
        else:
            total = total.maximum(init)
    overhead = spec.get("overhead")
    if overhead:
        total.iadd(_resources(obj, overhead, "spec.overhead"))
    return total


def pod_job_key(obj: Mapping[str, Any]) -> tuple[str, str, bool]:
    """(job key, group name, has group): pods join a job by ``scheduling.k8s.io/group-name``."""
    meta = _meta(obj)
    ns = str(meta.get("namespace") or "default")
    annotations = meta.get("annotations") or {}
    group = annotations.get(wellknown.ANNO_GROUP_NAME) or (meta.get("labels") or {}).get(wellknown.ANNO_GROUP_NAME)
    if group:
        return job_key(ns, str(group)), str(group), True
    return job_key(ns, str(meta.get("name") or meta.get("generateName") or "")), "", False


def task_index(name: str, labels: Mapping[str, str], annotations: Mapping[str, str]) -> int | None:
    for key in wellknown.TASK_INDEX_LABELS:
        raw = annotations.get(key) or labels.get(key)
        if raw is not None:
            try:
                return int(raw)
            except ValueError:
                continue
    m = _TRAILING_NUMBER.search(name)
    return int(m.group(1)) if m else None


def task_from_api(obj: Mapping[str, Any], opts: ConvertOptions) -> TaskInfo:
    meta = _meta(obj)
    uid = str(meta.get("uid") or "")
    name = str(meta.get("name") or "")
    if not uid or not name:
        raise ConversionError(f"{_what(obj)}: a pod needs a name and a uid")
    ns = str(meta.get("namespace") or "default")
    labels = _str_map(meta.get("labels"))
    annotations = _str_map(meta.get("annotations"))
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    request = pod_request(obj)
    phase = status.get("phase") or "Pending"
    node = str(spec.get("nodeName") or "")
    if phase == "Succeeded":
        st = TaskStatus.SUCCEEDED
    elif phase == "Failed":
        st = TaskStatus.FAILED
    elif meta.get("deletionTimestamp") and node:
        st = TaskStatus.RELEASING
    elif node:
        st = TaskStatus.RUNNING if phase == "Running" else TaskStatus.BOUND
    else:
        st = TaskStatus.PENDING
    key, _group, _has = pod_job_key(obj)
    node_selector = _str_map(spec.get("nodeSelector"))
    spot = request.get(opts.spot_resource) > 0
    mounts = annotations.get(wellknown.ANNO_REQUIRED_MOUNT_POINTS, "")
    try:
        pod_tier_limit(annotations, opts.tier_labels)  # checked here; the cache reads it per job
    except ValueError as exc:
        raise ConversionError(f"{_what(obj)}: {exc}") from None
    task = TaskInfo(
        uid=uid,
        namespace=ns,
        name=name,
        job=key,
        request=request,
        status=st,
        index=task_index(name, labels, annotations),
        quota=annotations.get(wellknown.ANNO_QUOTA_NAME, ""),
        node=node,
        priority=int(spec.get("priority") or 0),
        priority_class=str(spec.get("priorityClassName") or ""),
        created=parse_time(meta.get("creationTimestamp")),
        started=parse_time(status.get("startTime")),
        labels=labels,
        annotations=annotations,
        node_selector=node_selector,
        tolerations=_tolerations(obj, spec.get("tolerations")),
        node_affinity=_node_affinity(obj, (spec.get("affinity") or {}).get("nodeAffinity")),
        spec=gpu_spec_code(node_selector, opts.gpu_spec_labels),
        spot=spot,
        spot_pool=annotations.get(wellknown.ANNO_SPOT_POOL, "exclusive") if spot else "",
        preemptible=spot,
        rdma=any(k.startswith(opts.rdma_prefix) and v > 0 for k, v in request.q.items()),
        mount_points=tuple(m.strip() for m in mounts.split(",") if m.strip()),
        inherit_from=annotations.get(wellknown.ANNO_INHERIT_RESOURCE_FROM, ""),
        scheduler_name=str(spec.get("schedulerName") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
    )
    task.placement_key()  # built here, as the informer delivers the pod: not in a cycle
    return task


# --- quotas ----------------------------------------------------------------------------------
def _affinity_terms(obj: Mapping[str, Any], raw: object, where: str) -> tuple[QuotaAffinityTerm, ...]:
    terms = []
    for t in raw if isinstance(raw, list) else []:
        if not isinstance(t, Mapping):
            continue
        try:
            sel = LabelSelector.from_api(t["labelSelector"]) if t.get("labelSelector") else None
        except SelectorError as exc:
            raise ConversionError(f"{_what(obj)}: {where}: {exc}") from None
        terms.append(QuotaAffinityTerm(tuple(str(n) for n in t.get("quotaNames") or ()), sel))
    return tuple(terms)


def quota_from_api(obj: Mapping[str, Any], opts: ConvertOptions) -> QuotaInfo:
    """A Quota's spec and its persisted status. Claims (``status.tasks``) are *not* taken from
    the object: they are derived from live pods by the cache."""
    meta = _meta(obj)
    name = str(meta.get("name") or "")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    request = _resources(obj, spec.get("request"), "spec.request")
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
            raise ConversionError(f"{_what(obj)}: affinity.podAffinity: {exc}") from None
    node_selector = _str_map(spec.get("nodeSelector"))
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
                request=_resources(obj, r.get("request"), "status.reservedTasks.request"),
            )
        )
    quota = QuotaInfo(
        name=name,
        queue=str(spec.get("queueName") or opts.default_queue),
        request=request,
        labels=_str_map(meta.get("labels")),
        node_selector=node_selector,
        tolerations=_tolerations(obj, spec.get("tolerations")),
        node_affinity=_node_affinity(obj, affinity.get("nodeAffinity")),
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
        shadow=_resources(obj, spec.get("shadowResource"), "spec.shadowResource"),
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


def podgroup_from_api(obj: Mapping[str, Any], opts: ConvertOptions) -> PodGroupSpec:
    meta = _meta(obj)
    spec = obj.get("spec") or {}
    try:
        tier_limit = podgroup_tier_limit(spec)
    except ValueError as exc:
        raise ConversionError(f"{_what(obj)}: {exc}") from None
    topo = spec.get("topology") or {}
    ns = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    mm = spec.get("minMember", 1)
    if not isinstance(mm, int) or mm < 1:
        raise ConversionError(f"{_what(obj)}: spec.minMember must be a positive integer, got {mm!r}")
    enabled = topo.get("enabled")
    return PodGroupSpec(
        key=job_key(ns, name),
        namespace=ns,
        name=name,
        min_member=mm,
        queue=str(spec.get("queue") or opts.default_queue),
        priority_class=str(spec.get("priorityClassName") or ""),
        labels=_str_map(meta.get("labels")),
        topology_enabled=bool(enabled) if isinstance(enabled, bool) else None,
        strict_order=bool(topo.get("strictOrder")),
        affinity_key=str(topo.get("affinityKey") or ""),
        tier_limit=tier_limit,
        created=parse_time(meta.get("creationTimestamp")),
        resource_version=str(meta.get("resourceVersion") or ""),
        phase=str((obj.get("status") or {}).get("phase") or ""),
    )


def queue_from_api(obj: Mapping[str, Any], opts: ConvertOptions) -> QueueInfo:
    meta = _meta(obj)
    spec = obj.get("spec") or {}
    cap = spec.get("capability")
    weight = spec.get("weight", 1)
    return QueueInfo(
        name=str(meta.get("name") or ""),
        weight=weight if isinstance(weight, int) and weight > 0 else 1,
        capability=_resources(obj, cap, "spec.capability") if cap else None,
        reclaimable=spec.get("reclaimable", True) is not False,
        open=(spec.get("state") or "Open") == "Open",
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def jobqueue_from_api(obj: Mapping[str, Any], opts: ConvertOptions) -> JobQueueInfo:
    meta = _meta(obj)
    spec = obj.get("spec") or {}
    try:
        selector = LabelSelector.from_api(spec.get("jobSelector"))
    except SelectorError as exc:
        raise ConversionError(f"{_what(obj)}: spec.jobSelector: {exc}") from None
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


def format_time(ts: float) -> str:
    """Epoch seconds → RFC 3339 UTC (``2026-11-29T08:41:07Z``)."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if ts else ""
