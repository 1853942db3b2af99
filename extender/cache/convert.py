"""The one translation from Kubernetes API JSON into the domain model: its rules, Node, Pod.

Every function takes the object exactly as the API serves it (a dict) and raises
:class:`ConversionError` — naming the object and the field — for anything the model cannot
represent, so that the cache can log one clear line and skip the object instead of crashing.

Here: the options every conversion reads, RFC 3339 times both ways, the field readers every
kind shares, and the built-in kinds (a Node with its NodeTopology, a Pod as a task). The custom
resources (Quota, PodGroup, Queue, JobQueue): :mod:`extender.cache.convert_crds`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from extender import wellknown
from extender.cache.tierlimit import pod_tier_limit
from extender.model.node import NodeCondition, NodeInfo
from extender.model.resources import QuantityError, Resource
from extender.model.selectors import NodeAffinity, SelectorError, Taint, Toleration
from extender.model.task import TaskInfo, TaskStatus, group_name, job_key
from extender.model.topology import gpu_spec_code, node_tiers, node_zone_key

__all__ = [
    "SPOT_POOLS",
    "ConversionError",
    "ConvertOptions",
    "describe",
    "format_time",
    "metadata_of",
    "node_from_api",
    "node_index",
    "parse_time",
    "pod_job_key",
    "pod_request",
    "read_node_affinity",
    "read_resources",
    "read_tolerations",
    "spot_pool_of",
    "str_map",
    "task_from_api",
    "task_index",
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


def format_time(ts: float) -> str:
    """Epoch seconds → RFC 3339 UTC (``2026-11-29T08:41:07Z``)."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if ts else ""


def metadata_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise ConversionError("object without metadata")
    return meta


def describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    kind = obj.get("kind", "object")
    ns = meta.get("namespace")
    return f"{kind} {ns + '/' if ns else ''}{meta.get('name', '?')}"


def read_resources(obj: Mapping[str, Any], raw: object, where: str) -> Resource:
    try:
        return Resource.from_list(raw if isinstance(raw, Mapping) else None, what=f"{describe(obj)}: {where}")
    except QuantityError as exc:
        raise ConversionError(str(exc)) from None


def read_tolerations(obj: Mapping[str, Any], raw: object) -> tuple[Toleration, ...]:
    try:
        items = raw if isinstance(raw, list) else []
        return tuple(Toleration.from_api(t) for t in items if isinstance(t, Mapping))
    except SelectorError as exc:
        raise ConversionError(f"{describe(obj)}: tolerations: {exc}") from None


def read_node_affinity(obj: Mapping[str, Any], raw: object) -> NodeAffinity | None:
    if not isinstance(raw, Mapping):
        return None
    try:
        return NodeAffinity.from_api(raw)
    except (SelectorError, ValueError, TypeError) as exc:
        raise ConversionError(f"{describe(obj)}: nodeAffinity: {exc}") from None


def str_map(raw: object) -> dict[str, str]:
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
    meta = metadata_of(obj)
    name = str(meta.get("name") or "")
    if not name:
        raise ConversionError("Node without a name")
    labels = str_map(meta.get("labels"))
    annotations = str_map(meta.get("annotations"))
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    allocatable = read_resources(obj, status.get("allocatable"), "status.allocatable")
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
    """Effective request, kube-scheduler's rule (``PodRequests``, sidecar KEP 753): the larger of
    what runs for good — Σ containers + Σ sidecars (init containers with ``restartPolicy:
    Always``) — and what any init container needs while it runs: a sidecar, itself and the
    sidecars before it; a regular init container, itself and the sidecars started before it.
    A container or sidecar resized in place asks what :func:`container_request` says.
    Where the pod sets pod-level requests (:func:`pod_level_requests`), each resource they name
    replaces the containers' figure. Plus ``spec.overhead``."""
    spec = obj.get("spec") or {}
    statuses = _container_statuses(obj)
    infeasible = _resize_infeasible(obj)
    total = Resource.empty()
    for c in spec.get("containers") or ():
        total.iadd(container_request(obj, c, statuses, infeasible, "container"))
    sidecars = Resource.empty()  # those started so far
    peak = Resource.empty()  # the most any init container needs while it runs
    for c in spec.get("initContainers") or ():
        if (c.get("restartPolicy") or "") == "Always":  # sidecar: runs beside the containers
            init = container_request(obj, c, statuses, infeasible, "initContainer")
            total.iadd(init)
            sidecars.iadd(init)
            peak = peak.maximum(sidecars)
        else:  # a regular init container: its spec (kube-scheduler reads no status for it)
            init = container_request(obj, c, {}, infeasible, "initContainer")
            peak = peak.maximum(init + sidecars)
    total = total.maximum(peak)
    pod_level = pod_level_requests(obj)
    if pod_level is not None:
        total.q.update(pod_level.q)
    overhead = spec.get("overhead")
    if overhead:
        total.iadd(read_resources(obj, overhead, "spec.overhead"))
    return total


