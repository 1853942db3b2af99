"""Does a 16,000-quota binder cycle stall the other verbs? The real service on the emulator.

    python bench/service_burst.py                  # 5,000 nodes, 2,000 jobs × 8 workers
    python bench/service_burst.py --nodes 2000 --jobs 500
    python bench/service_burst.py --service-root /tmp/old-checkout   # the same run, another tree

Three processes:

* **emulator** — the Kubernetes API emulator with the project's CRDs and the cluster of
  ``bench/binder_cycle.py``: N nodes in 40 leaves of two GPU models with their NodeTopology, and
  J RDMA training jobs of W workers (a PodGroup, one quota per worker, the worker pods claiming
  them, nothing bound), plus the binder Lease, held by another replica.
* **service** — ``sky-scheduler serve`` (``python -m extender.cli serve``) as the Deployment runs
  it, on a kubeconfig of the emulator, with leader election: it syncs its cache and answers,
  but runs no binder cycle while the other replica holds the Lease.
* **this client** — sends, in turn on a fixed schedule (one request every ``--gap`` seconds),
  ``POST /filter`` (a pending worker pod, 500 candidate nodes, ``nodeCacheCapable: true``) to the
  extender port and ``GET /healthz`` to the ops port, for the whole run; each latency counts from
  the request's slot (``Probe``: a stall weighs as every request it delayed).

The emulator runs at niceness ``--emulator-nice`` (10): in a cluster the API server does not share
the scheduler's cores, and here, unniced, its answering of the burst's writes took CPU from the
service's event loop — measured: the loop's thread runnable ("busy", not in ``select``) 80 % of
the wall time but running 40 % of it, no other thread of the service using the CPU.

The run: the service becomes ready; ``--quiet-seconds`` of the client's requests are the
*quiet* sample, the next ``--control-seconds`` the *control* sample: still quiet, so
``control_p99_ratio`` (control p99 ÷ quiet p99) is what the machine's own noise (other processes,
the OS scheduler) does to the ratio in this run; ``noise_limited`` says it alone exceeds the
target, and then the run's ``burst_p99_ratio`` says nothing about the service. Then the Lease is
deleted (the other replica is gone): the service takes it and its first cycle places all J×W
quotas — the burst. The *burst* sample is every request from the moment the service logs that
it became leader until ``--tail-seconds`` after the emulator received the cycle's first quota
status write: the whole synchronous part (``run_once`` and the write plan) and the start of its
writes. Printed: p50 / p99 / max of both verbs in both samples,
``burst_p99_ratio`` (burst p99 ÷ quiet p99) per verb, with target ≤ 2.0 and ``target_met``, and
the same split into the burst's two parts (``part_p99_ratio``: ``burst_synchronous_part``, until
the first write; ``burst_writes``, after it), with the slowest requests of the burst.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from bench.binder_cycle import cluster_objects  # noqa: E402
from bench.rawhttp import RawClient  # noqa: E402

TARGET_RATIO = 2.0
EMULATOR_ARGS = ("nodes", "leaves", "jobs", "workers", "emulator_nice")
NAMESPACE = "sky-system"
Obj = dict[str, Any]


# --- the emulator (child process) ----------------------------------------------------------------
async def emulator_main(args: argparse.Namespace) -> None:
    from extender import wellknown
    from extender.emulator import Emulator
    from extender.simulate.cluster import crd_directory, strip_server_fields

    if args.emulator_nice:
        os.nice(args.emulator_nice)  # the API server runs on other machines than the scheduler
    t0 = time.perf_counter()
    emu = Emulator(history_size=1000)
    await emu.start_async()
    emu.load_yaml(crd_directory())
    emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    emu.load([strip_server_fields(o) for o in cluster_objects(args.nodes, args.leaves, args.jobs, args.workers)])
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": wellknown.DEFAULT_BINDER_LEASE, "namespace": NAMESPACE},
        "spec": {"holderIdentity": "the-other-replica", "leaseDurationSeconds": 3600, "renewTime": now},
    }
    emu.create(lease)
    kubeconfig = emu.write_kubeconfig(Path(args.dump) / "kubeconfig", namespace=NAMESPACE)
    print(json.dumps({"kubeconfig": str(kubeconfig), "build_seconds": round(time.perf_counter() - t0, 1)}), flush=True)
    loop = asyncio.get_running_loop()
    while line := (await loop.run_in_executor(None, sys.stdin.readline)).strip():
        if line == "release":  # the other replica is gone
            emu.delete("coordination.k8s.io/v1", "leases", wellknown.DEFAULT_BINDER_LEASE, NAMESPACE)
            print(json.dumps({"released": time.time()}), flush=True)
        elif line == "writes":
            first = [
                r.time
                for r in emu.journal.records()
                if r.resource == wellknown.QUOTAS and r.subresource == "status" and r.verb == "update"
            ]
            print(json.dumps({"quota_writes": len(first), "first": min(first) if first else None}), flush=True)
    await emu.stop_async()


# --- the client --------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Probe:
    """The client's requests on a fixed schedule: one every ``gap`` seconds, ``/healthz`` and
    ``/filter`` in turn. Each latency is measured from the request's slot in the schedule, not from
    when it could be sent: when the service stalls, the requests of the slots that passed meanwhile
    are sent back to back as soon as it answers again, each counting the wait since its own slot —
    so a stall of S seconds weighs as S / gap samples, as it would for kube-scheduler's steady
    stream, not as the one request a serial client happened to have in flight (coordinated
    omission). Samples: (wall time of the slot, verb, seconds)."""

    def __init__(self, extender: int, ops: int, filter_body: bytes, gap: float) -> None:
        self.ext = RawClient(extender)
        self.ops_port = ops
        self.filter_body = filter_body
        self.gap = gap
        self.samples: list[tuple[float, str, float]] = []
        self.stop = asyncio.Event()

    async def run(self) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.ops_port)
        request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"
        base, wall = time.perf_counter(), time.time()
        try:
            for k in itertools.count():
                if self.stop.is_set():
                    return
                slot = base + k * self.gap
                ahead = slot - time.perf_counter()
                if ahead > 0:
                    await asyncio.sleep(ahead)
                if k % 2 == 0:
                    writer.write(request)
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
                    await reader.readexactly(length)
                    verb = "healthz"
                else:
                    reply = await self.ext.post("/filter", self.filter_body)
                    if b'"Error":""' not in reply:
                        raise RuntimeError(f"unexpected filter answer {reply[:200]!r}")
                    verb = "filter"
                self.samples.append((wall + (slot - base), verb, time.perf_counter() - slot))
        finally:
            writer.close()
            await self.ext.close()


def _stats(xs: list[float]) -> dict[str, Any]:
    if not xs:
        return {"requests": 0}
    s = sorted(xs)
    ms = 1000.0
    return {
        "requests": len(s),
        "p50_ms": round(statistics.median(s) * ms, 3),
        "p99_ms": round(s[min(len(s) - 1, int(0.99 * len(s)))] * ms, 3),
        "max_ms": round(s[-1] * ms, 3),
    }


async def _lines(stream: asyncio.StreamReader, sink: list[tuple[float, str]]) -> None:
    while line := await stream.readline():
        sink.append((time.time(), line.decode(errors="replace").rstrip()))


async def _ask(proc: asyncio.subprocess.Process, command: str) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(command.encode() + b"\n")
    await proc.stdin.drain()
    answer: dict[str, Any] = json.loads(await proc.stdout.readline())
    return answer


async def _wait_for(predicate: Any, deadline: float, what: str) -> None:
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting for {what}")
        await asyncio.sleep(0.2)


@dataclass(slots=True)
class BurstRun:
    """What the client saw: its samples, the service's log lines, and the moments that bound the windows."""

    samples: list[tuple[float, str, float]]
    log: list[tuple[float, str]]
    quiet_start: float
    control_start: float
    released: float
    leader: float  # the service logged that it became leader
    first_write: float  # the emulator received the cycle's first quota status write
    end: float
    quota_writes: int


