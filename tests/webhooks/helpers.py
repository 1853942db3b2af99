"""Helpers for the webhook tests: AdmissionReview documents as the apiserver sends them, a tiny
RFC 6902 applier, and the webhook served over real HTTPS."""

from __future__ import annotations

import base64
import copy
import json
import ssl
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.cache.convert import format_time
from extender.conf import default_policy
from extender.framework.policy import Policy
from extender.metrics import Metrics
from extender.simulate.certs import TLSFiles
from tests import builders as b
from webhooks.app import MUTATE_PATH, create_app
from webhooks.namespaces import NamespaceLabelStore
from webhooks.server import WebhookServer
from webhooks.state import WebhookConfig, WebhookState

SAMPLES = Path(__file__).parent / "samples"
NOW = 1_800_000_000.0  # 2027-01-15: every test runs at this instant unless it moves the clock
URL = MUTATE_PATH + "?timeout=10s"  # what the apiserver calls

_POLICY: Policy | None = None


def policy() -> Policy:
    global _POLICY
    if _POLICY is None:
        _POLICY = default_policy()
    return _POLICY


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def sample_review() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((SAMPLES / "admission-review-pod-create.json").read_text())
    return doc


def sample_response() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((SAMPLES / "admission-review-response.json").read_text())
    return doc


# --- objects as admission sees them -----------------------------------------------------------
def admission_pod(
    name: str | None,
    *,
    generate_name: str | None = None,
    no_annotations: bool = False,
    queue_anno: str | None = None,
    **kw: Any,
) -> dict[str, Any]:
    """A pod as a mutating webhook receives it on CREATE: no uid, resourceVersion or
    creationTimestamp yet, empty status; ``name=None`` for a ``generateName`` pod.
    ``queue_anno``: the queue of a pod without a PodGroup (annotation ``queue-name``)."""
    if queue_anno is not None:
        kw["annotations"] = {**(kw.get("annotations") or {}), wellknown.ANNO_QUEUE_NAME: queue_anno}
    pod = b.pod(name or "placeholder", **kw)
    meta = pod["metadata"]
    for k in ("uid", "resourceVersion", "creationTimestamp"):
        meta.pop(k)
    if name is None:
        del meta["name"]
        meta["generateName"] = generate_name or "pod-"
    if no_annotations:
        assert not meta["annotations"], "no_annotations with annotations given"
        del meta["annotations"]
    pod["status"] = {}
    return pod