def container_request(
    obj: Mapping[str, Any],
    container: Mapping[str, Any],
    statuses: Mapping[str, Mapping[str, Any]],
    infeasible: bool,
    kind: str,
) -> Resource:
    """What one container asks, as kube-scheduler counts a pod with ``UseStatusResources``
    (InPlacePodVerticalScaling, on by default from Kubernetes 1.33; component-helpers
    ``determineContainerReqs``): its spec, unless its status (in ``statuses``, by name) reports
    ``resources`` — then the larger of the spec, those actual requests and
    ``allocatedResources`` (a pod shrunk in place keeps its room until kubelet actuates it), or,
    while the pod's resize is ``Infeasible``, of the actual and allocated ones only."""
    name = container.get("name")
    spec_req = read_resources(obj, (container.get("resources") or {}).get("requests"), f"{kind} {name}")
    cs = statuses.get(str(name))
    actual_raw = None if cs is None else cs.get("resources")
    if not isinstance(actual_raw, Mapping) or cs is None:
        return spec_req
    actual = read_resources(obj, actual_raw.get("requests"), f"status of {kind} {name}: resources.requests")
    allocated = read_resources(obj, cs.get("allocatedResources"), f"status of {kind} {name}: allocatedResources")
    base = actual.maximum(allocated)
    return base if infeasible else spec_req.maximum(base)


