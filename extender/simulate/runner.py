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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from extender import wellknown
from extender.conf import load_policy_text
from extender.emulator import Emulator
from extender.simulate.actors import ApiServerStandIn, HttpClient, Kubelet, KubeSchedulerStandIn
from extender.simulate.certs import write_self_signed
from extender.simulate.cluster import LocalCluster, local_settings
from extender.simulate.observation import (
    REPLICA_TYPE,
    NodeView,
    PhaseView,
    SimulationResult,
    StepRecord,
    job_views,
    node_views,
    phase_view,
)
from extender.simulate.registration import SERVICE_DNS, register_webhook
from extender.simulate.scenario import JobSpec, Scenario, Step
from extender.simulate.scenario_objects import cluster_objects, node_ready_condition, topology_objects_of

__all__ = ["SimClock", "Simulation"]

Obj = dict[str, Any]
Quantities = Mapping[str, int | float | str]
Progress = Callable[[int, int, str], None]


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
        self.cluster.apply(cluster_objects(self.scenario))
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
            events.append(_submitted(job))
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
        """The job's PodGroup, then its pods through the admission chain: the launcher first (as
        the MPI operator creates it), then the workers in rank order."""
        key = f"{job.namespace}/{job.name}"
        self._jobs[key] = job
        pg: Obj = {
            "apiVersion": wellknown.API_VERSION,
            "kind": wellknown.KIND_PODGROUP,
            "metadata": {"name": job.name, "namespace": job.namespace, "labels": dict(job.labels)},
            "spec": {"minMember": job.members, "queue": job.queue},
        }
        if job.topology:
            pg["spec"]["topology"] = job.topology
        self.emulator.apply(pg)
        await self.cluster.settle()  # as on a cluster, the PodGroup exists before its pods are admitted
        if job.launcher is not None:
            await self.create_launcher(job)
        for i in range(job.workers):
            await self.create_worker(job, i)

    def worker(self, job: JobSpec, i: int) -> Obj:
        """Worker ``i``: ``<job>-worker-<i>``, the job's request, ``{i}`` of its quota → ``i``."""
        quota = job.quota.replace("{i}", str(i)) if job.quota else None
        return _pod(
            job, job.pod_name(i), role="worker", replica=i, rank=job.task_index(i), request=job.request, quota=quota
        )

    def launcher(self, job: JobSpec) -> Obj:
        """The MPIJob's launcher: ``<job>-launcher``, task index 0, its own request and quota."""
        assert job.launcher is not None
        quota = job.launcher.quota.replace("{i}", "0") if job.launcher.quota else None
        return _pod(
            job, job.launcher_name, role="launcher", replica=0, rank=0, request=job.launcher.request, quota=quota
        )

    async def create_worker(self, job: JobSpec, i: int) -> None:
        assert self.apiserver is not None
        await self.apiserver.create_pod(self.worker(job, i))

    async def create_launcher(self, job: JobSpec) -> None:
        assert self.apiserver is not None
        await self.apiserver.create_pod(self.launcher(job))

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
                for obj in topology_objects_of(self.scenario, node, leaf):
                    emu.apply(obj)
                self.leaf_of[node] = leaf

    async def _recreate(self, namespace: str, pod: str) -> None:
        """The training operator brings back a deleted pod, worker or launcher (same name and index)."""
        for job in self._jobs.values():
            if job.namespace != namespace:
                continue
            if job.launcher is not None and job.launcher_name == pod:
                await self.create_launcher(job)
                return
            for i in range(job.workers):
                if job.pod_name(i) == pod:
                    await self.create_worker(job, i)
                    return

    # --- observing -----------------------------------------------------------------------------
    def view(self) -> PhaseView:
        return phase_view(self.emulator)

    def node_views(self) -> list[NodeView]:
        return node_views(self.emulator, self.scenario, self.leaf_of, self.gpu_resource)

    def job_views(self) -> dict[str, dict[str, list[str]]]:
        return job_views(self.view(), self._jobs, self.scenario, self.leaf_of)


def _submitted(job: JobSpec) -> str:
    """The step's line for a submitted job: its pods and their requests."""
    line = f"job {job.namespace}/{job.name} submitted: {job.workers} pod(s) × {job.request}"
    if job.launcher is not None:
        line += f" + launcher {job.launcher.request}"
    return line


def _pod(job: JobSpec, name: str, *, role: str, replica: int, rank: int, request: Quantities, quota: str | None) -> Obj:
    """A pod of ``job`` as its training operator creates it: the Kubeflow labels (replica type and
    index within the type), the group annotation, the quota it names; with a launcher, its task
    index (``rank``) too, as the MPI operator's ranks differ from the replica indices."""
    annotations = {wellknown.ANNO_GROUP_NAME: job.name, **job.annotations}
    if quota:
        annotations[wellknown.ANNO_QUOTA_NAME] = quota
    if job.launcher is not None:
        annotations[wellknown.ANNO_TASK_INDEX] = str(rank)
    if job.spot:
        annotations[wellknown.ANNO_SPOT_POOL] = job.spot_pool
    labels = {"training.kubeflow.org/job-name": job.name, "training.kubeflow.org/replica-index": str(replica)}
    if job.launcher is not None:
        labels[REPLICA_TYPE] = role
    labels.update(job.labels)
    requests = {k: str(v) for k, v in request.items()}
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
    meta = {"name": name, "namespace": job.namespace, "labels": labels, "annotations": annotations}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
