"""Benchmark of the extender's filter + bind pair against its floor, over real HTTP.

    python bench/extender.py                          # 1,000 / 5,000 / 10,000 / 15,000 nodes, JSON on stdout
    python bench/extender.py --sizes 5000 --pairs 1200
    python bench/extender.py --profile --sizes 5000   # cProfile of the filter path (stderr), no HTTP
    python bench/extender.py --server-profile --sizes 5000       # cProfile of the extender (stderr)

Per cluster size N (candidate node names per filter request), three child processes:

* **emulator** — the Kubernetes API emulator holding one pending pod per bind the run makes
  (what a Binding touches). It is the apiserver: another process, as in a cluster.
* **extender** — the real extender app (``extender.api.extender.create_app``) served by uvicorn
  on 127.0.0.1 through the service's own ``AppServer``, its ``ClusterCache`` built with
  ``tests/builders.feed`` from N nodes with their NodeTopology, per pod a 1-GPU quota bound to a
  node (pod i → node i mod N), and the emulator's pods (their UIDs); its writer the service's
  ``KubeWriter`` over ``extender.kube.client.from_url``: every bind creates a real ``pods/binding``.
* **floor** — the least any correct extender must do for the same two requests, served the same
  way: ``/filter`` parses the body with orjson, looks the pod's node up in a dict (UID → node,
  from the same objects) and answers the same ``ExtenderFilterResult`` ours answers (the same
  size: the pod's node, empty maps); ``/bind`` parses the body and makes the same Binding call
  (same annotations) with the same client (``KubeWriter`` over ``from_url``), then answers
  ``{"Error":""}``.

Each pair is what kube-scheduler sends for one pod: ``POST /filter`` with the pod and all N node
names (``nodeCacheCapable: true``), then ``POST /bind`` (always a fresh pod), serially, with a raw
HTTP/1.1 keep-alive client (``bench/rawhttp.py``). The extender and the floor are measured in
alternating blocks of the same pairs' shape, so that the load of the machine falls on both alike.
Per size:

* ``pair_ratio_to_floor`` — p50 of the extender's pair latency ÷ p50 of the floor's (the target:
  ≤ 1.5 at 5,000 nodes, ``target_met``); ``mean_ratio_to_floor`` the same with means;
* ``server_cpu_ratio_to_floor`` — CPU seconds of the extender process per pair ÷ the floor's
  (what the server itself spends, without the client's and the emulator's share);
* ``extender`` / ``floor`` — pair, filter and bind p50 / p99 / mean (ms), for reading only;
* ``filter_reply_bytes`` of both (equal by construction; checked).

Every process of the run (client, emulator, extender, floor) is pinned to one CPU (``--cpu``, the
last one by default): each hop then hands that CPU from one process to the next, the same for the
extender and the floor, so a pair's latency is the work on its path. Left to the scheduler on a
machine whose other cores are busy, the same run measured the extender at 0.4× and at 4.7× the
floor, depending on which process happened to share a core with the emulator.

With ``--gc-freeze`` (the default) each process freezes its long-lived heap once it is built
(``gc.collect(); gc.freeze()``), as the service does once its cache has synced.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from bench.child import (  # noqa: E402
    ALL_CPUS,
    add_cpu_argument,
    body_of,
    pct,
    pin,
    settle_heap,
    spawn,
    until_eof,
    until_eof_profiled,
)
from bench.rawhttp import RawClient  # noqa: E402
from extender.cache.cache import ClusterCache  # noqa: E402
from extender.conf import default_policy  # noqa: E402
from tests import builders as b  # noqa: E402

TARGET_NODES = 5000
TARGET_RATIO = 1.5
Obj = dict[str, Any]


# --- the cluster ---------------------------------------------------------------------------------
def node_name(i: int) -> str:
    return f"node-{i:05d}"


def cluster_objects(nodes: int, pods: int) -> list[Obj]:
    """Nodes with their NodeTopology, and per pod a 1-GPU quota bound to node ``k mod nodes``."""
    objs: list[Obj] = []
    for i in range(nodes):
        objs.append(b.node(node_name(i)))
        objs.append(b.topology(node_name(i), [f"leaf-{i // 32:04d}"]))
    for k in range(pods):
        status = {"phase": "QuotaBound", "nodeName": node_name(k % nodes)}
        objs.append(b.quota(f"q-{k:05d}", gpu=1, hca=None, status=status))
    return objs + pending_pods(pods)


def pending_pods(pods: int) -> list[Obj]:
    return [b.pod(f"p-{k:05d}", quota=f"q-{k:05d}", gpu=1, hca=None, cpu="1", memory="1Gi") for k in range(pods)]


def _load(path: str) -> list[Obj]:
    objs: list[Obj] = orjson.loads(Path(path).read_bytes())
    return objs


def build_cache(objs: list[Obj]) -> ClusterCache:
    cache = ClusterCache()
    b.feed(cache, objs)
    return cache


def names_json(nodes: int) -> bytes:
    return orjson.dumps([node_name(i) for i in range(nodes)])


def filter_body(pod_json: bytes, names: bytes) -> bytes:
    """ExtenderArgs as kube-scheduler marshals it: PascalCase, ``Nodes`` null."""
    return b'{"Pod":' + pod_json + b',"Nodes":null,"NodeNames":' + names + b"}"


def bind_body(pod: Obj, node: str) -> bytes:
    meta = pod["metadata"]
    return orjson.dumps(
        {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
    )


def home(pod: Obj, nodes: int) -> str:
    return node_name(int(pod["metadata"]["name"][2:]) % nodes)


# --- the floor -----------------------------------------------------------------------------------
def floor_app(writer: Any, node_of_uid: dict[str, str]) -> Any:
    """Parse the body, find the pod's node (one dict lookup), answer as ours does; bind through
    the same client with the same annotations."""
    from extender import wellknown

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        args = orjson.loads(await body_of(receive))
        if scope["path"] == "/filter":
            node = node_of_uid.get(args["Pod"]["metadata"]["uid"], "")
            reply = orjson.dumps(
                {
                    "Nodes": None,
                    "NodeNames": [node] if node in args["NodeNames"] else [],
                    "FailedNodes": {},
                    "FailedAndUnresolvableNodes": {},
                    "Error": "",
                }
            )
        else:
            node = args["Node"]
            annotations = {wellknown.ANNO_QUOTA_NODE: node, wellknown.ANNO_BIND_DECISION: "quota"}
            await writer.bind_pod(args["PodNamespace"], args["PodName"], args["PodUID"], node, annotations)
            reply = b'{"Error":""}'
        headers = [(b"content-length", str(len(reply)).encode()), (b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": reply})

    return app


# --- the servers (child processes) -------------------------------------------------------------
async def serve_main(args: argparse.Namespace) -> None:
    gc.disable()  # building the cluster makes ~10⁵ long-lived objects: no collections meanwhile
    from extender.api.extender import create_app
    from extender.emulator import Emulator
    from extender.kube import client as kube_client
    from extender.kube.writer import KubeWriter
    from extender.servers import AppServer
    from extender.simulate.cluster import crd_directory, strip_server_fields
    from extender.state import ServiceState

    if args.serve == "emulator":
        t0 = time.perf_counter()
        emulator = Emulator(history_size=1000)
        await emulator.start_async()
        emulator.load_yaml(crd_directory())
        # the pods the run binds (what a Binding touches); nodes, topologies and quotas live
        # only in the extender's cache: a Binding does not read them
        stored = emulator.load([strip_server_fields(o) for o in pending_pods(args.pods)])
        dump = orjson.dumps(stored)  # the pods as the API holds them (their UIDs)
        await asyncio.to_thread(Path(args.dump).write_bytes, dump)
        settle_heap(args)
        info = {"port": emulator.port, "url": emulator.url, "token": emulator.token}
        print(json.dumps({**info, "build_seconds": round(time.perf_counter() - t0, 2)}), flush=True)

        def bindings() -> Obj:
            n = sum(1 for r in emulator.journal.records() if r.subresource == "binding" and r.code == 201)
            return {"bindings_created": n}

        await until_eof(bindings)
        print(json.dumps(bindings()), flush=True)
        await emulator.stop_async()
        return

    t0 = time.perf_counter()
    pods = _load(args.dump)
    api = kube_client.from_url(args.api, token=args.token)  # as the service builds it
    writer = KubeWriter(api)
    state: ServiceState | None = None
    if args.serve == "floor":
        # the floor's whole cluster: which node each pod's quota is bound to (q-k → node k mod N)
        node_of_uid = {p["metadata"]["uid"]: home(p, args.nodes) for p in pods}
        app = floor_app(writer, node_of_uid)
    else:
        objs = [o for o in cluster_objects(args.nodes, len(pods)) if o["kind"] != "Pod"] + pods
        state = ServiceState(cache=build_cache(objs), policy=default_policy(), writer=writer)
        app = create_app(state)
        del objs
    settle_heap(args)
    server = AppServer(app, name=args.serve)
    await server.start()
    print(json.dumps({"port": server.port, "build_seconds": round(time.perf_counter() - t0, 2)}), flush=True)
    await until_eof_profiled(dict, profile=bool(args.server_profile and state is not None), cumulative=40)
    await server.stop()
    await kube_client.close(api)
    print(json.dumps({"assumed": len(state.cache.assumed) if state is not None else 0}), flush=True)


class Child:
    def __init__(self, proc: asyncio.subprocess.Process, info: dict[str, Any]) -> None:
        self.proc = proc
        self.info = info
        self.port = int(info.pop("port"))

    @staticmethod
    async def start(*extra: str) -> Child:
        proc = await spawn(__file__, *extra)
        assert proc.stdout is not None
        line = await proc.stdout.readline()
        if not line:
            raise RuntimeError("the benchmark server exited before it started")
        return Child(proc, json.loads(line))

    async def ask(self) -> dict[str, Any]:
        """The child's CPU time (and what it reports)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(b"cpu\n")
        await self.proc.stdin.drain()
        answer: dict[str, Any] = json.loads(await self.proc.stdout.readline())
        return answer

    async def stop(self) -> dict[str, Any]:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        out: dict[str, Any] = {}
        assert self.proc.stdout is not None
        with contextlib.suppress(TimeoutError, ValueError):
            line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
            if line:
                out = json.loads(line)
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()
        return out


