"""Benchmark of the admission webhook: admissions per second and latency over real HTTPS.

    python bench/webhook.py                 # JSON on stdout
    python bench/webhook.py --requests 4000 --quotas 5000 --nodes 2500
    python bench/webhook.py --profile       # cProfile of the decision path (stderr), no HTTP

The server runs in a child process (its own core: the apiserver is another machine in real life)
with the cluster in its cache: ``--nodes`` nodes, ``--quotas`` quotas over ten queues (40 %
8-GPU quotas bound and filled by running PodGroup jobs of 8 workers, 60 % free 1-GPU quotas),
PodGroups for gang admissions. Admitted pods — half lone pods, half members of gangs with an
index label — request one GPU and one HCA. An informer stand-in feeds every admitted pod into the
cache 20 ms after its answer (as the pod informer would) and deletes the oldest admitted pods
beyond 1,500 (job churn), so in-flight claims are recorded, reconciled and dropped as in
production and the cluster neither fills up nor empties.

Reported: the decision alone (in-process ``handle()``), the transport floor (a review the
webhook ignores at once), and admissions over HTTPS with httpx and with raw asyncio TLS sockets,
serially and with 8 concurrent clients. Latencies are per request, client-side, in ms; they
are for reading, not judged. Judged, in the same run: ``cpu_ratio_to_floor`` — the server's CPU
per admission (raw sockets, serial) ÷ its CPU per review of the floor phase — with
``target_met`` for ≤ 2.0.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import cProfile
import gc
import io
import itertools
import json
import os
import pstats
import random
import ssl
import statistics
import sys
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from bench.rawhttp import RawClient  # noqa: E402
from extender import wellknown  # noqa: E402
from extender.cache.cache import ClusterCache  # noqa: E402
from extender.conf import default_policy  # noqa: E402
from tests import builders as b  # noqa: E402
from webhooks.app import MUTATE_PATH, create_app, handle  # noqa: E402
from webhooks.namespaces import NamespaceLabelStore  # noqa: E402
from webhooks.server import WebhookServer  # noqa: E402
from webhooks.state import WebhookState  # noqa: E402

QUEUES = 10
NS = "bench"
URL = MUTATE_PATH + "?timeout=10s"
FEED_DELAY = 0.02
KEEP_PODS = 1500
TARGET_CPU_RATIO = 2.0  # the server's CPU per admission ÷ per floor review (raw sockets, serial)


# --- the cluster ---------------------------------------------------------------------------------
def build_cache(nodes: int, quotas: int, seed: int) -> ClusterCache:
    rng = random.Random(seed)
    cache = ClusterCache(reservation_ttl=0)  # churn must not leave reservations behind
    objs: list[dict[str, Any]] = [b.node(f"n{i:05d}") for i in range(nodes)]
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
    for g in range(200):
        objs.append(b.podgroup(f"gang-{g}", namespace=NS, queue=f"queue-{g % QUEUES}", min_member=4))
    b.feed(cache, objs)
    return cache


def admission_doc(k: int, *, dry_run: bool = False) -> bytes:
    """A pod CREATE review: even k a lone pod, odd k a gang member with a Kubeflow index label."""
    if k % 2 == 0:
        meta: dict[str, Any] = {
            "generateName": f"lone-{k}-",
            "namespace": NS,
            "annotations": {wellknown.ANNO_QUEUE_NAME: f"queue-{k % QUEUES}"},
            "labels": {},
        }
    else:
        g = (k // 2) % 200
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
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": NS,
            "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "object": pod,
            "oldObject": None,
            "dryRun": dry_run,
        },
    }
    return orjson.dumps(review)


def ignored_doc() -> bytes:
    """A review the webhook answers at once (an UPDATE): the transport floor."""
    doc = orjson.loads(admission_doc(0))
    doc["request"]["operation"] = "UPDATE"
    return orjson.dumps(doc)


# --- the informer stand-in (server side) ------------------------------------------------------------
class Informer:
    """Feeds admitted pods into the cache ``FEED_DELAY`` after their answer; deletes old ones."""

    def __init__(self, cache: ClusterCache) -> None:
        self.cache = cache
        self.pending: deque[tuple[float, dict[str, Any]]] = deque()
        self.alive: deque[dict[str, Any]] = deque()
        self.names = itertools.count()

    def admitted(self, body: bytes, answer: bytes) -> None:
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
        meta["name"] = meta.pop("generateName", "pod-") + f"{next(self.names):06d}"
        meta["uid"] = str(uuid.uuid4())
        meta["resourceVersion"] = "1"
        meta["creationTimestamp"] = b.TS
        pod["status"] = {"phase": "Pending"}
        self.pending.append((time.monotonic() + FEED_DELAY, pod))

    async def run(self) -> None:
        while True:
            await asyncio.sleep(FEED_DELAY / 2)
            now = time.monotonic()
            while self.pending and self.pending[0][0] <= now:
                _, pod = self.pending.popleft()
                self.cache.on_pod_add(pod)
                self.alive.append(pod)
            while len(self.alive) > KEEP_PODS:
                self.cache.on_pod_delete(self.alive.popleft())


class Stats:
    """Server-side time per request (the app alone, TLS and HTTP parsing excluded) and CPU time."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.cpu0 = time.process_time()
        self.wall0 = time.perf_counter()

    def take(self) -> dict[str, Any]:
        out = summary(self.samples, time.perf_counter() - self.wall0) if self.samples else {}
        if self.samples:
            out["server_cpu_ms_per_request"] = round((time.process_time() - self.cpu0) * 1000 / len(self.samples), 3)
        self.__init__()  # type: ignore[misc]
        return out


