"""Benchmark of the admission webhook against its floor, over real HTTPS, at several queue sizes.

    python bench/webhook.py                              # --quotas 1000,5000,20000, JSON on stdout
    python bench/webhook.py --quotas 5000 --admissions 900
    python bench/webhook.py --in-process --quotas 20000  # the webhook's own CPU per admission, no HTTP
    python bench/webhook.py --profile --quotas 20000     # the same under cProfile (stderr)

Per size (``--quotas`` quotas over ten queues, half as many nodes: 40 % 8-GPU quotas bound and
filled by running PodGroup jobs of 8 workers, 60 % free 1-GPU quotas, one in 15 of them
statically bound; 200 PodGroups for gang admissions), three child processes:

* **emulator** — the Kubernetes API emulator holding the quotas an admission may claim (what the
  claim write touches). It is the apiserver: another process, as in a cluster.
* **webhook** — the real webhook app (``webhooks.app.create_app``) served over TLS by its own
  ``WebhookServer``, its ``ClusterCache`` built from the whole cluster, its writer the service's
  ``KubeWriter`` over ``extender.kube.client.from_url``: every admission that chooses a quota
  records the claim in ``Quota.status.tasks`` (GET, then PUT with the ``resourceVersion``
  precondition) before it answers, and the answer's object is applied to the cache, as the
  service does. An informer stand-in feeds each admitted pod into the cache 20 ms after its
  answer (as the pod informer would) and deletes the oldest pods once they are a second old and
  more than a quarter of the free quotas are held (job churn), so claims are recorded, reconciled
  and released as in production and the cluster neither fills up nor empties. In-flight claims
  expire after 0.5 s here (production: 30 s), so that a quota freed by churn is claimable again
  within the run: a pod arrives after 20 ms.
* **floor** — the least any correct webhook must do for the same request, served the same way:
  parse the AdmissionReview with orjson, read the pod's request (``convert.pod_request``: what
  the claim records), take the pod's queue (its annotation, or its PodGroup's
  from a dict), take the next free quota of that queue from a ring (no scoring, no cache; the
  next one if it was claimed first, at most four, as the webhook does), make
  the same claim write with the same client (``KubeWriter.update_quota_status`` with
  ``extender.cache.claims.record_claim``: GET, judge room on the object, PUT with the
  precondition), and answer a review with the same patch (``quota-name``, ``claim-entry``,
  ``task-index``) and audit annotations.

Admitted pods — half lone pods with ``generateName``, half members of gangs with a Kubeflow index
label — request one GPU and one HCA; every admission is a fresh pod. The two servers are
measured in alternating blocks of the same requests' shape (serial, one raw TLS keep-alive
connection each, ``bench/rawhttp.py``), with a pause between blocks longer than the claims'
expiry (both write to the same emulator). Every process of the run is pinned to one CPU
(``--cpu``), as in ``bench/extender.py``.

Per size: ``server_cpu_ms_per_admission`` of the webhook and of the floor (CPU seconds of the
server process over its blocks ÷ admissions), ``cpu_ratio_to_floor`` (target ≤ 2.0),
``assigned_share`` (admissions that got a quota; a full cluster would measure the wrong thing),
``api_calls_per_admission`` of both (from the emulator's journal: equal by construction,
checked), the mean reply bytes of both, ``of_which_informer_standin_ms`` (the stand-in's own
thread CPU, included in the webhook's figure), ``of_which_gc_ms`` (the cyclic collector's CPU,
included too), ``cpu_ms_per_admission_by_block``, latencies (client side, for reading). Over the sizes: ``flat_ratio`` —
``cpu_ratio_to_floor`` at the largest size ÷ at the smallest (target ≤ 1.3; the floor's work
does not grow with the cluster, and dividing by it cancels the machine's load, which moves
absolute figures measured minutes apart by 20–30 %), ``cpu_ms_growth`` (the same with absolute
CPU, for reading) — and ``target_met``.

``--in-process`` measures what the webhook does beyond the floor's HTTP and API work: the same
admissions through ``webhooks.app.admit`` with the claim written on in-process copies of the
Quotas (read, ``record_claim``, store; the answer parsed as from the API), the claim's answer and
the pod's arrival applied to the cache, the stand-in's churn — no TLS, no HTTP, no apiserver — on
a virtual clock advanced 2.5 ms per admission (the HTTP run's pace), and prints
``own_cpu_ms_per_admission``. Every admitted pod arrives, so each in-flight entry gives way to
its pod's claim; no binder runs to rewrite the statuses (``assigned_share`` stays 1.0 over 20,000
admissions at 5,000 quotas).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import io
import itertools
import json
import os
import pstats
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from bench.child import add_cpu_argument, pct, pin, settle_heap, spawn, until_eof, until_eof_profiled  # noqa: E402
from bench.rawhttp import RawClient  # noqa: E402
from bench.webhook_parts import (  # noqa: E402
    CLAIM_TTL,
    Informer,
    admission_doc,
    build_cache,
    claimable,
    cluster_objects,
    floor_app,
    with_informer,
)
from extender import wellknown  # noqa: E402
from extender.conf import default_policy  # noqa: E402

BLOCK_PAUSE = 0.7  # between blocks: the other server's entries on the shared quotas expire
TARGET_RATIO = 2.0
TARGET_FLAT = 1.3
URL = "/mutate/pods?timeout=10s"
Obj = dict[str, Any]


# --- the servers (child processes) ----------------------------------------------------------------
async def serve_main(args: argparse.Namespace) -> None:
    gc.disable()  # building the cluster makes ~10⁵ long-lived objects: no collections meanwhile
    from extender.emulator import Emulator
    from extender.kube import client as kube_client
    from extender.kube.writer import KubeWriter
    from extender.simulate.cluster import crd_directory, strip_server_fields
    from webhooks.app import create_app
    from webhooks.inflight import InFlightRegistry
    from webhooks.namespaces import NamespaceLabelStore
    from webhooks.server import WebhookServer
    from webhooks.state import WebhookState

    t0 = time.perf_counter()
    objs = cluster_objects(args.size, args.seed)
    if args.serve == "emulator":
        emulator = Emulator(history_size=100)
        await emulator.start_async()
        emulator.load_yaml(crd_directory())
        emulator.load([strip_server_fields(o) for o in claimable(objs)])
        del objs
        settle_heap(args)
        info = {"port": emulator.port, "url": emulator.url, "token": emulator.token}
        print(json.dumps({**info, "build_seconds": round(time.perf_counter() - t0, 2)}), flush=True)

        def calls() -> Obj:
            records = [r for r in emulator.journal.records() if r.resource == wellknown.QUOTAS]
            return {
                "gets": sum(1 for r in records if r.verb == "get"),
                "writes": sum(1 for r in records if r.verb == "update" and r.code == 200),
                "conflicts": sum(1 for r in records if r.verb == "update" and r.code == 409),
            }

        await until_eof(calls)
        print(json.dumps(calls()), flush=True)
        await emulator.stop_async()
        return

    cache = build_cache(objs) if args.serve == "webhook" else None  # built while the emulator loads
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    conn = json.loads(line)  # the emulator's address, once it is up
    api = kube_client.from_url(conn["url"], token=conn["token"])  # as the service builds it
    writer = KubeWriter(api)
    report: Callable[[], Obj]
    feeder: asyncio.Task[None] | None = None
    state: WebhookState | None = None
    if cache is None:
        app, counters = floor_app(writer, objs)
        report = lambda: dict(counters)  # noqa: E731
    else:
        state = WebhookState(
            cache=cache,
            policy=default_policy(),
            namespaces=NamespaceLabelStore(),
            writer=writer,
            on_claimed=lambda obj: cache.on_quota_update(obj, obj),
            inflight=InFlightRegistry(ttl=CLAIM_TTL),
            indexed=not args.no_index,
        )
        informer = Informer(cache, keep=len(claimable(objs)) // 4)
        app = with_informer(create_app(state), informer)
        report = informer.report
        feeder = asyncio.create_task(informer.run())
    del objs
    settle_heap(args)
    server = WebhookServer(app, certfile=args.cert, keyfile=args.key, host="127.0.0.1", port=0)
    port = await server.start()
    print(json.dumps({"port": port, "build_seconds": round(time.perf_counter() - t0, 2)}), flush=True)
    await until_eof_profiled(report, profile=bool(args.server_profile and state is not None), cumulative=60)
    if feeder is not None:
        feeder.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await feeder
    await server.stop()
    await kube_client.close(api)
    print(json.dumps(report()), flush=True)


class Child:
    """A server child process: spawned at once, its first stdout line (port, build time) read later."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.info: Obj = {}
        self.port = 0

    @staticmethod
    async def spawn(*extra: str) -> Child:
        proc = await spawn(__file__, *extra)
        return Child(proc)

    async def send(self, doc: Obj) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(orjson.dumps(doc) + b"\n")
        await self.proc.stdin.drain()

    async def ready(self) -> Child:
        assert self.proc.stdout is not None
        line = await self.proc.stdout.readline()
        if not line:
            raise RuntimeError("a benchmark server exited before it started")
        self.info = json.loads(line)
        self.port = int(self.info.pop("port"))
        return self

    async def ask(self) -> Obj:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(b"cpu\n")
        await self.proc.stdin.drain()
        answer: Obj = json.loads(await self.proc.stdout.readline())
        return answer

    async def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()


