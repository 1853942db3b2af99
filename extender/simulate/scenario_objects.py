"""The Kubernetes objects a scenario stands for: Nodes with allocatable, labels and a Ready condition,
the NodeTopology the discovery agents would write for each, Namespaces, Queues, JobQueues and Quotas.
"""

from __future__ import annotations

import time
from typing import Any

from extender import wellknown
from extender.cache.convert import format_time
from extender.simulate.fabric import CLIQUE_LABEL, TOPOGRAPH_LABELS, topology_object
from extender.simulate.scenario import Leaf, NodeOverride, Scenario

__all__ = ["cluster_objects", "node_ready_condition", "topology_objects_of"]


def cluster_objects(scenario: Scenario) -> list[dict[str, Any]]:
    """Nodes, NodeTopologies, Queues, JobQueues, Quotas and namespaces of the jobs."""
    d = scenario.defaults
    objs: list[dict[str, Any]] = []
    for leaf in scenario.leaves:
        for name in leaf.nodes:
            o = scenario.nodes.get(name) or NodeOverride()
            model = o.gpu_model or leaf.gpu_model or d.gpu_model
            gpus = d.gpus if o.gpus is None else o.gpus
            rdma = d.rdma if o.rdma is None else o.rdma
            spot = d.spot_gpus if o.spot_gpus is None else o.spot_gpus
            labels = _tier_labels(scenario, name, leaf)
            objs.append(
                _node(
                    name,
                    model=model,
                    gpus=gpus,
                    rdma=rdma,
                    cpu=d.cpu,
                    memory=d.memory,
                    spot=spot,
                    o=o,
                    gpu_resource=d.gpu_resource,
                    tiers=labels,
                )
            )
            objs += topology_objects_of(scenario, name, leaf.name)
    namespaces = sorted({j.namespace for s in scenario.steps for j in s.jobs} - {"default"})
    objs += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces]
    for queue in scenario.queues:
        spec: dict[str, Any] = {"weight": queue.weight, "state": queue.state}
        if queue.capability:
            spec["capability"] = {k: str(v) for k, v in queue.capability.items()}
        objs.append(_custom(wellknown.KIND_QUEUE, queue.name, spec))
    for jq in scenario.job_queues:
        spec = {"jobSelector": {"matchLabels": jq.selector}, "priority": jq.priority, "state": jq.state}
        if jq.max_running is not None:
            spec["maxRunningJobs"] = jq.max_running
        objs.append(_custom(wellknown.KIND_JOBQUEUE, jq.name, spec))
    for q in scenario.quotas:
        for name in q.names():
            spec = {"queueName": q.queue, "request": {k: str(v) for k, v in q.request.items()}}
            if q.node_selector:
                spec["nodeSelector"] = q.node_selector
            if q.static_bind_node:
                spec["staticBindNode"] = q.static_bind_node
            if q.shared_queues:
                spec["sharedQueues"] = q.shared_queues
            if q.affinity:
                spec["affinity"] = q.affinity
            obj = _custom(wellknown.KIND_QUOTA, name, spec)
            obj["metadata"]["labels"] = dict(q.labels)
            objs.append(obj)
    return objs


def topology_objects_of(scenario: Scenario, node: str, leaf: str) -> list[dict[str, Any]]:
    """What the discovery agents write for a node cabled to ``leaf``: its NodeTopology with
    ``spec.tiers`` (none when the scenario's topology comes from Topograph labels)."""
    if scenario.topology_from == "topograph":
        return []
    fabric = next((lf.fabric for lf in scenario.leaves if lf.name == leaf), "roce")
    return [topology_object(node, [leaf], fabric, tiers={1: leaf, **scenario.upper_tiers(leaf)})]


def _tier_labels(scenario: Scenario, node: str, leaf: Leaf) -> dict[str, str]:
    """Node labels naming the node's tiers: the NVLink domain (the GPU operator's clique label, or
    Topograph's accelerator label); with Topograph, every tier as its label."""
    o = scenario.nodes.get(node) or NodeOverride()
    nvlink = o.nvlink or leaf.nvlink
    if scenario.topology_from == "agents":
        return {CLIQUE_LABEL: nvlink} if nvlink else {}
    names = {1: leaf.name, **scenario.upper_tiers(leaf.name)}
    labels = {TOPOGRAPH_LABELS[level]: name for level, name in names.items()}
    if nvlink:
        labels[TOPOGRAPH_LABELS[0]] = nvlink
    return labels


def _custom(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": wellknown.API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def _node(
    name: str,
    *,
    model: str,
    gpus: int,
    rdma: int,
    cpu: str,
    memory: str,
    spot: int,
    o: NodeOverride,
    gpu_resource: str = wellknown.RESOURCE_GPU,
    tiers: dict[str, str],
) -> dict[str, Any]:
    # the RDMA device plugin advertises HCAs as rdma/hca on RoCE and InfiniBand nodes alike (seed 2.6)
    alloc = {
        "cpu": cpu,
        "memory": memory,
        "pods": "110",
        gpu_resource: str(gpus),
        wellknown.RESOURCE_RDMA_HCA: str(rdma),
    }
    if spot:
        alloc[wellknown.RESOURCE_SPOT_GPU] = str(spot)
    labels = {wellknown.LABEL_HOSTNAME: name, "nvidia.com/gpu.product": model, **tiers, **o.labels}
    annotations = {wellknown.ANNO_NODE_INDEX: str(o.index)} if o.index is not None else {}
    spec: dict[str, Any] = {}
    if o.unschedulable:
        spec["unschedulable"] = True
    if o.taints:
        spec["taints"] = o.taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": spec,
        "status": {
            "capacity": dict(alloc),
            "allocatable": alloc,
            "conditions": [node_ready_condition(o.ready), *_storage_conditions(o.mount_points)],
            # the kubelet stand-in's version: kubectl get nodes shows it in VERSION, as a kubelet's
            "nodeInfo": {"kubeletVersion": _kubelet_version(), "operatingSystem": "linux"},
        },
    }


def _kubelet_version() -> str:
    """The emulator's version (imported here: the CLI loads this module for every command)."""
    from extender.emulator.discovery import VERSION_INFO  # noqa: PLC0415

    return str(VERSION_INFO["gitVersion"])


def _storage_conditions(mount_points: dict[str, bool]) -> list[dict[str, Any]]:
    """The node conditions a storage daemon writes, one per mount point (seed 六 6.2)."""
    return [
        _condition(wellknown.STORAGE_CONDITION_PREFIX + mp, ready, "MountPointReady", "MountPointNotReady")
        for mp, ready in sorted(mount_points.items())
    ]


def node_ready_condition(ready: bool) -> dict[str, Any]:
    return _condition("Ready", ready, "KubeletReady", "NodeStatusUnknown")


def _condition(kind: str, ok: bool, reason_ok: str, reason_not: str) -> dict[str, Any]:
    """A node condition of ``kind``, ``True`` when ``ok``, heartbeat and transition now."""
    now = format_time(time.time())
    return {
        "type": kind,
        "status": "True" if ok else "False",
        "reason": reason_ok if ok else reason_not,
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