# --- measuring -----------------------------------------------------------------------------------
Post = Callable[[str, bytes], Awaitable[bytes]]


def summary(pairs: list[float], filters: list[float], binds: list[float]) -> dict[str, Any]:
    ms = 1000.0
    return {
        "pairs": len(pairs),
        "p50_ms": round(pct(pairs, 0.50) * ms, 3),
        "p99_ms": round(pct(pairs, 0.99) * ms, 3),
        "mean_ms": round(statistics.fmean(pairs) * ms, 3),
        "filter_p50_ms": round(pct(filters, 0.50) * ms, 3),
        "bind_p50_ms": round(pct(binds, 0.50) * ms, 3),
    }


async def run_pairs(
    post: Post, work: list[tuple[bytes, bytes]], out: tuple[list[float], list[float], list[float]], check: bool
) -> None:
    pairs, filters, binds = out
    for fbody, bbody in work:
        t = time.perf_counter()
        f = await post("/filter", fbody)
        m = time.perf_counter()
        r = await post("/bind", bbody)
        e = time.perf_counter()
        pairs.append(e - t)
        filters.append(m - t)
        binds.append(e - m)
        if check and (b'"NodeNames":["' not in f or r != b'{"Error":""}'):
            raise RuntimeError(f"unexpected answer: filter {f[:300]!r}… bind {r!r}")