def review(
    obj: Mapping[str, Any] | None,
    *,
    uid: str | None = None,
    operation: str = "CREATE",
    dry_run: bool = False,
    kind: tuple[str, str, str] = ("", "v1", "Pod"),
    resource: tuple[str, str, str] = ("", "v1", "pods"),
    sub_resource: str | None = None,
    old: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    meta = (obj or old or {}).get("metadata") or {}
    request: dict[str, Any] = {
        "uid": uid or str(uuid.uuid4()),
        "kind": {"group": kind[0], "version": kind[1], "kind": kind[2]},
        "resource": {"group": resource[0], "version": resource[1], "resource": resource[2]},
        "requestKind": {"group": kind[0], "version": kind[1], "kind": kind[2]},
        "requestResource": {"group": resource[0], "version": resource[1], "resource": resource[2]},
        "namespace": meta.get("namespace", "default"),
        "operation": operation,
        "userInfo": {"username": "system:serviceaccount:kubeflow:training-operator", "groups": []},
        "object": copy.deepcopy(obj) if obj is not None else None,
        "oldObject": copy.deepcopy(old) if old is not None else None,
        "dryRun": dry_run,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }
    if meta.get("name"):
        request["name"] = meta["name"]
    if sub_resource:
        request["subResource"] = sub_resource
    return {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request}


def reservation(
    *, job: str, index: int | None, namespace: str, pod_name: str, gpu: int = 1, hca: int = 1, ttl: float = 300
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "job": job,
        "namespace": namespace,
        "podName": pod_name,
        "podUID": str(uuid.uuid4()),
        "reason": "Preempted",
        "expiresAt": format_time(NOW + ttl),
        "request": {wellknown.RESOURCE_GPU: str(gpu), wellknown.RESOURCE_RDMA_HCA: str(hca)},
    }
    if index is not None:
        out["taskIndex"] = index
    return out


def bound(node: str, **extra: Any) -> dict[str, Any]:
    return {"phase": "QuotaBound", "nodeName": node, **extra}


# --- RFC 6902 (add / replace / remove on objects) ------------------------------------------------
def _tokens(path: str) -> list[str]:
    assert path.startswith("/"), path
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def apply_patch(doc: Mapping[str, Any], ops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Apply ``ops`` to a deep copy of ``doc`` with RFC 6902 semantics (object members only)."""
    out: dict[str, Any] = copy.deepcopy(dict(doc))
    for op in ops:
        *parents, last = _tokens(op["path"])
        target: Any = out
        for t in parents:
            if not isinstance(target, dict) or t not in target:
                raise ValueError(f"{op['op']} {op['path']}: parent {t!r} does not exist")
            target = target[t]
        if not isinstance(target, dict):
            raise ValueError(f"{op['path']}: parent is not an object")
        if op["op"] == "add":
            target[last] = copy.deepcopy(op["value"])
        elif op["op"] == "replace":
            if last not in target:
                raise ValueError(f"replace {op['path']}: no such member")
            target[last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            if last not in target:
                raise ValueError(f"remove {op['path']}: no such member")
            del target[last]
        else:
            raise ValueError(f"unsupported op {op['op']}")
    return out


def decode_patch(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    resp = response["response"]
    if "patch" not in resp:
        assert "patchType" not in resp, "patchType without patch"
        return []
    assert resp["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(resp["patch"]))
    assert ops, "an empty patch must be left out, not sent"
    return ops


# --- the cluster and the app ----------------------------------------------------------------------
def make_state(
    objs: list[dict[str, Any]],
    *,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    clock: Clock | None = None,
    synced: bool = True,
    metrics: Metrics | None = None,
    config: WebhookConfig | None = None,
) -> WebhookState:
    clock = clock or Clock()
    cache = ClusterCache(clock=clock)
    b.feed(cache, objs)
    return WebhookState(
        cache=cache,
        policy=policy(),
        namespaces=NamespaceLabelStore(namespaces or {}),
        config=config or WebhookConfig(),
        clock=clock,
        synced=lambda: synced,
        metrics=metrics,
    )


def cache_of(state: WebhookState) -> ClusterCache:
    assert isinstance(state.cache, ClusterCache)
    return state.cache


@dataclass
class Admission:
    """One admission round trip: the review sent, the HTTP answer, and the pod with the patch applied."""

    sent: dict[str, Any]
    status_code: int
    body: dict[str, Any]
    ops: list[dict[str, Any]] = field(default_factory=list)

    @property
    def response(self) -> dict[str, Any]:
        r: dict[str, Any] = self.body["response"]
        return r

    @property
    def pod(self) -> dict[str, Any]:
        """The object after the patch (what the apiserver stores)."""
        return apply_patch(self.sent["request"]["object"], self.ops)

    @property
    def annotations(self) -> dict[str, str]:
        anns: dict[str, str] = self.pod["metadata"].get("annotations") or {}
        return anns

    @property
    def quota(self) -> str | None:
        return self.annotations.get(wellknown.ANNO_QUOTA_NAME)

    @property
    def reason(self) -> str | None:
        return self.annotations.get(wellknown.ANNO_SCHEDULING_REASON)


def ca_context(tls: TLSFiles) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(tls.ca_file))


class Hook:
    def __init__(self, state: WebhookState, server: WebhookServer, client: httpx.AsyncClient) -> None:
        self.state = state
        self.server = server
        self.client = client

    async def post(self, body: bytes | Mapping[str, Any], *, path: str = URL) -> httpx.Response:
        content = body if isinstance(body, bytes) else orjson.dumps(body)
        return await self.client.post(path, content=content, headers={"Content-Type": "application/json"})

    async def admit(self, doc: Mapping[str, Any], *, path: str = URL) -> Admission:
        r = await self.post(doc, path=path)
        body = r.json()
        a = Admission(dict(doc), r.status_code, body)
        if r.status_code == 200:
            assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
            assert body["response"]["uid"] == doc["request"]["uid"]
            assert body["response"]["allowed"] is True
            a.ops = decode_patch(body)
        return a

    async def pod(self, obj: Mapping[str, Any], **kw: Any) -> Admission:
        return await self.admit(review(obj, **kw))

    async def again(self, a: Admission) -> Admission:
        """The webhook called on its own output (reinvocation): must answer an empty patch."""
        return await self.admit(review(a.pod, dry_run=a.sent["request"]["dryRun"]))


@asynccontextmanager
async def serve(state: WebhookState, tls: TLSFiles, *, max_connections: int = 100) -> AsyncIterator[Hook]:
    server = WebhookServer(create_app(state), certfile=tls.cert_file, keyfile=tls.key_file, host="127.0.0.1", port=0)
    port = await server.start()
    try:
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        async with httpx.AsyncClient(
            base_url=f"https://127.0.0.1:{port}", verify=ca_context(tls), limits=limits, timeout=30
        ) as client:
            yield Hook(state, server, client)
    finally:
        await server.stop()