def with_informer(app: Any, informer: Informer, stats: Stats) -> Any:
    """ASGI wrapper: records each (request body, answer) pair for the informer stand-in, times
    the app, and answers ``GET /bench/stats`` (server-side numbers since the last call)."""

    async def wrapped(
        scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]
    ) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        if scope["path"] == "/bench/stats":
            payload = orjson.dumps(stats.take())
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": payload})
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

        t = time.perf_counter()
        await app(scope, rx, tx)
        stats.samples.append(time.perf_counter() - t)
        informer.admitted(b"".join(body), b"".join(answer))

    return wrapped


def summary(samples: list[float], wall: float) -> dict[str, Any]:
    ms = sorted(s * 1000 for s in samples)
    return {
        "requests": len(ms),
        "per_second": round(len(ms) / wall, 1),
        "p50_ms": round(statistics.median(ms), 3),
        "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 3),
        "mean_ms": round(statistics.fmean(ms), 3),
        "max_ms": round(ms[-1], 3),
    }


def decision_only(state: WebhookState, docs: list[bytes]) -> dict[str, Any]:
    samples = []
    t0 = time.perf_counter()
    for d in docs:
        t = time.perf_counter()
        code, _ = handle(state, d)
        samples.append(time.perf_counter() - t)
        assert code == 200
    return summary(samples, time.perf_counter() - t0)


async def serve_main(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    cache = build_cache(args.nodes, args.quotas, args.seed)
    built = time.perf_counter() - t0
    state = WebhookState(cache=cache, policy=default_policy(), namespaces=NamespaceLabelStore())
    if args.gc_freeze:
        gc.collect()
        gc.freeze()  # the cache's long-lived objects leave the collector's generations
    warm = [admission_doc(k, dry_run=True) for k in range(200)]
    decision_only(state, warm)
    dry = decision_only(state, [admission_doc(k, dry_run=True) for k in range(args.requests)])
    informer = Informer(cache)
    stats = Stats()
    app = with_informer(create_app(state), informer, stats)
    server = WebhookServer(app, certfile=args.cert, keyfile=args.key, host="127.0.0.1", port=0)
    port = await server.start()
    feeder = asyncio.create_task(informer.run())
    info = {
        "port": port,
        "build_seconds": round(built, 2),
        "cluster": {
            "nodes": len(cache.nodes),
            "quotas": len(cache.quotas),
            "jobs": len(cache.jobs),
            "pods": len(cache.task_job),
            "queues": QUEUES,
        },
        "decision_only_dry_run": dry,
    }
    print(json.dumps(info), flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes our stdin
    feeder.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await feeder
    await server.stop()


# --- clients --------------------------------------------------------------------------------------
async def run_phase(post: Callable[[int, bytes], Awaitable[None]], docs: list[bytes], workers: int) -> dict[str, Any]:
    samples: list[float] = []
    it = iter(enumerate(docs))

    async def worker(w: int) -> None:
        for _, d in it:
            t = time.perf_counter()
            await post(w, d)
            samples.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(workers)))
    return summary(samples, time.perf_counter() - t0)


