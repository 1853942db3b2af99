"""Scenario files: a cluster, its quotas and queues, jobs, and timed events (YAML).

A scenario describes a cluster the way an operator thinks of it — leaf switches with their
nodes, quotas, jobs with their pods. This module holds the file's model, its validation, its
topology queries and loading; :mod:`extender.simulate.scenario_objects` turns it into the exact
Kubernetes objects the real components see (Nodes with allocatable and labels, NodeTopology,
Quota, Queue, JobQueue), and the runner creates the PodGroups and Pods of its jobs.
``examples/scenarios/README.md`` documents every key; unknown keys are errors.

::

    name: seed-8-node
    defaults: {gpuModel: A100, gpus: 8, rdma: 8}
    leaves:
      - {name: s1, nodes: [n0, n1, n2, n3]}
      - {name: s2, nodes: [n4, n5, n6, n7]}
    queues: [{name: research}]
    quotas:
      - {name: "q-train-{i}", count: 4, queue: research, request: {nvidia.com/gpu: 1, rdma/hca: 1}}
    steps:
      - title: submit job train
        jobs:
          - {name: train, workers: 4, minMember: 4, request: {nvidia.com/gpu: 1, rdma/hca: 1}}
      - title: q-train-1's pod found on n4
        events:
          - {podMoved: {pod: train-worker-1, node: n4}}
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from extender import wellknown
from extender.model.resources import QuantityError, Resource
from extender.model.topology import describe_tier, spanned_tier
from extender.simulate.fabric import Core, Spine, check_tree

__all__ = [
    "DEFAULT_SCENARIO",
    "Event",
    "Expect",
    "JobSpec",
    "LauncherSpec",
    "Scenario",
    "ScenarioError",
    "Step",
    "load_scenario",
]

DEFAULT_SCENARIO = "seed-8-node"


class ScenarioError(ValueError):
    pass


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


Quantity = int | float | str


def _check_resources(value: dict[str, Quantity], where: str) -> dict[str, Quantity]:
    try:
        Resource.from_list(value, what=where)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    return value


class NodeDefaults(_Model):
    gpu_model: str = Field("A100", alias="gpuModel")
    gpu_resource: str = Field(
        wellknown.RESOURCE_GPU,
        alias="gpuResource",
        description="the extended resource the nodes' GPUs are advertised as (serve runs with --gpu-resources it)",
    )
    gpus: int = Field(8, ge=0)
    rdma: int = Field(8, ge=0, description="rdma/hca devices per node")
    cpu: str = "128"
    memory: str = "1Ti"
    spot_gpus: int = Field(0, ge=0, alias="spotGpus", description="spot GPUs lent by each node")


class NodeOverride(_Model):
    gpu_model: str | None = Field(None, alias="gpuModel")
    gpus: int | None = Field(None, ge=0)
    rdma: int | None = Field(None, ge=0)
    index: int | None = None
    ready: bool = True
    unschedulable: bool = False
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[dict[str, str]] = Field(default_factory=list)
    spot_gpus: int | None = Field(None, ge=0, alias="spotGpus")
    nvlink: str | None = Field(None, description="NVLink domain (tier 0) of the node; overrides its leaf's")
    mount_points: dict[str, bool] = Field(
        default_factory=dict,
        alias="mountPoints",
        description="{mount point: ready}: what the node's storage daemon reports (condition infiniai-fs-<id>)",
    )


class Leaf(_Model):
    name: str
    nodes: list[str] = Field(min_length=1)
    gpu_model: str | None = Field(None, alias="gpuModel")
    fabric: Literal["roce", "ib"] = "roce"
    nvlink: str | None = Field(None, description="NVLink domain (tier 0) of every node of the leaf")


class QueueSpec(_Model):
    name: str
    weight: int = Field(1, ge=1)
    capability: dict[str, Quantity] | None = None
    state: Literal["Open", "Closed"] = "Open"


class JobQueueSpec(_Model):
    name: str
    selector: dict[str, str] = Field(description="PodGroup labels that select the job")
    priority: int = 0
    state: Literal["Open", "Closed"] = "Open"
    max_running: int | None = Field(None, ge=0, alias="maxRunningJobs")


class QuotaSpec(_Model):
    name: str = Field(description="a name; with count, '{i}' is replaced by 0..count-1")
    count: int = Field(1, ge=1)
    queue: str
    request: dict[str, Quantity]
    node_selector: dict[str, str] = Field(default_factory=dict, alias="nodeSelector")
    static_bind_node: str | None = Field(None, alias="staticBindNode")
    shared_queues: list[str] = Field(default_factory=list, alias="sharedQueues")
    affinity: dict[str, Any] | None = None
    labels: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _valid(self) -> QuotaSpec:
        _check_resources(self.request, f"quota {self.name}: request")
        if self.count > 1 and "{i}" not in self.name:
            raise ValueError(f"quota {self.name}: count > 1 needs '{{i}}' in the name")
        return self

    def names(self) -> list[str]:
        return [self.name.replace("{i}", str(i)) for i in range(self.count)]


class LauncherSpec(_Model):
    """An MPIJob's launcher: one more pod of the gang, ``<job>-launcher``, of task index 0 (the
    workers then take 1..workers), with its own request (2 CPUs, 8 GiB and an HCA, no GPU, say)
    and the quota it names — without one, the webhook picks one of the job's queue for it."""

    request: dict[str, Quantity]
    quota: str | None = Field(None, description="the launcher's pod names this quota: the required tier")

    @model_validator(mode="after")
    def _valid(self) -> LauncherSpec:
        _check_resources(self.request, "launcher: request")
        return self


