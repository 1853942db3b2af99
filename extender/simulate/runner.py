"""Running a scenario through the real components, step by step (issue 7, seed 2.6–2.7).

A :class:`Simulation` starts a :class:`~extender.simulate.cluster.LocalCluster` with the
service's HTTP apps (extender on 127.0.0.1, webhook over HTTPS with a throwaway CA), applies the
scenario's cluster, and for each step:

1. applies the step's events and creates its jobs — PodGroups directly, pods through the
   emulator's admission chain, which calls the **webhook** (hop ①) registered in it as the chart
   registers it (:mod:`extender.simulate.registration`), so it annotates them with their quota;
2. runs **binder** cycles until one writes nothing (hop ②: quotas land on nodes);
3. runs rounds of the **kube-scheduler** stand-in (filter → prioritize → bind over HTTP, hop ③),
   the kubelet stand-in and binder cycles until nothing moves.

After each of the three hops it records each quota's phase and node and each pod's phase and node
(or the quota it waits for) — the seed's observation table (2.7).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extender import wellknown
from extender.cache.convert import node_index
from extender.conf import load_policy_text
from extender.emulator import Emulator
from extender.simulate.actors import ApiServerStandIn, HttpClient, Kubelet, KubeSchedulerStandIn
from extender.simulate.certs import write_self_signed
from extender.simulate.cluster import LocalCluster, local_settings
from extender.simulate.registration import SERVICE_DNS, register_webhook
from extender.simulate.scenario import JobSpec, Scenario, Step, node_ready_condition

__all__ = ["NodeView", "PhaseView", "PodView", "Simulation", "SimulationResult", "StepRecord"]

Obj = dict[str, Any]
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, slots=True)
class PodView:
    phase: str
    node: str
    quota: str
    quota_node: str
    job: str
    index: int | None


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


class SimClock:
    """Simulated time: the runner advances it (a binder period per cycle, a pause per step), so
    that throttles, back-offs and reservation TTLs behave as on a cluster, however fast we run."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Simulation:
    STEP_PAUSE = 30.0  # simulated seconds between two steps

    def __init__(
        self,
        scenario: Scenario,
        *,
        progress: Progress | None = None,
        emulator_port: int = 0,
        ops_port: int = 0,
        real_time: bool = False,
    ) -> None:
        """``real_time``: the wall clock instead of simulated time (the sandbox); ``ops_port``: where
        ``/diagnose`` and ``/metrics`` listen on 127.0.0.1 (0: any free port)."""
        self.scenario = scenario
        self.clock: SimClock | None = None if real_time else SimClock()
        self.progress = progress
        self._tmp = tempfile.TemporaryDirectory(prefix="sky-simulate-")
        tls = write_self_signed(Path(self._tmp.name), hosts=("127.0.0.1", "localhost", SERVICE_DNS))
        self.tls = tls
        policy = None
        if scenario.policy is not None:
            import yaml  # noqa: PLC0415

            policy = load_policy_text(yaml.safe_dump(scenario.policy), f"scenario {scenario.name}: policy")
        self.gpu_resource = scenario.defaults.gpu_resource
        settings = local_settings(tls, gpu_resources=self.gpu_resource, ops_port=ops_port)
        self.settings = settings
        self.cluster = LocalCluster(
            settings=settings, policy=policy, serve=True, clock=self.clock, emulator_port=emulator_port
        )
        self.leaf_of = scenario.leaf_of()
        self._jobs: dict[str, JobSpec] = {}
        self.client: HttpClient | None = None
        self.apiserver: ApiServerStandIn | None = None
        self.scheduler: KubeSchedulerStandIn | None = None
        self.kubelet: Kubelet | None = None

    @property
    def emulator(self) -> Emulator:
        return self.cluster.emulator

    async def __aenter__(self) -> Simulation:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        await self.cluster.start()
        rt = self.cluster.rt
        hook = rt.servers.get("webhook")
        self.client = HttpClient(ca_file=self.tls.ca_file)
        if hook is not None:  # pods reach the webhook through the emulator's admission chain
            register_webhook(self.emulator, hook.url, self.tls.ca_file)
        self.apiserver = ApiServerStandIn(self.emulator, None, self.client)
        self.scheduler = KubeSchedulerStandIn(self.emulator, rt.servers["extender"].url, self.client)
        self.kubelet = Kubelet(self.emulator)
        self.cluster.apply(self.scenario.cluster_objects())
        await self.cluster.settle()

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.close()
        await self.cluster.stop()
        self._tmp.cleanup()

    # --- running -----------------------------------------------------------------------------
    async def run(self) -> SimulationResult:
        records = []
        total = len(self.scenario.steps)
        for i, step in enumerate(self.scenario.steps):
            if self.progress is not None:
                self.progress(i + 1, total, step.title or f"step {i + 1}")
            records.append(await self.run_step(i, step))
        assert self.apiserver is not None
        return SimulationResult(self.scenario, records, self.node_views(), self.job_views(), self.apiserver.warnings)

    async def cycle(self) -> Any:
        if self.clock is not None:
            self.clock.advance(self.settings.binder_period)
        return await self.cluster.cycle()

    async def round(self) -> bool:
        """One kube-scheduler round, the kubelet, one binder cycle; True if anything moved."""
        assert self.scheduler is not None and self.kubelet is not None
        attempts = await self.scheduler.schedule_round()
        await self.cluster.settle()
        started = self.kubelet.run_bound_pods()
        report = await self.cycle()
        return bool(any(a.node or a.preempted for a in attempts) or started or report.quota_writes or report.pod_writes)

    async def run_forever(self, stop: asyncio.Event, *, period: float = 1.0) -> None:
        """The sandbox: play the scenario's steps in real time, then keep the cluster scheduling
        (pods created with kubectl go through the binder and the extender like any other)."""
        for i, step in enumerate(self.scenario.steps):
            if stop.is_set():
                return
            await self.run_step(i, step)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=period)
        while not stop.is_set():
            await self.round()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=period)

    async def run_step(self, index: int, step: Step) -> StepRecord:
        if self.clock is not None:
            self.clock.advance(self.STEP_PAUSE)
        events = [e.describe() for e in step.events]
        for event in step.events:
            await self.apply_event(event)
        for job in step.jobs:
            await self.submit(job)
            events.append(f"job {job.namespace}/{job.name} submitted: {job.workers} pod(s) × {job.request}")
        await self.cluster.settle()
        after_webhook = self.view()
        for _ in range(step.rounds):
            report = await self.cycle()
            if not report.quota_writes and not report.pod_writes:
                break
        after_binder = self.view()
        rounds = 0
        assert self.scheduler is not None
        for rounds in range(1, step.rounds + 1):  # noqa: B007
            if not await self.round():
                break
        for _ in range(int(step.wait / self.settings.binder_period)):
            await self.round()
            rounds += 1
        after = self.view()
        pending = {k: v for k, v in self.scheduler.last_failure.items() if k in after.pods and not after.pods[k].node}
        return StepRecord(
            index,
            step.title,
            events,
            after_webhook,
            after_binder,
            after,
            pending,
            rounds,
            nodes=self.node_views(),
            jobs=self.job_views(),
        )

    async def submit(self, job: JobSpec) -> None:
        key = f"{job.namespace}/{job.name}"
        self._jobs[key] = job
        pg: Obj = {
            "apiVersion": wellknown.API_VERSION,
            "kind": wellknown.KIND_PODGROUP,
            "metadata": {"name": job.name, "namespace": job.namespace, "labels": dict(job.labels)},
            "spec": {"minMember": job.min_member or job.workers, "queue": job.queue},
        }
        if job.topology:
            pg["spec"]["topology"] = job.topology
        self.emulator.apply(pg)
        await self.cluster.settle()  # as on a cluster, the PodGroup exists before its pods are admitted
        for i in range(job.workers):
            await self.create_worker(job, i)

    def worker(self, job: JobSpec, i: int) -> Obj:
        annotations = {wellknown.ANNO_GROUP_NAME: job.name, **job.annotations}
        if job.quota:
            annotations[wellknown.ANNO_QUOTA_NAME] = job.quota.replace("{i}", str(i))
        if job.spot:
            annotations[wellknown.ANNO_SPOT_POOL] = job.spot_pool
        labels = {"training.kubeflow.org/job-name": job.name, "training.kubeflow.org/replica-index": str(i)}
        labels.update(job.labels)
        requests = {k: str(v) for k, v in job.request.items()}
        spec: Obj = {
            "schedulerName": wellknown.SCHEDULER_NAME,
            "priority": job.priority,
            "containers": [
                {
                    "name": "trainer",
                    "image": "pytorch/pytorch:2",
                    "resources": {"requests": requests, "limits": requests},
                }
            ],
        }
        if job.node_selector:
            spec["nodeSelector"] = job.node_selector
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": job.pod_name(i),
                "namespace": job.namespace,
                "labels": labels,
                "annotations": annotations,
            },
            "spec": spec,
        }

    async def create_worker(self, job: JobSpec, i: int) -> None:
        assert self.apiserver is not None
        await self.apiserver.create_pod(self.worker(job, i))

    # --- events --------------------------------------------------------------------------------
    async def apply_event(self, event: Any) -> None:
        emu = self.emulator
        if event.delete_pod is not None:
            ref = event.delete_pod
            emu.delete("v1", "pods", ref.pod, ref.namespace)
            await self._recreate(ref.namespace, ref.pod)
        elif event.pod_moved is not None:
            ref = event.pod_moved
            old = emu.get("v1", "pods", ref.pod, ref.namespace)
            emu.delete("v1", "pods", ref.pod, ref.namespace)
            moved = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": ref.pod,
                    "namespace": ref.namespace,
                    "labels": old["metadata"].get("labels") or {},
                    "annotations": {
                        k: v
                        for k, v in (old["metadata"].get("annotations") or {}).items()
                        if k != wellknown.ANNO_QUOTA_NODE
                    },
                },
                "spec": {**old["spec"], "nodeName": ref.node},
                "status": {"phase": "Running"},
            }
            emu.create(moved, with_status=True)
        elif event.node_down is not None or event.node_up is not None:
            name = event.node_down or event.node_up
            node = emu.get("v1", "nodes", name)
            status = dict(node.get("status") or {})
            others = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
            status["conditions"] = [*others, node_ready_condition(event.node_up is not None)]
            emu.patch("v1", "nodes", name, {"status": status}, subresource="status")
            if event.node_down is not None:  # the node lifecycle controller evicts its pods
                for pod in emu.list("v1", "pods", field_selector=f"spec.nodeName={name}"):
                    meta = pod["metadata"]
                    emu.delete("v1", "pods", meta["name"], meta["namespace"])
                    await self._recreate(meta["namespace"], meta["name"])
        elif event.job_finished is not None:
            ns, _, name = event.job_finished.partition("/")
            assert self.kubelet is not None
            for pod in emu.list("v1", "pods", namespace=ns):
                if (pod["metadata"].get("annotations") or {}).get(wellknown.ANNO_GROUP_NAME) == name:
                    self.kubelet.set_phase(pod, "Succeeded")
        elif event.cable_moved is not None:
            for node, leaf in event.cable_moved.items():
                for obj in self.scenario.topology_objects_of(node, leaf):
                    emu.apply(obj)
                self.leaf_of[node] = leaf

    async def _recreate(self, namespace: str, pod: str) -> None:
        """The training operator brings back a deleted worker (same name and index)."""
        for job in self._jobs.values():
            if job.namespace != namespace:
                continue
            for i in range(job.workers):
                if job.pod_name(i) == pod:
                    await self.create_worker(job, i)
                    return

    # --- observing -----------------------------------------------------------------------------
    def view(self) -> PhaseView:
        quotas = {
            q["metadata"]["name"]: (
                (q.get("status") or {}).get("phase", "QuotaEmpty"),
                (q.get("status") or {}).get("nodeName", ""),
            )
            for q in self.emulator.list(wellknown.API_VERSION, wellknown.QUOTAS)
        }
        pods = {}
        for p in self.emulator.list("v1", "pods"):
            if (p.get("spec") or {}).get("schedulerName") != wellknown.SCHEDULER_NAME:
                continue
            meta = p["metadata"]
            anno = meta.get("annotations") or {}
            labels = meta.get("labels") or {}
            index = labels.get("training.kubeflow.org/replica-index")
            pods[f"{meta['namespace']}/{meta['name']}"] = PodView(
                phase=(p.get("status") or {}).get("phase", "Pending"),
                node=(p.get("spec") or {}).get("nodeName", ""),
                quota=anno.get(wellknown.ANNO_QUOTA_NAME, ""),
                quota_node=anno.get(wellknown.ANNO_QUOTA_NODE, ""),
                job=f"{meta['namespace']}/{anno.get(wellknown.ANNO_GROUP_NAME, meta['name'])}",
                index=int(index) if index is not None and index.isdigit() else None,
            )
        return PhaseView(quotas, pods)

    def node_views(self) -> list[NodeView]:
        emu = self.emulator
        quotas = emu.list(wellknown.API_VERSION, wellknown.QUOTAS)
        pods = [
            p for p in emu.list("v1", "pods") if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        views = []
        for n in emu.list("v1", "nodes"):
            name = n["metadata"]["name"]
            q_gpus = {
                q["metadata"]["name"]: _gpu(q["spec"]["request"], self.gpu_resource)
                for q in quotas
                if (q.get("status") or {}).get("nodeName") == name
            }
            p_gpus = {
                f"{p['metadata']['namespace']}/{p['metadata']['name']}": _gpu(
                    p["spec"]["containers"][0]["resources"].get("requests"), self.gpu_resource
                )
                for p in pods
                if (p.get("spec") or {}).get("nodeName") == name
            }
            views.append(
                NodeView(
                    name=name,
                    leaf=self.leaf_of.get(name, ""),
                    spine=self.scenario.spine_of().get(self.leaf_of.get(name, ""), ""),
                    model=(n["metadata"].get("labels") or {}).get("nvidia.com/gpu.product", ""),
                    gpus=_gpu((n.get("status") or {}).get("allocatable"), self.gpu_resource),
                    ready=any(
                        c.get("type") == "Ready" and c.get("status") == "True"
                        for c in (n.get("status") or {}).get("conditions") or []
                    ),
                    quota_gpus=q_gpus,
                    pod_gpus=p_gpus,
                    index=node_index(name, n["metadata"].get("annotations") or {}),
                )
            )
        order = {n: i for i, n in enumerate(self.scenario.node_names())}
        views.sort(key=lambda v: (order.get(v.name, 1 << 30), v.name))
        return views

    def job_views(self) -> dict[str, dict[str, list[str]]]:
        final = self.view()
        out: dict[str, dict[str, list[str]]] = {}
        for key in sorted(self._jobs):
            pods = sorted(
                (v for v in final.pods.values() if v.job == key),
                key=lambda v: (v.index is None, v.index or 0),
            )
            nodes = [v.node or (final.quotas.get(v.quota, ("", ""))[1]) for v in pods]
            placed = [n for n in nodes if n]
            leaves = sorted({self.leaf_of.get(n, "") for n in placed})
            out[key] = {"leaves": leaves, "nodes": nodes}
            if self.scenario.has_upper_tiers:
                out[key].update(self.scenario.job_tiers(placed, self.leaf_of))
        return out
