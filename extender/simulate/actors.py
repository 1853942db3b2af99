"""Stand-ins for the parts of a cluster that are not ours, driving our components as they would.

* :class:`ApiServerStandIn` creates pods the way kube-apiserver does. Without a ``webhook_url``
  (the simulator, the sandbox) it hands them to the emulator's own admission chain, which calls
  the MutatingWebhookConfigurations stored in it (:mod:`extender.emulator.admission`). With one
  (tests aiming at one replica's webhook) it calls that webhook itself: defaulting, an
  ``admission.k8s.io/v1`` AdmissionReview over HTTPS (path ``/mutate/pods?timeout=10s``), the
  returned JSONPatch applied, then the object stored.
* :class:`KubeSchedulerStandIn` schedules pending pods of our ``schedulerName`` the way
  kube-scheduler does with an extender configured ``nodeCacheCapable: true``: in-tree resource
  fit (NodeResourcesFit, taints, nodeSelector, readiness), then ``POST /filter`` with
  ``NodeNames``, ``/prioritize`` when more than one node passes, ``/bind``; and, when the
  extender says preemption may help (``FailedNodes``), DefaultPreemption: a dry run choosing
  each node's lower-priority victims, ``POST /preempt``, and of the nodes the extender answers
  the one kube-scheduler picks (:mod:`extender.simulate.preemption`), whose victims are deleted —
  unless the pod's ``preemptionPolicy`` is ``Never``.
* :class:`Kubelet` marks bound pods Running; node lifecycle and a training operator (recreate the
  pods of a job that lost them) are small helpers of the runner.

They only talk to our components over HTTP and to the emulator through its API, so everything
they exercise is the production code path.
"""

from __future__ import annotations

import base64
import copy
import ssl
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from extender import wellknown
from extender.cache.convert import format_time, pod_request
from extender.emulator import Emulator
from extender.emulator.admission import pod_create_review
from extender.emulator.patch import apply_json_patch
from extender.model.resources import Resource
from extender.model.selectors import Taint, Toleration, untolerated_taint
from extender.simulate.preemption import Victims, pick_node, priority, select_victims

__all__ = ["ApiServerStandIn", "Attempt", "HttpClient", "KubeSchedulerStandIn", "Kubelet"]

Obj = dict[str, Any]
_OPERATOR: Obj = {"username": "system:serviceaccount:kubeflow:training-operator"}
"""Who creates the simulated workers (the training operator's service account)."""


class HttpClient:
    """JSON over HTTP(S) for the stand-ins (aiohttp: kubernetes-asyncio's own transport)."""

    def __init__(self, *, ca_file: str | Path | None = None, timeout: float = 30.0) -> None:
        self._ssl = ssl.create_default_context(cafile=str(ca_file)) if ca_file else None
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout))

    async def post_json(self, url: str, body: Any) -> tuple[int, Any]:
        async with self._session.post(
            url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}, ssl=self._ssl or True
        ) as r:
            raw = await r.read()
        try:
            return r.status, orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            return r.status, None

    async def close(self) -> None:
        await self._session.close()


class ApiServerStandIn:
    def __init__(self, emulator: Emulator, webhook_url: str | None, client: HttpClient) -> None:
        self.emulator = emulator
        self.webhook_url = webhook_url
        self.client = client
        self.warnings: list[str] = []
        self.dry_run = False  # admission requests say dryRun (a `kubectl create --dry-run=server`)

    async def create_pod(self, pod: Obj) -> Obj:
        if self.webhook_url is None:
            result = await self.emulator.create_admitted(pod, user=_OPERATOR)
            self.warnings.extend(result.warnings)
            self.warnings.extend(c.detail for c in result.calls if c.outcome == "failed-open")
            return result.obj
        pod = copy.deepcopy(pod)
        spec = pod.setdefault("spec", {})
        spec.setdefault("schedulerName", "default-scheduler")  # API defaulting happens before admission
        meta = pod.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        if self.webhook_url is not None:
            pod = await self._admit(pod)
        return self.emulator.create(pod)

    async def _admit(self, pod: Obj) -> Obj:
        meta = pod["metadata"]
        review = pod_create_review(pod, namespace=meta["namespace"], user=_OPERATOR, dry_run=self.dry_run)
        status, doc = await self.client.post_json(f"{self.webhook_url}/mutate/pods?timeout=10s", review)
        if status != 200 or not isinstance(doc, dict):  # failurePolicy: Ignore — the pod is created unchanged
            self.warnings.append(f"webhook answered {status} for {meta.get('name')}")
            return pod
        response = doc.get("response") or {}
        self.warnings.extend(response.get("warnings") or [])
        if not response.get("allowed", False):
            raise RuntimeError(f"admission denied: {(response.get('status') or {}).get('message')}")
        if response.get("patch"):
            ops = orjson.loads(base64.b64decode(response["patch"]))
            pod = apply_json_patch(pod, ops)
        return pod