async def measure_size(nodes: int, args: argparse.Namespace) -> dict[str, Any]:
    blocks, block = args.blocks, max(1, args.pairs // args.blocks)
    binds = 2 * (args.warmup + blocks * block)  # every bind binds a fresh pod
    with tempfile.TemporaryDirectory() as tmp:
        dump = str(Path(tmp) / "cluster.json")
        emu = await Child.start(
            "--serve", "emulator", "--nodes", str(nodes), "--pods", str(binds), "--dump", dump, *_gc_flag(args)
        )
        api = ["--api", emu.info["url"], "--token", emu.info["token"], "--dump", dump, "--nodes", str(nodes)]
        extra = ["--server-profile"] if args.server_profile else []
        ext, floor = await asyncio.gather(
            Child.start("--serve", "extender", *api, *_gc_flag(args), *extra),
            Child.start("--serve", "floor", *api, *_gc_flag(args)),
        )
        pod_objs = _load(dump)
    names = names_json(nodes)
    out: dict[str, Any] = {"nodes": nodes, "build_seconds": {"emulator": emu.info["build_seconds"]}}
    # built on every CPU; measured on one (the module docstring says why)
    out["pinned_to_cpus"] = pin(args.cpu, 0, emu.proc.pid, ext.proc.pid, floor.proc.pid)
    out["build_seconds"].update(extender=ext.info["build_seconds"], floor=floor.info["build_seconds"])
    cursor = 0

    def work(count: int) -> list[tuple[bytes, bytes]]:
        nonlocal cursor
        pods = pod_objs[cursor : cursor + count]
        cursor += count
        return [(filter_body(orjson.dumps(p), names), bind_body(p, home(p, nodes))) for p in pods]

    raw_e, raw_f = RawClient(ext.port), RawClient(floor.port)
    samples: dict[str, tuple[list[float], list[float], list[float]]] = {"extender": ([], [], []), "floor": ([], [], [])}
    try:
        warm_e, warm_f = work(args.warmup), work(args.warmup)
        out["filter_body_bytes"] = len(warm_e[0][0])
        out["filter_reply_bytes"] = {
            "extender": len(await raw_e.post("/filter", warm_e[0][0])),
            "floor": len(await raw_f.post("/filter", warm_e[0][0])),
        }
        if out["filter_reply_bytes"]["extender"] != out["filter_reply_bytes"]["floor"]:
            raise RuntimeError(f"the floor's reply is not the size of ours: {out['filter_reply_bytes']}")
        await run_pairs(raw_e.post, warm_e, ([], [], []), check=True)
        await run_pairs(raw_f.post, warm_f, ([], [], []), check=True)
        if args.gc_freeze:
            gc.collect()
            gc.freeze()
        cpu0 = {"extender": (await ext.ask())["cpu"], "floor": (await floor.ask())["cpu"]}
        for i in range(blocks):
            order = (("extender", raw_e), ("floor", raw_f)) if i % 2 == 0 else (("floor", raw_f), ("extender", raw_e))
            for who, client in order:
                await run_pairs(client.post, work(block), samples[who], check=True)
        cpu1 = {"extender": (await ext.ask())["cpu"], "floor": (await floor.ask())["cpu"]}
    finally:
        if args.cpu >= 0 and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, ALL_CPUS)  # the next size builds on every CPU again
        await raw_e.close()
        await raw_f.close()
        extender_end = await ext.stop()
        await floor.stop()
        emulator_end = await emu.stop()
    for who, s in samples.items():
        out[who] = summary(*s)
        out[who]["server_cpu_ms_per_pair"] = round((cpu1[who] - cpu0[who]) * 1000 / len(s[0]), 3)
    e, f = out["extender"], out["floor"]
    out["pair_ratio_to_floor"] = round(e["p50_ms"] / f["p50_ms"], 3)
    out["mean_ratio_to_floor"] = round(e["mean_ms"] / f["mean_ms"], 3)
    out["server_cpu_ratio_to_floor"] = round(e["server_cpu_ms_per_pair"] / f["server_cpu_ms_per_pair"], 3)
    out["assumed_by_extender"] = extender_end.get("assumed")
    if emulator_end.get("bindings_created") != binds:
        raise RuntimeError(f"expected {binds} Bindings in the emulator, found {emulator_end}")
    out["bindings_created"] = binds
    return out