def _container_statuses(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The pod's container and init container statuses by container name."""
    status = obj.get("status") or {}
    out: dict[str, Mapping[str, Any]] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or ():
            if isinstance(cs, Mapping) and cs.get("name"):
                out[str(cs["name"])] = cs
    return out


def _resize_infeasible(obj: Mapping[str, Any]) -> bool:
    """Whether the pod's first ``PodResizePending`` condition says ``Infeasible``."""
    for c in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == "PodResizePending":
            return c.get("reason") == "Infeasible"
    return False


def pod_level_resource(name: str) -> bool:
    """Whether ``spec.resources`` may set ``name`` (KEP 2837 PodLevelResources: cpu, memory and
    every ``hugepages-*``); other resources (GPUs, extended ones) are per container only."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def pod_level_requests(obj: Mapping[str, Any]) -> Resource | None:
    """The pod-level requests kube-scheduler fits a pod on (component-helpers ``PodRequests``
    with PodLevelResources, beta and on by default from Kubernetes 1.34): those of
    ``spec.resources.requests`` that pod level supports, when it names at least one (else None:
    the containers decide). Each replaces the containers' aggregate of that resource, the rest
    stay the containers'. Limits alone replace nothing (the API server defaults pod-level
    requests from them before a scheduler sees the pod)."""
    resources = (obj.get("spec") or {}).get("resources")
    if not isinstance(resources, Mapping):
        return None
    requests = read_resources(obj, resources.get("requests"), "spec.resources.requests")
    chosen = {n: v for n, v in requests.q.items() if pod_level_resource(n)}
    return Resource(chosen) if chosen else None


def pod_job_key(obj: Mapping[str, Any]) -> tuple[str, str, bool]:
    """(job key, group name, has group): pods join a job by ``scheduling.k8s.io/group-name``."""
    meta = metadata_of(obj)
    ns = str(meta.get("namespace") or "default")
    group = group_name(meta.get("annotations") or {}, meta.get("labels") or {})
    if group:
        return job_key(ns, group), group, True
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


SPOT_POOLS: Final = ("exclusive", "shared")


def preempted_by_scheduler(status: Mapping[str, Any]) -> bool:
    """Whether a pod's status says a scheduler's preemption is deleting it: the condition
    DisruptionTarget True with reason PreemptionByScheduler, which kube-scheduler sets on each
    victim before it deletes it."""
    return any(
        isinstance(c, Mapping)
        and c.get("type") == "DisruptionTarget"
        and c.get("status") == "True"
        and c.get("reason") == "PreemptionByScheduler"
        for c in status.get("conditions") or ()
    )


def spot_pool_of(obj: Mapping[str, Any], annotations: Mapping[str, str], *, placed: bool) -> str:
    """The spot pool a spot pod asks for with its ``spot-pool`` annotation (``exclusive`` without
    one). Any other value is no pool: a pod still to place is refused (:class:`ConversionError`,
    which its filter answer shows) rather than put in the exclusive pool as if nothing were
    said; a pod already ``placed`` counts in the exclusive pool, which lends by default."""
    pool = annotations.get(wellknown.ANNO_SPOT_POOL, "exclusive")
    if pool in SPOT_POOLS:
        return pool
    if placed:
        return "exclusive"
    raise ConversionError(
        f"{describe(obj)}: annotation {wellknown.ANNO_SPOT_POOL}: {pool!r} is not shared or exclusive"
    )


def task_from_api(obj: Mapping[str, Any], opts: ConvertOptions) -> TaskInfo:
    meta = metadata_of(obj)
    uid = str(meta.get("uid") or "")
    name = str(meta.get("name") or "")
    if not uid or not name:
        raise ConversionError(f"{describe(obj)}: a pod needs a name and a uid")
    ns = str(meta.get("namespace") or "default")
    labels = str_map(meta.get("labels"))
    annotations = str_map(meta.get("annotations"))
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
    node_selector = str_map(spec.get("nodeSelector"))
    spot = request.get(opts.spot_resource) > 0
    pool = spot_pool_of(obj, annotations, placed=bool(node)) if spot else ""
    mounts = annotations.get(wellknown.ANNO_REQUIRED_MOUNT_POINTS, "")
    if not node:
        # a pod still to place: its tier limit is checked here (the cache reads it per job). A
        # pod on a node is not refused for it: placed (maybe by another scheduler, whose
        # annotations, Kueue's or KAI's, need not name our labels), it must count in the ledger
        try:
            pod_tier_limit(annotations, opts.tier_labels)
        except ValueError as exc:
            raise ConversionError(f"{describe(obj)}: {exc}") from None
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
        tolerations=read_tolerations(obj, spec.get("tolerations")),
        node_affinity=read_node_affinity(obj, (spec.get("affinity") or {}).get("nodeAffinity")),
        spec=gpu_spec_code(node_selector, opts.gpu_spec_labels),
        spot=spot,
        spot_pool=pool,
        preemptible=spot,
        preempts=spec.get("preemptionPolicy") != "Never",
        preempted=st is TaskStatus.RELEASING and preempted_by_scheduler(status),
        rdma=any(k.startswith(opts.rdma_prefix) and v > 0 for k, v in request.q.items()),
        mount_points=tuple(m.strip() for m in mounts.split(",") if m.strip()),
        inherit_from=annotations.get(wellknown.ANNO_INHERIT_RESOURCE_FROM, ""),
        scheduler_name=str(spec.get("schedulerName") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
    )
    task.placement_key()  # built here, as the informer delivers the pod: not in a cycle
    return task