class JobSpec(_Model):
    name: str
    namespace: str = "default"
    queue: str = "research"
    workers: int = Field(1, ge=1)
    min_member: int | None = Field(None, ge=1, alias="minMember")
    request: dict[str, Quantity]
    priority: int = 0
    spot: bool = False
    spot_pool: Literal["shared", "exclusive"] = Field("exclusive", alias="spotPool")
    quota: str | None = Field(
        None, description="workers name this quota ('{i}' → the worker's number, 0..workers-1): the required tier"
    )
    topology: dict[str, Any] | None = Field(None, description="PodGroup spec.topology")
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict, alias="nodeSelector")
    launcher: LauncherSpec | None = Field(
        None, description="an MPIJob: a launcher pod of task index 0 beside the workers"
    )

    @model_validator(mode="after")
    def _valid(self) -> JobSpec:
        _check_resources(self.request, f"job {self.name}: request")
        return self

    @property
    def pods(self) -> int:
        """How many pods the job has: its workers, and its launcher if any."""
        return self.workers + (1 if self.launcher is not None else 0)

    @property
    def members(self) -> int:
        """The PodGroup's minMember: as given, else every pod (the launcher counts)."""
        return self.min_member or self.pods

    def pod_name(self, i: int) -> str:
        """Worker ``i`` (0..workers-1), named as the training operators name it."""
        return f"{self.name}-worker-{i}"

    @property
    def launcher_name(self) -> str:
        return f"{self.name}-launcher"

    def task_index(self, i: int) -> int:
        """Worker ``i``'s task index (its rank): ``i``, or ``i + 1`` after a launcher (rank 0)."""
        return i + (1 if self.launcher is not None else 0)


class PodRef(_Model):
    pod: str
    namespace: str = "default"


class PodMoved(PodRef):
    node: str