async def client_main(args: argparse.Namespace) -> dict[str, Any]:
    t_start = time.perf_counter()
    deadline = time.monotonic() + args.timeout
    service_root = ROOT if args.service_root is None else Path(args.service_root)
    out: dict[str, Any] = {
        "cluster": {
            "nodes": args.nodes,
            "jobs": args.jobs,
            "workers": args.workers,
            "quotas": args.jobs * args.workers,
        },
        "service_root": str(service_root),
    }
    with tempfile.TemporaryDirectory() as tmp:
        emu = await _start_emulator(args, tmp)
        service: asyncio.subprocess.Process | None = None
        try:
            assert emu.stdout is not None
            info = json.loads(await emu.stdout.readline())
            out["emulator_build_seconds"] = info["build_seconds"]
            ext_port, ops_port = _free_port(), _free_port()
            service = await _start_service(info["kubeconfig"], service_root, ext_port, ops_port)
            run = await _measure(args, emu, service, ext_port=ext_port, ops_port=ops_port, deadline=deadline, out=out)
        finally:
            await _stop(service, emu)
    _report(args, out, run)
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    out["cpu_pressure"] = _cpu_pressure()
    out["seconds"] = round(time.perf_counter() - t_start, 1)
    return out


async def _start_emulator(args: argparse.Namespace, tmp: str) -> asyncio.subprocess.Process:
    """This script again, as the emulator child; it prints its kubeconfig, then answers commands."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--serve-emulator",
        "--dump",
        tmp,
        *(f"--{k.replace('_', '-')}={getattr(args, k)}" for k in EMULATOR_ARGS),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


async def _start_service(
    kubeconfig: str, service_root: Path, ext_port: int, ops_port: int
) -> asyncio.subprocess.Process:
    """``sky-scheduler serve`` from ``service_root``, leader-elected, as the Deployment runs it."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "extender.cli",
        "serve",
        "--kubeconfig",
        kubeconfig,
        "--leader-elect",
        "--lease-namespace",
        NAMESPACE,
        "--identity",
        "burst-bench",
        "--retry-period",
        "0.5",
        "--extender-port",
        str(ext_port),
        "--ops-port",
        str(ops_port),
        "--webhook-port",
        "0",
        "--log-level",
        "info",
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(service_root)},
        cwd=str(service_root),
    )


