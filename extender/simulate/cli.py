"""``sky-scheduler simulate`` and ``sky-scheduler sandbox``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import orjson

from extender.simulate.scenario import DEFAULT_SCENARIO, ScenarioError, load_scenario

__all__ = ["add_arguments", "add_sandbox_arguments", "run", "run_sandbox"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "scenario",
        nargs="?",
        default=DEFAULT_SCENARIO,
        help=f"a scenario file, or the name of an embedded one (default: {DEFAULT_SCENARIO}, the seed's example)",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    parser.add_argument("--svg", metavar="FILE", help="also draw the placement as an SVG picture: one panel per step")
    parser.add_argument(
        "--svg-step",
        metavar="N",
        type=int,
        help="draw only step N (1 = the first step) in the SVG picture (default: every step)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the outcome differs from the scenario's expect section"
    )


def _progress(quiet: bool) -> object:
    if quiet:
        return None

    def show(i: int, total: int, title: str) -> None:
        print(f"[{i}/{total}] {title}", file=sys.stderr, flush=True)

    return show


async def _simulate(args: argparse.Namespace) -> int:
    from extender.simulate.render import render_svg, render_text  # noqa: PLC0415
    from extender.simulate.runner import Simulation  # noqa: PLC0415

    scenario = load_scenario(args.scenario)
    if args.svg_step is not None and not 1 <= args.svg_step <= len(scenario.steps):
        raise ScenarioError(
            f"--svg-step {args.svg_step}: scenario {scenario.name} has steps 1 to {len(scenario.steps)}"
        )
    progress = _progress(args.quiet or args.format == "json")
    async with Simulation(scenario, progress=progress) as sim:  # type: ignore[arg-type]
        result = await sim.run()
    if args.format == "json":
        sys.stdout.write(orjson.dumps(result.as_json(), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(render_text(result))
    if args.svg:
        svg = render_svg(result, step=args.svg_step)
        await asyncio.to_thread(Path(args.svg).write_text, svg, encoding="utf-8")
        if args.format == "text":
            print(f"picture written to {args.svg}")
    problems = result.check()
    if args.check and problems:
        for p in problems:
            print(f"unexpected: {p}", file=sys.stderr)
        return 1
    return 0


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(_simulate(args))
    except ScenarioError as exc:
        print(f"sky-scheduler simulate: {exc}", file=sys.stderr)
        return 2


# --- sandbox -------------------------------------------------------------------------------------
SANDBOX_OPS_PORT = 8080
"""The sandbox's ops port: ``serve``'s default, so the commands of docs/deploy.md work unchanged."""


_PORT_ERRORS = (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL)


class SandboxPortError(Exception):
    """A port the sandbox was asked to listen on is taken (or not allowed)."""


def add_sandbox_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", nargs="?", default=DEFAULT_SCENARIO, help="scenario to load (default: the seed's)")
    parser.add_argument("--port", type=int, default=0, help="emulator (API server) port (default: any free port)")
    parser.add_argument(
        "--ops-port",
        type=int,
        default=SANDBOX_OPS_PORT,
        help=f"port of /diagnose and /metrics on 127.0.0.1 (default: {SANDBOX_OPS_PORT}, serve's, so the curl commands "
        "are those used after a port-forward on a cluster; 0: any free port)",
    )
    parser.add_argument(
        "--kubeconfig-out",
        default="sky-sandbox.kubeconfig",
        metavar="FILE",
        help="where to write the kubeconfig for kubectl (default: ./sky-sandbox.kubeconfig)",
    )
    parser.add_argument(
        "--webhook-ca-out",
        default="sky-sandbox-webhook-ca.crt",
        metavar="FILE",
        help="where to copy the CA of the webhook's serving certificate, for curl --cacert "
        "(default: ./sky-sandbox-webhook-ca.crt)",
    )
    parser.add_argument("--period", type=float, default=1.0, help="seconds between scheduling rounds (default: 1)")


async def _sandbox(args: argparse.Namespace) -> int:
    from extender.simulate.registration import CONFIGURATION_NAME, SERVICE_DNS  # noqa: PLC0415
    from extender.simulate.runner import Simulation  # noqa: PLC0415

    scenario = load_scenario(args.scenario)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    sim = Simulation(scenario, emulator_port=args.port, ops_port=args.ops_port, real_time=True)
    try:
        await sim.start()
    except OSError as exc:
        await sim.stop()
        if exc.errno not in _PORT_ERRORS:
            raise
        raise SandboxPortError(
            f"cannot listen on 127.0.0.1 (API server --port {args.port}, ops --ops-port {args.ops_port}): {exc}; "
            "pass another port, or 0 for any free one"
        ) from exc
    try:
        kubeconfig = sim.emulator.write_kubeconfig(_absolute(args.kubeconfig_out))
        ca = _copy_file(sim.tls.ca_file, Path(args.webhook_ca_out))
        rt = sim.cluster.rt
        print(f"sandbox of scenario {scenario.name} is running (Ctrl-C stops it)")
        print(f"  API server (emulator)  {sim.emulator.url}")
        print(f"  kubeconfig             {kubeconfig}")
        for name, srv in sorted(rt.servers.items()):
            print(f"  {name:<22} {srv.url}")
        print(f"  webhook CA             {ca}")
        print(f"  webhook registration   mutatingwebhookconfiguration/{CONFIGURATION_NAME} (service {SERVICE_DNS})")
        ops = rt.servers["ops"].url
        print()
        print("try: (in another terminal; a walk-through from here to your own job placed: docs/quickstart.md)")
        print(f"  export KUBECONFIG={kubeconfig}")
        print("  kubectl get quota -w")
        print("  kubectl get pods -A -o wide")
        print(f"  curl {ops}/diagnose/job/{_first_job(scenario)}")
        print(f"  curl {ops}/metrics")
        if "webhook" in rt.servers:
            print(f"  curl --cacert {ca} {rt.servers['webhook'].url}/mutate/pods -d @review.json")
        for line in quota_banner(scenario, str(kubeconfig)):
            print(line)
        print("pods you create with kubectl (schedulerName: sky-scheduler) are admitted by the webhook (hop 1),")
        print("their quotas placed by the binder loop and the pods by the kube-scheduler stand-in through the")
        print("extender, like the scenario's own.")
        print(flush=True)
        await sim.run_forever(stop, period=args.period)
    finally:
        await sim.stop()
    return 0


def _absolute(path: str) -> Path:
    """``path`` made absolute: the banner's commands then work from any directory."""
    return Path(path).absolute()