class Kubelet:
    """Marks pods bound to a Ready node Running (and the rest of the container lifecycle we need)."""

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator

    def run_bound_pods(self) -> int:
        ready = {n["metadata"]["name"] for n in self.emulator.list("v1", "nodes") if _ready(n)}
        started = 0
        for pod in self.emulator.list("v1", "pods"):
            node = (pod.get("spec") or {}).get("nodeName")
            phase = (pod.get("status") or {}).get("phase")
            if node and node in ready and phase == "Pending":
                self.set_phase(pod, "Running")
                started += 1
        return started

    def set_phase(self, pod: Obj, phase: str) -> Obj:
        """Set the pod's phase and what a kubelet reports with it: a Running pod's containers are
        running and ready (``kubectl get pods`` shows ``1/1 Running``), a finished pod's are
        terminated and no longer ready."""
        status = dict(pod.get("status") or {})
        status["phase"] = phase
        now = format_time(_now())
        if phase == "Running":
            status.setdefault("startTime", now)
        running = phase == "Running"
        state: Obj = (
            {"running": {"startedAt": status["startTime"]}}
            if running
            else {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": now}}
        )
        if phase in ("Running", "Succeeded"):
            status["containerStatuses"] = [
                {
                    "name": c.get("name", ""),
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": running,
                    "started": running,
                    "restartCount": 0,
                    "state": state,
                }
                for c in (pod.get("spec") or {}).get("containers") or []
            ]
            kinds = ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            others = [c for c in status.get("conditions") or [] if c.get("type") not in kinds]
            status["conditions"] = others + [
                {"type": t, "status": "True" if running or t in kinds[:2] else "False", "lastTransitionTime": now}
                for t in kinds
            ]
        meta = pod["metadata"]
        return self.emulator.patch(
            "v1", "pods", meta["name"], {"status": status}, namespace=meta["namespace"], subresource="status"
        )


@dataclass(slots=True)
class Attempt:
    pod: str
    node: str = ""
    message: str = ""
    preempted: list[str] = field(default_factory=list)


class KubeSchedulerStandIn:
    def __init__(
        self,
        emulator: Emulator,
        extender_url: str,
        client: HttpClient,
        *,
        scheduler_name: str = wellknown.SCHEDULER_NAME,
    ) -> None:
        self.emulator = emulator
        self.url = extender_url.rstrip("/")
        self.client = client
        self.scheduler_name = scheduler_name
        self.last_failure: dict[str, str] = {}  # pod → why it is still pending (FailedScheduling)

    async def _post(self, verb: str, body: Obj) -> Any:
        status, doc = await self.client.post_json(f"{self.url}/{verb}", body)
        if status != 200:
            raise RuntimeError(f"failed {verb} with extender at URL {self.url}/{verb}, code {status}")
        return doc

    def pending(self) -> list[Obj]:
        pods = [
            p
            for p in self.emulator.list("v1", "pods")
            if (p.get("spec") or {}).get("schedulerName") == self.scheduler_name
            and not (p.get("spec") or {}).get("nodeName")
            and not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase", "Pending") == "Pending"
        ]
        # the active queue: priority first, then age (kube-scheduler's PrioritySort)
        pods.sort(key=lambda p: (-int((p.get("spec") or {}).get("priority") or 0), p["metadata"]["creationTimestamp"]))
        return pods

    async def schedule_round(self) -> list[Attempt]:
        attempts = []
        for pod in self.pending():
            attempts.append(await self.schedule_one(pod))
        return attempts

    async def schedule_one(self, pod: Obj) -> Attempt:
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        attempt = Attempt(key)
        nodes = self.emulator.list("v1", "nodes")
        pods = self.emulator.list("v1", "pods")
        feasible, in_tree = _in_tree_filter(pod, nodes, pods)
        if not feasible:
            attempt.message = _aggregate(len(nodes), in_tree)
            # PostFilter: nodes short of resources are preemption candidates (then the extender)
            short = [n for n, why in in_tree.items() if why.startswith("Insufficient")]
            if short:
                attempt.preempted = await self._preempt(pod, short, nodes, pods)
            self.last_failure[key] = attempt.message
            return attempt
        reply = await self._post("filter", {"Pod": pod, "Nodes": None, "NodeNames": feasible})
        if reply.get("Error"):
            attempt.message = f"extender error: {reply['Error']}"
            self.last_failure[key] = attempt.message
            return attempt
        passed = list(reply.get("NodeNames") or [])
        if not passed:
            reasons = {**(reply.get("FailedNodes") or {}), **(reply.get("FailedAndUnresolvableNodes") or {}), **in_tree}
            attempt.message = _aggregate(len(nodes), reasons)
            resolvable = list(reply.get("FailedNodes") or {})
            if resolvable:
                attempt.preempted = await self._preempt(pod, resolvable, nodes, pods)
            self.last_failure[key] = attempt.message
            return attempt
        node = passed[0]
        if len(passed) > 1:
            scores = await self._post("prioritize", {"Pod": pod, "Nodes": None, "NodeNames": passed})
            best = {h["Host"]: h["Score"] for h in scores}
            node = max(passed, key=lambda n: (best.get(n, 0), -passed.index(n)))
        result = await self._post(
            "bind", {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
        )
        if result.get("Error"):
            attempt.message = f"binding rejected: {result['Error']}"
            self.last_failure[key] = attempt.message
            return attempt
        attempt.node = node
        self.last_failure.pop(key, None)
        return attempt

    async def _preempt(self, pod: Obj, candidates: list[str], nodes: list[Obj], pods: list[Obj]) -> list[str]:
        """kube-scheduler's DefaultPreemption (:mod:`extender.simulate.preemption`): the dry run
        over the resolvable nodes (each node's victims), ``/preempt``, then of the nodes the
        extender answers the one ``pickOneNodeForPreemption`` picks, whose victims are deleted (at
        once: the emulator has no graceful termination). Nothing for a pod whose
        ``preemptionPolicy`` is ``Never`` (a non-preempting PriorityClass): kube-scheduler finds it
        not eligible to preempt others, and neither dry-runs nor calls ``/preempt``."""
        if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
            return []
        now = _now()
        by_node: defaultdict[str, list[Obj]] = defaultdict(list)
        for p in pods:
            n = (p.get("spec") or {}).get("nodeName")
            if n and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                by_node[n].append(p)
        meta_victims: dict[str, Obj] = {}
        node_objs = {n["metadata"]["name"]: n for n in nodes}
        for name in candidates:
            node = node_objs.get(name)
            if node is None:
                continue
            free = _free(node, by_node[name])
            chosen = select_victims(pod_request(pod), priority(pod), free, by_node[name], now)
            if chosen:
                meta_victims[name] = {"Pods": [{"UID": v["metadata"]["uid"]} for v in chosen], "NumPDBViolations": 0}
        if not meta_victims:
            return []
        reply = await self._post(
            "preempt", {"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": meta_victims}
        )
        answered: dict[str, Victims] = {}
        for name, victims in (reply.get("NodeNameToMetaVictims") or {}).items():
            on_node = {p["metadata"]["uid"]: p for p in by_node[name]}
            uids = [v.get("UID") for v in (victims or {}).get("Pods") or []]
            if not uids or any(uid not in on_node for uid in uids):
                return []  # kube-scheduler: an error of a non-ignorable extender, no preemption
            answered[name] = ([on_node[uid] for uid in uids], int(victims.get("NumPDBViolations") or 0))
        target = pick_node(answered, now)
        if target is None:
            return []
        evicted = []
        for p in answered[target][0]:
            self.emulator.delete("v1", "pods", p["metadata"]["name"], p["metadata"]["namespace"])
            evicted.append(f"{p['metadata']['namespace']}/{p['metadata']['name']}")
        return evicted


def _now() -> float:
    import time  # noqa: PLC0415

    return time.time()


def _ready(node: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def _free(node: Obj, pods: list[Obj]) -> Resource:
    free = Resource.from_list((node.get("status") or {}).get("allocatable"))
    for p in pods:
        free.isub(pod_request(p))
    return free


def _in_tree_filter(pod: Obj, nodes: list[Obj], pods: list[Obj]) -> tuple[list[str], dict[str, str]]:
    """NodeUnschedulable, TaintToleration, NodeAffinity (nodeSelector) and NodeResourcesFit."""
    spec = pod.get("spec") or {}
    need = pod_request(pod)
    tolerations = tuple(Toleration.from_api(t) for t in spec.get("tolerations") or [])
    selector = spec.get("nodeSelector") or {}
    by_node: defaultdict[str, list[Obj]] = defaultdict(list)
    for p in pods:
        n = (p.get("spec") or {}).get("nodeName")
        if n and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            by_node[n].append(p)
    ok: list[str] = []
    failed: dict[str, str] = {}
    for node in nodes:
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        taints = tuple(Taint.from_api(t) for t in (node.get("spec") or {}).get("taints") or [])
        if not _ready(node):
            failed[name] = "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
        elif (node.get("spec") or {}).get("unschedulable"):
            failed[name] = "node(s) were unschedulable"
        elif untolerated_taint(taints, tolerations, frozenset({"NoSchedule", "NoExecute"})) is not None:
            failed[name] = "node(s) had untolerated taint"
        elif any(labels.get(k) != v for k, v in selector.items()):
            failed[name] = "node(s) didn't match Pod's node affinity/selector"
        else:
            short = need.shortfalls(_free(node, by_node[name]))
            if short:
                failed[name] = "Insufficient " + ", ".join(s.name for s in short)
            else:
                ok.append(name)
    return ok, failed


def _aggregate(total: int, reasons: dict[str, str]) -> str:
    """kube-scheduler's FailedScheduling text: ``0/8 nodes are available: 4 <reason>, 4 <reason>.``"""
    counts: dict[str, int] = defaultdict(int)
    for msg in reasons.values():
        counts[msg] += 1
    parts = ", ".join(f"{n} {msg}" for msg, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"0/{total} nodes are available: {parts}."