# --- measuring ------------------------------------------------------------------------------------
class Side:
    """One server's share of the run: CPU seconds and counters over its blocks, client latencies."""

    def __init__(self, child: Child, client: RawClient, emulator: Child) -> None:
        self.child, self.client, self.emulator = child, client, emulator
        self.cpu = 0.0
        self.blocks: list[tuple[float, int]] = []  # (CPU seconds, admissions) of each block
        self.api: dict[str, int] = {"gets": 0, "writes": 0, "conflicts": 0}
        self.latencies: list[float] = []
        self.start: Obj = {}
        self.end: Obj = {}

    async def block(self, docs: list[bytes]) -> None:
        api0 = await self.emulator.ask()
        before = await self.child.ask()
        if not self.start:
            self.start = before
        for d in docs:
            t = time.perf_counter()
            await self.client.post(URL, d)
            self.latencies.append(time.perf_counter() - t)
        self.end = await self.child.ask()
        self.cpu += self.end["cpu"] - before["cpu"]
        self.blocks.append((self.end["cpu"] - before["cpu"], self.end["admissions"] - before["admissions"]))
        api1 = await self.emulator.ask()
        for k in self.api:
            self.api[k] += api1[k] - api0[k]

    def summary(self) -> Obj:
        n = self.end["admissions"] - self.start["admissions"]
        assigned = self.end["assigned"] - self.start["assigned"]
        replies = self.end["reply_bytes"] - self.start["reply_bytes"]
        informer = self.end["informer_cpu"] - self.start["informer_cpu"]
        collected = self.end.get("gc_cpu", 0.0) - self.start.get("gc_cpu", 0.0)
        return {
            "admissions": n,
            "server_cpu_ms_per_admission": round(self.cpu * 1000 / n, 3),
            "of_which_informer_standin_ms": round(informer * 1000 / n, 3),
            "of_which_gc_ms": round(collected * 1000 / n, 3),
            "cpu_ms_per_admission_by_block": [round(c * 1000 / max(1, k), 3) for c, k in self.blocks],
            "assigned_share": round(assigned / n, 4),
            "api_calls_per_admission": {k: round(v / n, 3) for k, v in self.api.items()},
            "reply_bytes_mean": round(replies / n, 1),
            "p50_ms": round(pct(self.latencies, 0.5) * 1000, 3),
            "p99_ms": round(pct(self.latencies, 0.99) * 1000, 3),
            "mean_ms": round(statistics.fmean(self.latencies) * 1000, 3),
        }


