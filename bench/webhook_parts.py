"""The cluster, the admissions, the informer stand-in and the floor endpoint of ``bench/webhook.py``.

Split from the driver so that each file stays readable; ``bench/webhook.py``'s docstring
describes what they model and why.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import itertools
import random
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from bench.child import body_of
from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.emulator.admission import pod_create_review
from tests import builders as b

QUEUES = 10
GANGS = 200
NS = "bench"
FEED_DELAY = 0.02
CLAIM_TTL = 0.5  # in-flight claims' expiry in this run (production: 30 s); pods arrive after 20 ms
MIN_POD_AGE = 1.0  # the informer stand-in deletes pods only this old (their claims' entries expired)
Obj = dict[str, Any]


# --- the cluster ---------------------------------------------------------------------------------
def cluster_objects(quotas: int, seed: int) -> list[Obj]:
    rng = random.Random(seed)
    nodes = max(quotas // 2, 8 * QUEUES)
    objs: list[Obj] = [b.node(f"n{i:05d}") for i in range(nodes)]
    objs += [b.queue(f"queue-{q}") for q in range(QUEUES)]
    big = min(quotas * 2 // 5, nodes)
    big -= big % (8 * QUEUES)
    for i in range(big):
        objs.append(
            b.quota(
                f"qa-{i:05d}",
                queue=f"queue-{i % QUEUES}",
                gpu=8,
                hca=8,
                status={"phase": "QuotaBound", "nodeName": f"n{i:05d}"},
            )
        )
    for i in range(quotas - big):
        static = f"n{rng.randrange(big, nodes):05d}" if nodes > big and i % 15 == 0 else None
        objs.append(b.quota(f"qb-{i:05d}", queue=f"queue-{i % QUEUES}", gpu=1, hca=1, static_bind_node=static))
    by_queue: dict[int, list[int]] = {}
    for i in range(big):
        by_queue.setdefault(i % QUEUES, []).append(i)
    for j in range(big // 8):
        queue = j % QUEUES
        objs.append(b.podgroup(f"job-{j}", namespace=NS, queue=f"queue-{queue}", min_member=8))
        for w in range(8):
            i = by_queue[queue].pop()
            objs.append(
                b.pod(
                    f"job-{j}-worker-{w}",
                    namespace=NS,
                    group=f"job-{j}",
                    quota=f"qa-{i:05d}",
                    gpu=8,
                    hca=8,
                    index=w,
                    node=f"n{i:05d}",
                    phase="Running",
                )
            )
    for g in range(GANGS):
        objs.append(b.podgroup(f"gang-{g}", namespace=NS, queue=f"queue-{g % QUEUES}", min_member=4))
    return objs


def claimable(objs: list[Obj]) -> list[Obj]:
    """The quotas an admission may claim (the free 1-GPU ones): what the emulator holds."""
    return [o for o in objs if o["kind"] == wellknown.KIND_QUOTA and o["metadata"]["name"].startswith("qb-")]


def build_cache(objs: list[Obj], clock: Callable[[], float] = time.time) -> ClusterCache:
    cache = ClusterCache(reservation_ttl=0, clock=clock)  # churn must not leave reservations behind
    b.feed(cache, objs)
    return cache


def admission_doc(k: int, *, dry_run: bool = False) -> bytes:
    """A pod CREATE review: even k a lone pod, odd k a gang member with a Kubeflow index label."""
    if k % 2 == 0:
        meta: Obj = {
            "generateName": f"lone-{k}-",
            "namespace": NS,
            "annotations": {wellknown.ANNO_QUEUE_NAME: f"queue-{(k // 2) % QUEUES}"},
            "labels": {},
        }
    else:
        g = (k // 2) % GANGS
        meta = {
            "generateName": f"gang-{g}-worker-",
            "namespace": NS,
            "annotations": {wellknown.ANNO_GROUP_NAME: f"gang-{g}"},
            "labels": {"training.kubeflow.org/replica-index": str((k // 400) % 4)},
        }
    req = {"cpu": "4", "memory": "32Gi", wellknown.RESOURCE_GPU: "1", wellknown.RESOURCE_RDMA_HCA: "1"}
    pod = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": meta,
        "spec": {
            "schedulerName": wellknown.SCHEDULER_NAME,
            "containers": [{"name": "main", "image": "pytorch:2", "resources": {"requests": req, "limits": req}}],
        },
        "status": {},
    }
    review = pod_create_review(pod, namespace=NS, user={"username": "bench"}, dry_run=dry_run)
    return orjson.dumps(review)


# --- the informer stand-in (webhook side) ---------------------------------------------------------
class Informer:
    """Feeds admitted pods into the cache ``FEED_DELAY`` after their answer; deletes old ones."""

    def __init__(self, cache: ClusterCache, keep: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.cache = cache
        self.clock = clock
        self.keep = keep
        self.pending: deque[tuple[float, Obj]] = deque()
        self.alive: deque[tuple[float, Obj]] = deque()
        self.names = itertools.count()
        self.admissions = 0
        self.assigned = 0
        self.reply_bytes = 0
        self.cpu = 0.0  # thread CPU seconds of the stand-in itself (reported apart)

    def admitted(self, body: bytes, answer: bytes) -> None:
        t0 = time.thread_time()
        try:
            self._admitted(body, answer)
        finally:
            self.cpu += time.thread_time() - t0

    def _admitted(self, body: bytes, answer: bytes) -> None:
        self.admissions += 1
        self.reply_bytes += len(answer)
        try:
            review = orjson.loads(body)
            resp = orjson.loads(answer)["response"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return
        req = review.get("request") or {}
        if req.get("dryRun") or req.get("operation") != "CREATE" or "patch" not in resp:
            return
        pod = req["object"]
        meta = pod["metadata"]
        for op in orjson.loads(base64.b64decode(resp["patch"])):
            path = op["path"]
            if path == "/metadata/annotations":
                meta["annotations"] = {}
            elif path.startswith("/metadata/annotations/"):
                key = path.rsplit("/", 1)[1].replace("~1", "/").replace("~0", "~")
                if op["op"] == "remove":
                    meta["annotations"].pop(key, None)
                else:
                    meta["annotations"][key] = op["value"]
        if wellknown.ANNO_QUOTA_NAME in meta["annotations"]:
            self.assigned += 1
        meta["name"] = meta.pop("generateName", "pod-") + f"{next(self.names):06d}"
        meta["uid"] = str(uuid.uuid4())
        meta["resourceVersion"] = "1"
        meta["creationTimestamp"] = b.TS
        pod["status"] = {"phase": "Pending"}
        self.pending.append((self.clock() + FEED_DELAY, pod))

    async def run(self) -> None:
        while True:
            await asyncio.sleep(FEED_DELAY / 2)
            self.step(self.clock())

    def step(self, now: float) -> None:
        """Feed the pods due by ``now``; delete the oldest ones (churn)."""
        t0 = time.thread_time()
        while self.pending and self.pending[0][0] <= now:
            _, pod = self.pending.popleft()
            self.cache.on_pod_add(pod)
            self.alive.append((now, pod))
        while len(self.alive) > self.keep and self.alive[0][0] <= now - MIN_POD_AGE:
            self.cache.on_pod_delete(self.alive.popleft()[1])
        self.cpu += time.thread_time() - t0

    def report(self) -> Obj:
        return {
            "admissions": self.admissions,
            "assigned": self.assigned,
            "reply_bytes": self.reply_bytes,
            "informer_cpu": self.cpu,
        }


def with_informer(app: Any, informer: Informer) -> Any:
    """ASGI wrapper: hands each (request body, answer) pair to the informer stand-in."""

    async def wrapped(
        scope: Obj, receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]
    ) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        body: list[bytes] = []
        answer: list[bytes] = []

        async def rx() -> Any:
            msg = await receive()
            if msg["type"] == "http.request":
                body.append(msg.get("body", b""))
            return msg

        async def tx(msg: Any) -> None:
            if msg["type"] == "http.response.body":
                answer.append(msg.get("body", b""))
            await send(msg)

        await app(scope, rx, tx)
        informer.admitted(b"".join(body), b"".join(answer))

    return wrapped


# --- the floor ------------------------------------------------------------------------------------
def floor_app(writer: Any, objs: list[Obj]) -> tuple[Any, Obj]:
    """Parse, read the pod's request, take the queue's next free quota from a ring, claim it
    through the same client with the same rule, answer the same patch (``quota-name``,
    ``claim-entry``, ``task-index``). Returns the app and its counters."""
    from extender.cache.claims import ADMISSION_PREFIX, ClaimEntry, NoRoom, record_claim
    from extender.cache.convert import pod_request
    from extender.model.resources import Resource
    from webhooks.review import build_response

    queue_of_group = {o["metadata"]["name"]: o["spec"]["queue"] for o in objs if o["kind"] == wellknown.KIND_PODGROUP}
    rings: dict[str, deque[str]] = {}
    for o in claimable(objs):
        rings.setdefault(o["spec"]["queueName"], deque()).append(o["metadata"]["name"])
    governed = (wellknown.RESOURCE_GPU, wellknown.RESOURCE_RDMA_HCA)  # what every claimable quota governs
    counters: Obj = {"admissions": 0, "assigned": 0, "reply_bytes": 0, "informer_cpu": 0.0, "refused": 0}
    index_label = "training.kubeflow.org/replica-index"
    quota_key = wellknown.ANNO_QUOTA_NAME.replace("/", "~1")
    index_key = wellknown.ANNO_TASK_INDEX.replace("/", "~1")
    entry_key = wellknown.ANNO_CLAIM_ENTRY.replace("/", "~1")

    async def app(scope: Obj, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        req = orjson.loads(await body_of(receive))["request"]
        meta = req["object"]["metadata"]
        annotations, labels = meta.get("annotations") or {}, meta.get("labels") or {}
        group = annotations.get(wellknown.ANNO_GROUP_NAME)
        queue = queue_of_group[group] if group else annotations[wellknown.ANNO_QUEUE_NAME]
        ring = rings[queue]
        index = int(labels[index_label]) if index_label in labels else None
        entry = ClaimEntry(
            uid=ADMISSION_PREFIX + req["uid"],
            namespace=req["namespace"],
            name=meta.get("name") or meta.get("generateName", "") + "*",
            job=f"{req['namespace']}/{group or meta.get('generateName', '') + '*'}",
            index=index,
            request=Resource({k: v for k, v in pod_request(req["object"]).q.items() if k in governed}),
            expires_at=time.time() + CLAIM_TTL,
        )
        mutate = functools.partial(record_claim, entry=entry, now=time.time())
        for _ in range(4):  # as the webhook: a quota claimed first by someone else, the next one
            quota = ring[0]
            ring.rotate(-1)
            try:
                await writer.update_quota_status(quota, mutate)
                break
            except NoRoom:
                counters["refused"] += 1
        ops: list[Obj] = [
            {"op": "add", "path": f"/metadata/annotations/{quota_key}", "value": quota},
            {"op": "add", "path": f"/metadata/annotations/{entry_key}", "value": entry.uid},
        ]
        if index is not None:
            ops.append({"op": "add", "path": f"/metadata/annotations/{index_key}", "value": str(index)})
        audit = {"quota": quota, "tier": "free", "outcome": "assigned"}
        reply = orjson.dumps(build_response(req["uid"], ops=ops, audit_annotations=audit))
        counters["admissions"] += 1
        counters["assigned"] += 1
        counters["reply_bytes"] += len(reply)
        headers = [(b"content-length", str(len(reply)).encode()), (b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": reply})

    return app, counters