async def _stop(service: asyncio.subprocess.Process | None, emu: asyncio.subprocess.Process) -> None:
    """Terminate the service (kill after 30 s), then end the emulator by closing its stdin."""
    if service is not None and service.returncode is None:
        service.terminate()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(service.wait(), 30)
        if service.returncode is None:
            service.kill()
    if emu.stdin is not None:
        emu.stdin.close()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(emu.wait(), 30)
    if emu.returncode is None:
        emu.kill()


async def _measure(
    args: argparse.Namespace,
    emu: asyncio.subprocess.Process,
    service: asyncio.subprocess.Process,
    *,
    ext_port: int,
    ops_port: int,
    deadline: float,
    out: dict[str, Any],
) -> BurstRun:
    """Probe the ready service through the quiet and control windows, release the Lease, and go on
    until ``--tail-seconds`` after the cycle's first quota write."""
    log: list[tuple[float, str]] = []
    assert service.stderr is not None
    tasks = [asyncio.create_task(_lines(service.stderr, log))]
    t_ready = await _until_ready(ops_port, deadline, service)
    out["service_ready_seconds"] = round(t_ready, 1)
    pod = next(o for o in cluster_objects(args.nodes, args.leaves, 1, args.workers) if o["kind"] == "Pod")
    stored = await _stored_pod(ops_port, pod)
    names = [f"n{i}" for i in range(min(args.candidates, args.nodes))]
    body = orjson.dumps({"Pod": stored, "Nodes": None, "NodeNames": names})
    probe = Probe(ext_port, ops_port, body, args.gap)
    running = asyncio.create_task(probe.run())
    tasks.append(running)
    t_quiet0 = time.time()
    await asyncio.sleep(args.quiet_seconds)
    t_control0 = time.time()
    await asyncio.sleep(args.control_seconds)
    t_release = (await _ask(emu, "release"))["released"]
    await _wait_for(lambda: any("became leader" in line for _, line in log), deadline, "the lease")
    t_leader = next(t for t, line in log if "became leader" in line)
    first: float | None = None
    while first is None:
        if time.monotonic() > deadline:
            raise RuntimeError("gave up waiting for the cycle's first quota write")
        await asyncio.sleep(0.25)
        first = (await _ask(emu, "writes"))["first"]
    await asyncio.sleep(args.tail_seconds)
    t_end = first + args.tail_seconds
    probe.stop.set()
    await running
    writes = (await _ask(emu, "writes"))["quota_writes"]
    return BurstRun(probe.samples, log, t_quiet0, t_control0, t_release, t_leader, first, t_end, writes)


