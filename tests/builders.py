"""Builders of Kubernetes API objects, shaped exactly as the API serves them.

Tests feed these dicts through the real conversion (``extender.cache.convert``) and the cache,
or create them in the emulator — never hand-built model objects where the API shape matters.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from extender import wellknown

_counter = itertools.count(1)

TS = "2026-11-29T08:00:00Z"


def _uid(kind: str, name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}/{name}/{next(_counter)}"))


def node(
    name: str,
    *,
    gpu: int | str = 8,
    hca: int | str = 8,
    cpu: str = "96",
    memory: str = "1Ti",
    gpu_model: str | None = "A100",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    index: int | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    taints: list[dict[str, str]] | None = None,
    extra_allocatable: dict[str, str] | None = None,
    conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    lab = {wellknown.LABEL_HOSTNAME: name}
    if gpu_model:
        lab["nvidia.com/gpu.product"] = gpu_model
    lab.update(labels or {})
    anno = dict(annotations or {})
    if index is not None:
        anno[wellknown.ANNO_NODE_INDEX] = str(index)
    alloc = {
        "cpu": cpu,
        "memory": memory,
        "pods": "110",
        wellknown.RESOURCE_GPU: str(gpu),
        wellknown.RESOURCE_RDMA_HCA: str(hca),
    }
    alloc.update(extra_allocatable or {})
    conds = [
        {
            "type": "Ready",
            "status": "True" if ready else "False",
            "lastHeartbeatTime": TS,
            "lastTransitionTime": TS,
            "reason": "KubeletReady" if ready else "KubeletNotReady",
        }
    ]
    conds.extend(conditions or [])
    spec: dict[str, Any] = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": _uid("node", name),
            "resourceVersion": "1",
            "creationTimestamp": TS,
            "labels": lab,
            "annotations": anno,
        },
        "spec": spec,
        "status": {"capacity": dict(alloc), "allocatable": alloc, "conditions": conds},
    }


def topology(node_name: str, switches: list[str], *, kind: str = "roce") -> dict[str, Any]:
    nics = [
        {"name": f"eth{i}", "switchName": s, "rdmaDevice": f"mlx5_{i}"}
        if kind == "roce"
        else {"name": f"mlx5_{i}", "port": 1, "switchName": s}
        for i, s in enumerate(switches)
    ]
    return {
        "kind": wellknown.KIND_NODETOPOLOGY,
        "apiVersion": wellknown.API_VERSION,
        "metadata": {"name": node_name, "uid": _uid("nt", node_name), "resourceVersion": "1", "creationTimestamp": TS},
        "spec": {"net": {kind: nics}},
    }


def quota(
    name: str,
    *,
    queue: str = "research",
    gpu: int | str | None = 1,
    hca: int | str | None = 1,
    request: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    affinity: dict[str, Any] | None = None,
    shared_queues: list[str] | None = None,
    static_bind_node: str | None = None,
    labels: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    req: dict[str, str] = {}
    if gpu is not None:
        req[wellknown.RESOURCE_GPU] = str(gpu)
    if hca is not None:
        req[wellknown.RESOURCE_RDMA_HCA] = str(hca)
    req.update(request or {})
    spec: dict[str, Any] = {"queueName": queue, "request": req}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    if affinity:
        spec["affinity"] = affinity
    if shared_queues:
        spec["sharedQueues"] = shared_queues
    if static_bind_node:
        spec["staticBindNode"] = static_bind_node
    return {
        "kind": wellknown.KIND_QUOTA,
        "apiVersion": wellknown.API_VERSION,
        "metadata": {
            "name": name,
            "uid": _uid("quota", name),
            "resourceVersion": "1",
            "generation": 1,
            "creationTimestamp": TS,
            "labels": dict(labels or {}),
        },
        "spec": spec,
        "status": _bound_by_us(status) if status else {"phase": "QuotaEmpty"},
    }


def _bound_by_us(status: dict[str, Any]) -> dict[str, Any]:
    """A status with a nodeName is the scheduler's own binding unless it says otherwise (pass
    ``boundBy: None`` for a binding another controller wrote)."""
    out = dict(status)
    if out.get("nodeName") and "boundBy" not in out:
        out["boundBy"] = wellknown.COMPONENT
    if out.get("boundBy") is None:
        out.pop("boundBy", None)
    return out


def pod(
    name: str,
    *,
    namespace: str = "default",
    group: str | None = None,
    quota: str | None = None,
    gpu: int | str | None = 1,
    hca: int | str | None = 1,
    cpu: str = "4",
    memory: str = "32Gi",
    extra: dict[str, str] | None = None,
    node: str | None = None,
    phase: str = "Pending",
    index: int | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    scheduler: str = wellknown.SCHEDULER_NAME,
    priority: int = 0,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    uid: str | None = None,
    created: str = TS,
) -> dict[str, Any]:
    anno = dict(annotations or {})
    if group:
        anno[wellknown.ANNO_GROUP_NAME] = group
    if quota:
        anno[wellknown.ANNO_QUOTA_NAME] = quota
    if index is not None:
        anno[wellknown.ANNO_TASK_INDEX] = str(index)
    req: dict[str, str] = {"cpu": cpu, "memory": memory}
    if gpu is not None:
        req[wellknown.RESOURCE_GPU] = str(gpu)
    if hca is not None:
        req[wellknown.RESOURCE_RDMA_HCA] = str(hca)
    req.update(extra or {})
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "priority": priority,
        "containers": [{"name": "main", "image": "pytorch:2", "resources": {"requests": req, "limits": dict(req)}}],
    }
    if node:
        spec["nodeName"] = node
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    status: dict[str, Any] = {"phase": phase}
    if phase == "Running":
        status["startTime"] = TS
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or _uid("pod", f"{namespace}/{name}"),
            "resourceVersion": "1",
            "creationTimestamp": created,
            "labels": dict(labels or {}),
            "annotations": anno,
        },
        "spec": spec,
        "status": status,
    }


def running_spot_pod(
    name: str, *, group: str, gpu: int, priority: int = 0, namespace: str = "default", node: str = "n0"
) -> dict[str, Any]:
    """A spot pod of ``gpu`` GPUs (and as much of the spot resource), member of PodGroup
    ``group``, running on ``node``."""
    return pod(
        name,
        namespace=namespace,
        group=group,
        gpu=gpu,
        hca=None,
        extra={wellknown.RESOURCE_SPOT_GPU: str(gpu)},
        node=node,
        phase="Running",
        priority=priority,
    )


def podgroup(
    name: str,
    *,
    namespace: str = "default",
    min_member: int = 1,
    queue: str = "research",
    topology: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if topology:
        spec["topology"] = topology
    return {
        "kind": wellknown.KIND_PODGROUP,
        "apiVersion": wellknown.API_VERSION,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": _uid("pg", f"{namespace}/{name}"),
            "resourceVersion": "1",
            "creationTimestamp": TS,
            "labels": dict(labels or {}),
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def queue(
    name: str, *, weight: int = 1, capability: dict[str, str] | None = None, state: str = "Open"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": weight, "state": state}
    if capability:
        spec["capability"] = capability
    return {
        "kind": wellknown.KIND_QUEUE,
        "apiVersion": wellknown.API_VERSION,
        "metadata": {"name": name, "uid": _uid("q", name), "resourceVersion": "1", "creationTimestamp": TS},
        "spec": spec,
    }


def jobqueue(
    name: str,
    *,
    selector: dict[str, Any],
    state: str = "Open",
    priority: int = 0,
    max_running: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"jobSelector": selector, "state": state, "priority": priority}
    if max_running is not None:
        spec["maxRunningJobs"] = max_running
    return {
        "kind": wellknown.KIND_JOBQUEUE,
        "apiVersion": wellknown.API_VERSION,
        "metadata": {"name": name, "uid": _uid("jq", name), "resourceVersion": "1", "creationTimestamp": TS},
        "spec": spec,
    }


def seed_cluster(*, leaves: int = 2, per_leaf: int = 4, gpu_model: str = "A100") -> list[dict[str, Any]]:
    """The seed's cluster: leaf s1 = n0–n3, leaf s2 = n4–n7, 8×A100 + 8 rdma/hca each (node names
    must be lowercase in Kubernetes; the seed writes N0…N7)."""
    objs: list[dict[str, Any]] = []
    for leaf in range(leaves):
        for i in range(per_leaf):
            n = leaf * per_leaf + i
            objs.append(node(f"n{n}", gpu_model=gpu_model))
            objs.append(topology(f"n{n}", [f"s{leaf + 1}"]))
    return objs


def training_job(
    job: str,
    workers: int,
    *,
    namespace: str = "default",
    queue: str = "research",
    gpu: int = 1,
    hca: int | None = 1,
    claim: bool = True,
    quota_prefix: str | None = None,
    min_member: int | None = None,
) -> list[dict[str, Any]]:
    """A PodGroup, one quota per worker (``q-<job>-i``) and the worker pods claiming them."""
    prefix = quota_prefix or f"q-{job}"
    objs: list[dict[str, Any]] = [podgroup(job, namespace=namespace, min_member=min_member or workers, queue=queue)]
    for i in range(workers):
        objs.append(quota(f"{prefix}-{i}", queue=queue, gpu=gpu, hca=hca))
        objs.append(
            pod(
                f"{job}-worker-{i}",
                namespace=namespace,
                group=job,
                quota=f"{prefix}-{i}" if claim else None,
                gpu=gpu,
                hca=hca,
                index=i,
            )
        )
    return objs


def feed(cache: Any, objs: list[dict[str, Any]]) -> None:
    """Deliver objects to a ClusterCache as informer ADDED events (any order)."""
    handlers = {
        "Node": cache.on_node_add,
        wellknown.KIND_NODETOPOLOGY: cache.on_topology_add,
        "Pod": cache.on_pod_add,
        wellknown.KIND_QUOTA: cache.on_quota_add,
        wellknown.KIND_PODGROUP: cache.on_podgroup_add,
        wellknown.KIND_QUEUE: cache.on_queue_add,
        wellknown.KIND_JOBQUEUE: cache.on_jobqueue_add,
    }
    for obj in objs:
        handlers[obj["kind"]](obj)
