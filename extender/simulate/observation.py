"""What a simulation observes and records: the cluster as kubectl would show it at one moment
(:class:`PhaseView`), each node with the GPUs its quotas and pods hold (:class:`NodeView`), where each
job landed, the record of a step and the result checked against the scenario's ``expect``.

The observations are read from the emulator's objects only, as an operator would read the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from extender import wellknown
from extender.cache.convert import node_index, task_index
from extender.emulator import Emulator
from extender.simulate.scenario import JobSpec, Scenario

__all__ = [
    "REPLICA_TYPE",
    "NodeView",
    "PhaseView",
    "PodView",
    "SimulationResult",
    "StepRecord",
    "job_views",
    "node_views",
    "phase_view",
]


REPLICA_TYPE: Final = "training.kubeflow.org/replica-type"
"""Pod label of a job with a launcher (an MPIJob): ``launcher`` or ``worker``."""


@dataclass(frozen=True, slots=True)
class PodView:
    phase: str
    node: str
    quota: str
    quota_node: str
    job: str
    index: int | None  # the task index (rank) the scheduler reads
    launcher: bool = False  # an MPIJob's launcher


@dataclass(slots=True)
class PhaseView:
    """One moment, as kubectl would show it."""

    quotas: dict[str, tuple[str, str]]  # name → (phase, node)
    pods: dict[str, PodView]  # "namespace/name" → view


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    leaf: str
    model: str
    gpus: int
    ready: bool
    quota_gpus: dict[str, int]  # quota → GPUs its binding holds on the node
    pod_gpus: dict[str, int]  # pod → GPUs it uses
    index: int = 0  # the node's index (annotation node-index, else its name's number): rank order
    spine: str = ""  # the spine over its leaf ("" when the scenario declares none)


@dataclass(slots=True)
class StepRecord:
    index: int
    title: str
    events: list[str]
    after_webhook: PhaseView
    after_binder: PhaseView
    after_scheduler: PhaseView
    pending: dict[str, str] = field(default_factory=dict)  # pod → why it is still pending
    rounds: int = 0
    nodes: list[NodeView] = field(default_factory=list)  # the nodes at the end of the step
    jobs: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # the jobs submitted so far


@dataclass(slots=True)
class SimulationResult:
    scenario: Scenario
    steps: list[StepRecord]
    nodes: list[NodeView]
    jobs: dict[str, dict[str, list[str]]]  # "namespace/name" → {"leaves": [...], "nodes": [...]}
    warnings: list[str]

    @property
    def final(self) -> PhaseView:
        return self.steps[-1].after_scheduler

    def check(self) -> list[str]:
        """Differences from the scenario's ``expect`` section (empty: as expected)."""
        exp = self.scenario.expect
        if exp is None:
            return []
        problems = []
        final = self.final
        for name, node in exp.quotas.items():
            got = final.quotas.get(name, ("", "<missing>"))[1]
            if got != node:
                problems.append(f"quota {name}: expected on {node or '(unbound)'}, found {got or '(unbound)'}")
        for job, leaves in exp.leaves.items():
            got_leaves = self.jobs.get(job, {}).get("leaves", [])
            if sorted(leaves) != got_leaves:
                problems.append(f"job {job}: expected leaves {sorted(leaves)}, found {got_leaves}")
        for job, spines in exp.spines.items():
            got_spines = self.jobs.get(job, {}).get("spines", [])
            if sorted(spines) != got_spines:
                problems.append(f"job {job}: expected spines {sorted(spines)}, found {got_spines}")
        for job in exp.running:
            pods = [v for v in final.pods.values() if v.job == job]
            if not pods or any(v.phase != "Running" for v in pods):
                problems.append(f"job {job}: expected all pods running, found {[(v.phase, v.node) for v in pods]}")
        for job in exp.pending:
            pods = [v for v in final.pods.values() if v.job == job]
            if not pods or any(v.node for v in pods):
                problems.append(f"job {job}: expected no pod placed, found {[(v.phase, v.node) for v in pods]}")
        pending = self.steps[-1].pending
        for job, text in exp.reasons.items():
            why = {k: pending.get(k, "") for k, v in final.pods.items() if v.job == job and not v.node}
            if not why or any(text not in w for w in why.values()):
                problems.append(f"job {job}: expected every pending pod's reason to contain {text!r}, found {why}")
        return problems

    def as_json(self) -> dict[str, Any]:
        final = self.final
        return {
            "scenario": self.scenario.name,
            "quotas": {name: node for name, (_, node) in sorted(final.quotas.items())},
            "pods": {name: v.node for name, v in sorted(final.pods.items())},
            "jobs": self.jobs,
            "steps": [
                {
                    "title": s.title,
                    "events": s.events,
                    "quotas": {name: node for name, (_, node) in sorted(s.after_scheduler.quotas.items())},
                    "pods": {name: v.node for name, v in sorted(s.after_scheduler.pods.items())},
                    "pending": s.pending,
                }
                for s in self.steps
            ],
        }