def _report(args: argparse.Namespace, out: dict[str, Any], run: BurstRun) -> None:
    """The windows' latencies and their p99 ratios to the quiet window, the slowest requests of the
    burst, and ``target_met`` / ``noise_limited``."""
    t_leader, first, t_end = run.leader, run.first_write, run.end
    # the burst, and its two parts: the cycle's synchronous part (until its first write) and the writes
    windows = {
        "quiet": (run.quiet_start, run.control_start),
        "control": (run.control_start, run.released),
        "burst": (t_leader, t_end),
        "burst_synchronous_part": (t_leader, first),
        "burst_writes": (first, t_end),
    }
    for window, (lo, hi) in windows.items():
        out[window] = {
            verb: _stats([s for t, v, s in run.samples if v == verb and lo <= t < hi]) for verb in ("filter", "healthz")
        }
        out[window]["seconds"] = round(hi - lo, 2)
    out["burst"]["leader_to_first_quota_write_seconds"] = round(first - t_leader, 2)
    out["burst"]["quota_writes_in_window"] = run.quota_writes
    out["burst_p99_ratio"] = {
        verb: round(out["burst"][verb]["p99_ms"] / out["quiet"][verb]["p99_ms"], 3) for verb in ("filter", "healthz")
    }
    if args.service_log:
        for t, line in run.log:
            print(f"{t - t_leader:+8.3f} {line}", file=sys.stderr)
    slow = sorted((x for x in run.samples if t_leader <= x[0] < t_end), key=lambda x: -x[2])[: args.show_slowest]
    out["burst"]["slowest"] = [
        {"at_seconds_after_leader": round(t - t_leader, 3), "verb": v, "ms": round(s * 1000, 1)} for t, v, s in slow
    ]
    out["part_p99_ratio"] = {
        part: {
            verb: round(out[part][verb]["p99_ms"] / out["quiet"][verb]["p99_ms"], 3) for verb in ("filter", "healthz")
        }
        for part in ("burst_synchronous_part", "burst_writes")
    }
    # the machine's own noise, in the same run: a second quiet window against the first
    out["control_p99_ratio"] = {
        verb: round(out["control"][verb]["p99_ms"] / out["quiet"][verb]["p99_ms"], 3) for verb in ("filter", "healthz")
    }
    out["noise_limited"] = any(r > TARGET_RATIO for r in out["control_p99_ratio"].values())
    out["target"] = {"burst_p99_ratio_max": TARGET_RATIO}
    out["target_met"] = all(r <= TARGET_RATIO for r in out["burst_p99_ratio"].values())


def _cpu_pressure() -> str | None:
    """Linux PSI: the share of the time some runnable task waited for a CPU (``some avg10=…``)."""
    try:
        return Path("/proc/pressure/cpu").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None


async def _get(port: int, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        data = await reader.read()
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head[9:12]), body


async def _until_ready(ops: int, deadline: float, service: asyncio.subprocess.Process) -> float:
    t0 = time.perf_counter()
    while True:
        if service.returncode is not None:
            raise RuntimeError(f"the service exited with {service.returncode}")
        with contextlib.suppress(OSError, ValueError):
            status, _ = await _get(ops, "/readyz")
            if status == 200:
                return time.perf_counter() - t0
        if time.monotonic() > deadline:
            raise RuntimeError("the service did not become ready")
        await asyncio.sleep(0.5)


async def _stored_pod(ops: int, pod: Obj) -> Obj:
    """The pod as the service's cache holds it (its UID is the emulator's): from /diagnose."""
    meta = pod["metadata"]
    status, body = await _get(ops, f"/diagnose/pod/{meta['namespace']}/{meta['name']}")
    if status != 200:
        raise RuntimeError(f"/diagnose/pod answered {status}: {body[:200]!r}")
    doc = orjson.loads(body)
    uid = doc.get("uid") or (doc.get("pod") or {}).get("uid")
    if not uid:
        raise RuntimeError(f"no uid in /diagnose/pod: {sorted(doc)}")
    return {**pod, "metadata": {**meta, "uid": uid}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--leaves", type=int, default=40)
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--candidates", type=int, default=500, help="node names per filter request")
    p.add_argument("--gap", type=float, default=0.01, help="seconds between two requests of the schedule")
    p.add_argument("--quiet-seconds", type=float, default=6.0)
    p.add_argument("--control-seconds", type=float, default=6.0, help="a second quiet window: the noise")
    p.add_argument("--tail-seconds", type=float, default=2.0)
    p.add_argument("--timeout", type=float, default=170.0, help="give up after this many seconds")
    p.add_argument("--service-log", action="store_true", help="print the service's log (stderr), timed from leadership")
    p.add_argument("--show-slowest", type=int, default=5, help="list the burst's slowest requests")
    p.add_argument("--service-root", help="run the service from this source tree (default: this one)")
    p.add_argument(
        "--emulator-nice",
        type=int,
        default=10,
        help="niceness of the emulator process (0: compete with the service for the CPU as an equal)",
    )
    p.add_argument("--serve-emulator", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--dump", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve_emulator:
        asyncio.run(emulator_main(args))
        return
    if args.service_root is not None:
        args.service_root = os.path.realpath(args.service_root)
    print(json.dumps(asyncio.run(client_main(args)), indent=2))


if __name__ == "__main__":
    main()
