"""What the separate-pod layout costs kube-scheduler: filter + bind over mutual TLS vs plain loopback.

    python bench/extender_layout.py                      # 1,000 nodes, 400 pairs per layout, JSON on stdout
    python bench/extender_layout.py --nodes 5000 --iterations 1000

Both layouts serve the real extender app (``extender.api.extender.create_app``) through the
service's ``AppServer`` on 127.0.0.1 over one cache of ``--nodes`` nodes, with a recording writer
(no API server: the Binding's cost is the same in both layouts and would only dilute the
difference). Each iteration is one pod as kube-scheduler sends it: ``POST /filter`` with every node
name, then ``POST /bind``; one keep-alive connection per layout, as kube-scheduler's HTTP client
keeps one.

* **floor** — the same-pod layout: plain HTTP on loopback, what the chart runs today;
* **separate** — HTTPS with a client certificate required (``--extender-tls-cert-file``,
  ``--extender-client-ca-file``; kube-scheduler's ``enableHTTPS`` + ``tlsConfig``).

Reported: p50 / p99 / mean of the pair per layout, ``ratio`` = separate p50 ÷ floor p50 and
``target_met`` (ratio ≤ 1.25: TLS on a kept-alive connection costs a symmetric cipher per byte,
no handshake). Both run on loopback: a real cross-pod hop adds the pod network's round trip
(typically tens of microseconds per request in one zone), which this machine cannot show.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from extender.api.extender import create_app
from extender.servers import AppServer
from extender.simulate.certs import write_self_signed
from tests import builders as b
from tests.extender.wire import RecordingWriter, cache_of, state_of

TARGET = 1.25


def _cluster(nodes: int, pods: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    objs: list[dict[str, Any]] = []
    for i in range(nodes):
        objs += [b.node(f"n{i}"), b.topology(f"n{i}", [f"s{i // 32}"])]
    objs.append(b.podgroup("bench", min_member=1))
    pod_objs = []
    for i in range(pods):
        status = {"phase": "QuotaBound", "nodeName": f"n{i % nodes}"}
        objs.append(b.quota(f"q-{i}", status=status))
        pod_objs.append(b.pod(f"p-{i}", group="bench", quota=f"q-{i}", uid=f"uid-{i}"))
    return objs + pod_objs, pod_objs


async def _pairs(
    client: httpx.AsyncClient, pods: list[dict[str, Any]], names: list[str], nodes: int, start: int = 0
) -> list[float]:
    out = []
    for i, pod in enumerate(pods, start):
        body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
        meta = pod["metadata"]
        bind = orjson.dumps(
            {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": f"n{i % nodes}"}
        )
        t0 = time.perf_counter()
        r = await client.post("/filter", content=body)
        r2 = await client.post("/bind", content=bind)
        out.append(time.perf_counter() - t0)
        assert r.status_code == 200 and r.json()["Error"] == "", r.text[:200]
        assert r2.status_code == 200 and r2.json()["Error"] == "", r2.text
    return out


def _summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "p50_ms": round(statistics.median(ms), 4),
        "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 4),
        "mean_ms": round(statistics.fmean(ms), 4),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    names = [f"n{i}" for i in range(args.nodes)]
    total = args.warmup + args.iterations
    results: dict[str, Any] = {"nodes": args.nodes, "iterations": args.iterations}
    with tempfile.TemporaryDirectory() as tmp:
        server_tls = write_self_signed(Path(tmp) / "server", hosts=("127.0.0.1",))
        client_tls = write_self_signed(Path(tmp) / "client", hosts=("kube-scheduler",), client=True)
        for layout in ("floor", "separate"):
            objs, pods = _cluster(args.nodes, total)
            cache = cache_of(objs)
            state = state_of(cache, writer=RecordingWriter(cache))
            tls: dict[str, Any] = {}
            verify: ssl.SSLContext | bool = False
            if layout == "separate":
                tls = {
                    "certfile": server_tls.cert_file,
                    "keyfile": server_tls.key_file,
                    "client_ca_file": client_tls.ca_file,
                }
                ctx = ssl.create_default_context(cafile=str(server_tls.ca_file))
                ctx.load_cert_chain(client_tls.cert_file, client_tls.key_file)
                verify = ctx
            async with (
                AppServer(create_app(state), **tls) as srv,
                httpx.AsyncClient(base_url=srv.url, verify=verify, timeout=30) as client,
            ):
                await _pairs(client, pods[: args.warmup], names, args.nodes)
                results[layout] = _summary(await _pairs(client, pods[args.warmup :], names, args.nodes, args.warmup))
    ratio = results["separate"]["p50_ms"] / results["floor"]["p50_ms"]
    results["ratio"] = round(ratio, 3)
    results["target"] = TARGET
    results["target_met"] = ratio <= TARGET
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=50)
    out = asyncio.run(main(parser.parse_args()))
    sys.stdout.write(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode() + "\n")