def _copy_file(source: Path, target: Path) -> Path:
    """Copy ``source`` to ``target`` (a stable path the user can find) and return it absolute."""
    target = target.absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(source.read_bytes())
    return target


def quota_banner(scenario: Any, kubeconfig: str) -> list[str]:
    """Where the sandbox's quotas come from, and how to add some (every pod needs one)."""
    specs = list(getattr(scenario, "quotas", []) or [])
    total = sum(q.count for q in specs)
    if total:
        lines = [f"quotas: {total} from scenario {scenario.name}'s `quotas:` list (every pod of a job claims one):"]
    else:
        lines = [f"quotas: none in scenario {scenario.name} (every pod of a job claims one; without, it waits)"]
    for q in specs:
        request = ",".join(f"{k}={v}" for k, v in q.request.items())
        lines.append(
            f"  {q.name.replace('{i}', '0..' + str(q.count - 1)) if q.count > 1 else q.name}"
            f"  queue {q.queue}  request {request}"
        )
    queue = specs[0].queue if specs else "research"
    lines.append(
        f"  more: sky-scheduler quotas create --kubeconfig {kubeconfig} --queue {queue} --count 2 "
        "--request nvidia.com/gpu=1,rdma/hca=1  (or a Queue's spec.quotaPools)"
    )
    return lines


def _first_job(scenario: object) -> str:
    """``namespace/name`` of the scenario's first job, or a placeholder when it submits none."""
    for step in getattr(scenario, "steps", []):
        for job in step.jobs:
            return f"{job.namespace}/{job.name}"
    return "<namespace>/<job>"


def run_sandbox(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(_sandbox(args))
    except ScenarioError as exc:
        print(f"sky-scheduler sandbox: {exc}", file=sys.stderr)
        return 2
    except SandboxPortError as exc:
        print(f"sky-scheduler sandbox: {exc}", file=sys.stderr)
        return 1