class Event(_Model):
    """One thing that happens between two steps (exactly one key)."""

    delete_pod: PodRef | None = Field(None, alias="deletePod", description="delete a pod; its job recreates it")
    pod_moved: PodMoved | None = Field(
        None, alias="podMoved", description="someone else runs the pod on another node (the seed's drift)"
    )
    node_down: str | None = Field(None, alias="nodeDown", description="the node becomes NotReady; its pods are evicted")
    node_up: str | None = Field(None, alias="nodeUp")
    job_finished: str | None = Field(None, alias="jobFinished", description="namespace/name: its pods succeed")
    cable_moved: dict[str, str] | None = Field(
        None, alias="cableMoved", description="{node: leaf}: the node is now wired to another leaf"
    )

    @model_validator(mode="after")
    def _one(self) -> Event:
        given = [k for k in type(self).model_fields if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "an event has exactly one of: " + ", ".join(f.alias or k for k, f in type(self).model_fields.items())
            )
        return self

    def describe(self) -> str:
        if self.delete_pod is not None:
            return f"pod {self.delete_pod.pod} deleted"
        if self.pod_moved is not None:
            return f"pod {self.pod_moved.pod} found running on {self.pod_moved.node}"
        if self.node_down is not None:
            return f"node {self.node_down} down"
        if self.node_up is not None:
            return f"node {self.node_up} back"
        if self.job_finished is not None:
            return f"job {self.job_finished} finished"
        assert self.cable_moved is not None
        return ", ".join(f"{n} re-cabled to {leaf}" for n, leaf in self.cable_moved.items())


class Step(_Model):
    title: str = ""
    jobs: list[JobSpec] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    rounds: int = Field(20, ge=1, description="binder/scheduler rounds at most before the step is shown")
    wait: int = Field(
        0, ge=0, description="then let this many simulated seconds pass (a binder cycle and a scheduling round each)"
    )


class Expect(_Model):
    """What the scenario must end with (checked by the test suite and by ``simulate --check``)."""

    quotas: dict[str, str] = Field(default_factory=dict, description="quota → node ('' = unbound)")
    leaves: dict[str, list[str]] = Field(default_factory=dict, description="namespace/job → leaves it uses")
    spines: dict[str, list[str]] = Field(default_factory=dict, description="namespace/job → spines it uses")
    running: list[str] = Field(default_factory=list, description="jobs whose pods all run")
    pending: list[str] = Field(default_factory=list, description="jobs with no pod placed")
    reasons: dict[str, str] = Field(
        default_factory=dict, description="namespace/job → text every one of its pending pods' reason contains"
    )