def _gc_flag(args: argparse.Namespace) -> list[str]:
    return ["--gc-freeze"] if args.gc_freeze else ["--no-gc-freeze"]


async def client_main(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    out: dict[str, Any] = {"cpus": os.cpu_count(), "python": sys.version.split()[0], "sizes": []}
    for n in args.sizes:
        out["sizes"].append(await measure_size(n, args))
    at_target = [s for s in out["sizes"] if s["nodes"] == TARGET_NODES]
    out["target"] = {"nodes": TARGET_NODES, "pair_ratio_to_floor_max": TARGET_RATIO}
    out["target_met"] = bool(at_target) and all(s["pair_ratio_to_floor"] <= TARGET_RATIO for s in at_target)
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


# --- profile (no HTTP) -------------------------------------------------------------------------
def profile_main(args: argparse.Namespace) -> dict[str, Any]:
    """cProfile of the extender's filter handler at the first size, in process."""
    from extender.api import extender as api
    from extender.state import ServiceState

    nodes = args.sizes[0]
    objs = cluster_objects(nodes, min(nodes, 2000))
    state = ServiceState(cache=build_cache(objs), policy=default_policy())
    verbs = api.Verbs(state)
    names = names_json(nodes)
    pods = [o for o in objs if o["kind"] == "Pod"]
    bodies = [filter_body(orjson.dumps(p), names) for p in pods]

    async def run() -> float:
        for body in bodies[:100]:
            await verbs.filter(body)
        t0 = time.perf_counter()
        for body in bodies:
            await verbs.filter(body)
        per = (time.perf_counter() - t0) / len(bodies)
        prof = cProfile.Profile()
        prof.enable()
        for body in bodies:
            await verbs.filter(body)
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
        print(text.getvalue(), file=sys.stderr)
        return per

    per = asyncio.run(run())
    reply = asyncio.run(verbs.filter(bodies[0]))
    return {"nodes": nodes, "filter_in_process_ms": round(per * 1000, 4), "reply_bytes": len(reply)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1000,5000,10000,15000", help="candidate node counts, comma-separated")
    p.add_argument("--pairs", type=int, default=480, help="measured filter + bind pairs per size and server")
    p.add_argument("--blocks", type=int, default=6, help="alternating blocks the pairs are measured in")
    p.add_argument("--warmup", type=int, default=40)
    p.add_argument("--gc-freeze", action=argparse.BooleanOptionalAction, default=True)
    add_cpu_argument(p)
    p.add_argument("--profile", action="store_true", help="cProfile the filter path in process instead")
    p.add_argument("--server-profile", action="store_true", help="cProfile the extender server (its stderr)")
    p.add_argument("--serve", choices=("extender", "floor", "emulator"), help=argparse.SUPPRESS)
    p.add_argument("--nodes", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--pods", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--dump", help=argparse.SUPPRESS)
    p.add_argument("--api", help=argparse.SUPPRESS)
    p.add_argument("--token", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        asyncio.run(serve_main(args))
        return
    args.sizes = [int(x) for x in str(args.sizes).split(",") if x]
    result = profile_main(args) if args.profile else asyncio.run(client_main(args))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