def _gpu(resources: dict[str, Any] | None, name: str = wellknown.RESOURCE_GPU) -> int:
    raw = (resources or {}).get(name)
    try:
        return int(float(raw)) if raw is not None else 0
    except (TypeError, ValueError):
        return 0


def phase_view(emulator: Emulator) -> PhaseView:
    """Each quota's phase and node, and each pod of our scheduler: phase, node, quota, job, index."""
    quotas = {
        q["metadata"]["name"]: (
            (q.get("status") or {}).get("phase", "QuotaEmpty"),
            (q.get("status") or {}).get("nodeName", ""),
        )
        for q in emulator.list(wellknown.API_VERSION, wellknown.QUOTAS)
    }
    pods = {}
    for p in emulator.list("v1", "pods"):
        if (p.get("spec") or {}).get("schedulerName") != wellknown.SCHEDULER_NAME:
            continue
        meta = p["metadata"]
        anno = meta.get("annotations") or {}
        labels = meta.get("labels") or {}
        pods[f"{meta['namespace']}/{meta['name']}"] = PodView(
            phase=(p.get("status") or {}).get("phase", "Pending"),
            node=(p.get("spec") or {}).get("nodeName", ""),
            quota=anno.get(wellknown.ANNO_QUOTA_NAME, ""),
            quota_node=anno.get(wellknown.ANNO_QUOTA_NODE, ""),
            job=f"{meta['namespace']}/{anno.get(wellknown.ANNO_GROUP_NAME, meta['name'])}",
            index=task_index(meta["name"], labels, anno),
            launcher=labels.get(REPLICA_TYPE) == "launcher",
        )
    return PhaseView(quotas, pods)


def node_views(emulator: Emulator, scenario: Scenario, leaf_of: Mapping[str, str], gpu_resource: str) -> list[NodeView]:
    """Every node, in the scenario's order, with the GPUs of the quotas bound to it and of the live
    pods on it (``leaf_of``: node → its leaf now, after any cableMoved event)."""
    quotas = emulator.list(wellknown.API_VERSION, wellknown.QUOTAS)
    pods = [
        p for p in emulator.list("v1", "pods") if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    views = []
    for n in emulator.list("v1", "nodes"):
        name = n["metadata"]["name"]
        q_gpus = {
            q["metadata"]["name"]: _gpu(q["spec"]["request"], gpu_resource)
            for q in quotas
            if (q.get("status") or {}).get("nodeName") == name
        }
        p_gpus = {
            f"{p['metadata']['namespace']}/{p['metadata']['name']}": _gpu(
                p["spec"]["containers"][0]["resources"].get("requests"), gpu_resource
            )
            for p in pods
            if (p.get("spec") or {}).get("nodeName") == name
        }
        views.append(
            NodeView(
                name=name,
                leaf=leaf_of.get(name, ""),
                spine=scenario.spine_of().get(leaf_of.get(name, ""), ""),
                model=(n["metadata"].get("labels") or {}).get("nvidia.com/gpu.product", ""),
                gpus=_gpu((n.get("status") or {}).get("allocatable"), gpu_resource),
                ready=any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (n.get("status") or {}).get("conditions") or []
                ),
                quota_gpus=q_gpus,
                pod_gpus=p_gpus,
                index=node_index(name, n["metadata"].get("annotations") or {}),
            )
        )
    order = {n: i for i, n in enumerate(scenario.node_names())}
    views.sort(key=lambda v: (order.get(v.name, 1 << 30), v.name))
    return views


def job_views(
    final: PhaseView, jobs: Mapping[str, JobSpec], scenario: Scenario, leaf_of: Mapping[str, str]
) -> dict[str, dict[str, list[str]]]:
    """Per submitted job ("namespace/name"): the nodes of its pods in index order (a pod not yet
    bound counts at its quota's node; an MPIJob's launcher first, also as ``launcher``), their
    leaves, and with spines or NVLink domains declared, the tier they span and their spines."""
    out: dict[str, dict[str, list[str]]] = {}
    for key in sorted(jobs):
        pods = sorted(
            (v for v in final.pods.values() if v.job == key),
            key=lambda v: (v.index is None, v.index or 0),
        )
        nodes = [v.node or (final.quotas.get(v.quota, ("", ""))[1]) for v in pods]
        placed = [n for n in nodes if n]
        leaves = sorted({leaf_of.get(n, "") for n in placed})
        out[key] = {"leaves": leaves, "nodes": nodes}
        if jobs[key].launcher is not None:
            out[key]["launcher"] = [v.node or final.quotas.get(v.quota, ("", ""))[1] for v in pods if v.launcher]
        if scenario.has_upper_tiers:
            out[key].update(scenario.job_tiers(placed, dict(leaf_of)))
    return out