async def client_main(args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    from extender.simulate.certs import write_self_signed

    with tempfile.TemporaryDirectory() as tmp:
        tls = write_self_signed(Path(tmp))
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--serve",
            "--cert",
            str(tls.cert_file),
            "--key",
            str(tls.key_file),
            "--nodes",
            str(args.nodes),
            "--quotas",
            str(args.quotas),
            "--requests",
            str(args.requests),
            "--seed",
            str(args.seed),
            "--gc-freeze" if args.gc_freeze else "--no-gc-freeze",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            assert child.stdout is not None
            line = await child.stdout.readline()
            if not line:
                raise RuntimeError("the benchmark server exited before it started")
            info = json.loads(line)
            port = info.pop("port")
            ctx = ssl.create_default_context(cafile=str(tls.ca_file))
            counter = itertools.count(1_000_000)
            out: dict[str, Any] = {"gc_freeze": args.gc_freeze, **info}

            def fresh(n: int) -> list[bytes]:
                return [admission_doc(next(counter)) for _ in range(n)]

            limits = httpx.Limits(max_connections=16, max_keepalive_connections=16)
            async with httpx.AsyncClient(base_url=f"https://127.0.0.1:{port}", verify=ctx, limits=limits) as client:

                async def hx(_w: int, body: bytes) -> None:
                    r = await client.post(URL, content=body, headers={"Content-Type": "application/json"})
                    if r.status_code != 200:
                        raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")

                async def phase(
                    post: Callable[[int, bytes], Awaitable[None]], docs: list[bytes], workers: int
                ) -> dict[str, Any]:
                    await client.get("/bench/stats")
                    result = await run_phase(post, docs, workers)
                    result["server"] = (await client.get("/bench/stats")).json()
                    return result

                await run_phase(hx, fresh(200), 1)  # warm-up: connections, caches
                out["httpx_floor_serial"] = await phase(hx, [ignored_doc()] * args.requests, 1)
                out["httpx_serial"] = await phase(hx, fresh(args.requests), 1)
                out["httpx_concurrency_8"] = await phase(hx, fresh(args.requests), 8)

                raws = [RawClient(port, ctx=ctx) for _ in range(8)]

                async def raw(w: int, body: bytes) -> None:
                    await raws[w].post(URL, body)

                try:
                    await run_phase(raw, fresh(200), 8)
                    out["raw_floor_serial"] = await phase(raw, [ignored_doc()] * args.requests, 1)
                    out["raw_serial"] = await phase(raw, fresh(args.requests), 1)
                    out["raw_concurrency_8"] = await phase(raw, fresh(args.requests), 8)
                finally:
                    for c in raws:
                        await c.close()
            out["load_average"] = [round(x, 2) for x in os.getloadavg()]
            out["cpus"] = os.cpu_count()
            # speed as a ratio of the floor measured in this run (no absolute-time target): the
            # server's CPU per admission ÷ its CPU per review of the floor phase (parsed, answered)
            ours = out["raw_serial"]["server"].get("server_cpu_ms_per_request")
            floor = out["raw_floor_serial"]["server"].get("server_cpu_ms_per_request")
            out["cpu_ratio_to_floor"] = round(ours / floor, 3) if ours and floor else None
            out["target"] = {"cpu_ratio_to_floor_max": TARGET_CPU_RATIO}
            out["target_met"] = out["cpu_ratio_to_floor"] is not None and out["cpu_ratio_to_floor"] <= TARGET_CPU_RATIO
            return out
        finally:
            if child.stdin is not None:
                child.stdin.close()
            try:
                await asyncio.wait_for(child.wait(), 30)
            except TimeoutError:
                child.kill()


def profile_main(args: argparse.Namespace) -> dict[str, Any]:
    cache = build_cache(args.nodes, args.quotas, args.seed)
    state = WebhookState(cache=cache, policy=default_policy(), namespaces=NamespaceLabelStore())
    docs = [admission_doc(k, dry_run=True) for k in range(args.requests)]
    decision_only(state, docs[:200])
    prof = cProfile.Profile()
    prof.enable()
    result = decision_only(state, docs)
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(30)
    print(text.getvalue(), file=sys.stderr)
    return {"decision_only_dry_run_profiled": result}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=2500)
    p.add_argument("--quotas", type=int, default=5000)
    p.add_argument("--requests", type=int, default=2000, help="admissions per measured phase")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--profile", action="store_true", help="cProfile the decision path in-process (stderr)")
    p.add_argument(
        "--gc-freeze",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="gc.freeze() after building the cache (what the service should do after its first sync)",
    )
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--cert", help=argparse.SUPPRESS)
    p.add_argument("--key", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        asyncio.run(serve_main(args))
        return
    if args.profile:
        print(json.dumps(profile_main(args), indent=2))
        return
    print(json.dumps(asyncio.run(client_main(args)), indent=2))


if __name__ == "__main__":
    main()