class Scenario(_Model):
    name: str
    description: str = ""
    defaults: NodeDefaults = Field(default_factory=NodeDefaults)
    leaves: list[Leaf] = Field(min_length=1)
    spines: list[Spine] = Field(default_factory=list)
    cores: list[Core] = Field(default_factory=list)
    topology_from: Literal["agents", "topograph"] = Field(
        "agents",
        alias="topologyFrom",
        description="agents: a NodeTopology per node (leaf, spine, core in spec.tiers), NVLink domain as the GPU "
        "operator's nvidia.com/gpu.clique label; topograph: no NodeTopology, only NVIDIA Topograph's node labels",
    )
    nodes: dict[str, NodeOverride] = Field(default_factory=dict)
    queues: list[QueueSpec] = Field(default_factory=list)
    job_queues: list[JobQueueSpec] = Field(default_factory=list, alias="jobQueues")
    quotas: list[QuotaSpec] = Field(default_factory=list)
    steps: list[Step] = Field(min_length=1)
    policy: dict[str, Any] | None = Field(None, description="a scheduling policy to use instead of the default")
    expect: Expect | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        seen: set[str] = set()
        for leaf in self.leaves:
            for n in leaf.nodes:
                if n in seen:
                    raise ValueError(f"node {n} is listed under two leaves")
                seen.add(n)
        unknown = set(self.nodes) - seen
        if unknown:
            raise ValueError(f"nodes: {sorted(unknown)} are not under any leaf")
        check_tree("spine", "leaves", [(s.name, s.leaves) for s in self.spines], {leaf.name for leaf in self.leaves})
        check_tree("core", "spines", [(c.name, c.spines) for c in self.cores], {s.name for s in self.spines})
        if self.topology_from == "topograph" and any(e.cable_moved for st in self.steps for e in st.events):
            raise ValueError("cableMoved rewrites a NodeTopology: it needs topologyFrom: agents")
        names = [n for q in self.quotas for n in q.names()]
        if len(names) != len(set(names)):
            raise ValueError("two quotas have the same name")
        jobs = [f"{j.namespace}/{j.name}" for s in self.steps for j in s.jobs]
        if len(jobs) != len(set(jobs)):
            raise ValueError("two jobs have the same namespace/name")
        return self

    # --- topology --------------------------------------------------------------------------
    def node_names(self) -> list[str]:
        return [n for leaf in self.leaves for n in leaf.nodes]

    def leaf_of(self) -> dict[str, str]:
        return {n: leaf.name for leaf in self.leaves for n in leaf.nodes}

    def spine_of(self) -> dict[str, str]:
        """leaf → its spine (leaves under none are absent)."""
        return {leaf: s.name for s in self.spines for leaf in s.leaves}

    def core_of(self) -> dict[str, str]:
        """spine → its core."""
        return {spine: c.name for c in self.cores for spine in c.spines}

    def upper_tiers(self, leaf: str) -> dict[int, str]:
        """level → name above a leaf: 2 its spine, 3 that spine's core (as far as declared)."""
        out: dict[int, str] = {}
        spine = self.spine_of().get(leaf)
        if spine:
            out[2] = spine
            core = self.core_of().get(spine)
            if core:
                out[3] = core
        return out

    def tiers_of(self, node: str, leaf: str) -> tuple[str, ...]:
        """The node's tiers as the scheduler reads them (0 NVLink domain, 1 leaf, 2 spine, 3 core),
        named by the scenario's names."""
        o = self.nodes.get(node) or NodeOverride()
        declared = next((lf for lf in self.leaves if lf.name == leaf), None)
        nvlink = o.nvlink or (declared.nvlink if declared is not None else None) or ""
        upper = self.upper_tiers(leaf)
        return (nvlink, leaf, *(upper[lv] for lv in sorted(upper)))

    def job_tiers(self, placed: list[str], leaf_of: dict[str, str]) -> dict[str, list[str]]:
        """``span``: the highest tier the placed nodes span (``node`` for one node, ``cluster`` when
        they share no tier); ``spines``: the spines of their leaves (``leaf_of``: node → leaf now)."""
        spine_of = self.spine_of()
        leaves = {leaf_of.get(n, "") for n in placed}
        level = spanned_tier(self.tiers_of(n, leaf_of.get(n, "")) for n in placed)
        span = "node" if len(set(placed)) == 1 else describe_tier(level) if level is not None else "cluster"
        return {"span": [span] if placed else [], "spines": sorted({spine_of[lf] for lf in leaves if lf in spine_of})}

    @property
    def has_upper_tiers(self) -> bool:
        """The scenario declares spines or NVLink domains (the pictures then show them)."""
        return bool(self.spines) or any(lf.nvlink for lf in self.leaves) or any(o.nvlink for o in self.nodes.values())


def scenario_directory() -> Path:
    return Path(str(resources.files("extender").joinpath("scenarios")))


def load_scenario(ref: str | None = None) -> Scenario:
    """A scenario by file path, or by name among the embedded ones (default: the seed's example)."""
    ref = ref or DEFAULT_SCENARIO
    path = Path(ref)
    if not path.suffix and not path.exists():
        path = scenario_directory() / f"{ref}.yaml"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        names = sorted(p.stem for p in scenario_directory().glob("*.yaml"))
        raise ScenarioError(
            f"cannot read scenario {ref!r}: {exc.strerror or exc} (embedded scenarios: {', '.join(names)})"
        ) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {exc}") from None
    try:
        return Scenario.model_validate(doc)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors())
        raise ScenarioError(f"{path}: {problems}") from None