async def measure_size(size: int, args: argparse.Namespace, tls: Any) -> Obj:
    common = ["--size", str(size), "--seed", str(args.seed), "--gc-freeze" if args.gc_freeze else "--no-gc-freeze"]
    tls_args = ["--cert", str(tls.cert_file), "--key", str(tls.key_file)]
    flags = (["--no-index"] if args.no_index else []) + (["--server-profile"] if args.server_profile else [])
    emu, ours, floor = await asyncio.gather(
        Child.spawn("--serve", "emulator", *common),
        Child.spawn("--serve", "webhook", *common, *tls_args, *flags),
        Child.spawn("--serve", "floor", *common, *tls_args),
    )
    await emu.ready()
    conn = {"url": emu.info["url"], "token": emu.info["token"]}
    await asyncio.gather(ours.send(conn), floor.send(conn))
    await asyncio.gather(ours.ready(), floor.ready())
    pin(args.cpu, 0, emu.proc.pid, ours.proc.pid, floor.proc.pid)
    ctx = ssl.create_default_context(cafile=str(tls.ca_file))
    sides = {
        "webhook": Side(ours, RawClient(ours.port, ctx=ctx), emu),
        "floor": Side(floor, RawClient(floor.port, ctx=ctx), emu),
    }
    counter = itertools.count(1_000_000)
    try:
        for side in sides.values():  # warm-up: connections, caches, the index's first build
            await asyncio.sleep(BLOCK_PAUSE)
            for _ in range(args.warmup):
                await side.client.post(URL, admission_doc(next(counter)))
        per_block = max(1, args.admissions // args.blocks)
        for _ in range(args.blocks):
            for side in sides.values():
                await asyncio.sleep(BLOCK_PAUSE)
                await side.block([admission_doc(next(counter)) for _ in range(per_block)])
        out: Obj = {
            "quotas": size,
            "build_seconds": {"emulator": emu.info["build_seconds"], "webhook": ours.info["build_seconds"]},
        }
        for name, side in sides.items():
            out[name] = side.summary()
        w, f = out["webhook"]["server_cpu_ms_per_admission"], out["floor"]["server_cpu_ms_per_admission"]
        out["server_cpu_ms_per_admission"] = w
        out["cpu_ratio_to_floor"] = round(w / f, 3)
        return out
    finally:
        for side in sides.values():
            await side.client.close()
        await asyncio.gather(ours.stop(), floor.stop())
        await emu.stop()


def _like_for_like(size: Obj) -> bool:
    """Both sides did the same work: every admission got a quota, the same API calls (one GET,
    one PUT, no conflicts), replies of the same size (±1 %)."""
    ours, floor = size["webhook"], size["floor"]
    return (
        ours["assigned_share"] >= 0.99
        and floor["assigned_share"] >= 0.99
        and all(
            abs(ours["api_calls_per_admission"][k] - floor["api_calls_per_admission"][k]) <= 0.02
            for k in ours["api_calls_per_admission"]
        )
        and abs(ours["reply_bytes_mean"] - floor["reply_bytes_mean"]) <= 0.01 * floor["reply_bytes_mean"]
    )


async def client_main(args: argparse.Namespace) -> Obj:
    from extender.simulate.certs import write_self_signed

    t0 = time.perf_counter()
    out: Obj = {"cpus": os.cpu_count(), "python": sys.version.split()[0], "indexed": not args.no_index, "sizes": []}
    with tempfile.TemporaryDirectory() as tmp:
        tls = write_self_signed(Path(tmp))
        for size in args.quotas:
            out["sizes"].append(await measure_size(size, args, tls))
    sizes = out["sizes"]
    ratios = [s["cpu_ratio_to_floor"] for s in sizes]
    # growth with the queue, judged on the ratio to the floor measured at the same moment (the
    # floor's work does not depend on the cluster's size, and it absorbs the machine's load,
    # which moves absolute CPU figures measured minutes apart by 20-30 %)
    flat = round(ratios[-1] / ratios[0], 3)
    out["flat_ratio"] = flat
    out["cpu_ms_growth"] = round(sizes[-1]["server_cpu_ms_per_admission"] / sizes[0]["server_cpu_ms_per_admission"], 3)
    out["target"] = {"cpu_ratio_to_floor_max": TARGET_RATIO, "flat_ratio_max": TARGET_FLAT}
    out["like_for_like"] = like = all(_like_for_like(s) for s in sizes)
    ok = like and all(r <= TARGET_RATIO for r in ratios)
    out["target_met"] = ok and (len(sizes) < 2 or flat <= TARGET_FLAT)
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


# --- profile (no HTTP) ----------------------------------------------------------------------------
_PACE = 0.0025  # seconds between admissions in the in-process run: the HTTP run's


class _Clock:
    """Virtual time for the in-process run, advanced ``_PACE`` per admission."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


class _StoreWriter:
    """The claim write without HTTP: ``update_quota_status`` on in-process copies of the claimable
    Quotas (read, ``mutate``, store with a new resourceVersion, return), as the emulator answers it."""

    def __init__(self, objs: list[Obj]) -> None:
        self.store = {o["metadata"]["name"]: orjson.loads(orjson.dumps(o)) for o in claimable(objs)}
        self.versions = itertools.count(10)

    async def update_quota_status(self, name: str, mutate: Callable[[Obj], Obj | None]) -> Obj:
        current: Obj = orjson.loads(orjson.dumps(self.store[name]))  # the GET's answer, parsed
        status = mutate(current)
        if status is None:
            return current
        current["status"] = status
        current["metadata"]["resourceVersion"] = str(next(self.versions))
        self.store[name] = current
        answer: Obj = orjson.loads(orjson.dumps(current))  # the PUT's answer, parsed
        return answer


async def _profiled_admissions(args: argparse.Namespace, size: int) -> Obj:
    from webhooks.app import admit
    from webhooks.inflight import InFlightRegistry
    from webhooks.namespaces import NamespaceLabelStore
    from webhooks.state import WebhookState

    clock = _Clock()  # the HTTP run's pace: what expires and arrives when is the same
    objs = cluster_objects(size, args.seed)
    cache = build_cache(objs, clock)
    state = WebhookState(
        cache=cache,
        policy=default_policy(),
        namespaces=NamespaceLabelStore(),
        writer=_StoreWriter(objs),
        on_claimed=lambda obj: cache.on_quota_update(obj, obj),
        inflight=InFlightRegistry(ttl=CLAIM_TTL),
        clock=clock,
        indexed=not args.no_index,
    )
    informer = Informer(cache, keep=len(claimable(objs)) // 4, clock=clock)
    del objs
    gc.collect()
    gc.freeze()

    async def one(doc: bytes) -> None:
        _, answer = await admit(state, doc)
        informer.admitted(doc, orjson.dumps(answer))
        clock.now += _PACE
        informer.step(clock.now)

    counter = itertools.count(1_000_000)
    for _ in range(args.warmup):
        await one(admission_doc(next(counter)))
    docs = [admission_doc(next(counter)) for _ in range(args.admissions)]
    prof = cProfile.Profile() if args.profile else None
    t0 = time.process_time()
    if prof is not None:
        prof.enable()
    for d in docs:
        await one(d)
    if prof is not None:
        prof.disable()
    cpu = time.process_time() - t0
    if prof is not None:
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(40)
        print(text.getvalue(), file=sys.stderr)
    report = informer.report()
    return {
        "quotas": size,
        "own_cpu_ms_per_admission": round(cpu * 1000 / len(docs), 4),
        "of_which_informer_standin_ms": round(informer.cpu * 1000 / (len(docs) + args.warmup), 4),
        "assigned_share": round(report["assigned"] / max(1, report["admissions"]), 4),
        "profiled": prof is not None,
    }


def in_process_main(args: argparse.Namespace) -> Obj:
    """The webhook's own work per admission, without HTTP or the API (see ``--in-process``)."""
    return {"sizes": [asyncio.run(_profiled_admissions(args, size)) for size in args.quotas]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quotas", default="1000,5000,20000", help="cluster sizes (quotas), comma-separated")
    p.add_argument("--admissions", type=int, default=600, help="measured admissions per size and server")
    p.add_argument("--blocks", type=int, default=3, help="alternating blocks the admissions are measured in")
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-index", action="store_true", help="the webhook without its candidate index (full scan)")
    p.add_argument("--gc-freeze", action=argparse.BooleanOptionalAction, default=True)
    add_cpu_argument(p)
    p.add_argument(
        "--in-process",
        action="store_true",
        help="the webhook's own CPU per admission, in process: no HTTP, claims on in-process Quota copies",
    )
    p.add_argument("--profile", action="store_true", help="with --in-process: a cProfile of it (stderr)")
    p.add_argument("--server-profile", action="store_true", help="cProfile the webhook server (its stderr)")
    p.add_argument("--serve", choices=("webhook", "floor", "emulator"), help=argparse.SUPPRESS)
    p.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--cert", help=argparse.SUPPRESS)
    p.add_argument("--key", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        asyncio.run(serve_main(args))
        return
    args.quotas = [int(x) for x in str(args.quotas).split(",") if x]
    result = in_process_main(args) if args.in_process or args.profile else asyncio.run(client_main(args))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
