"""``sky-scheduler discover {roce,ib}``: command-line wiring of the two discovery agents.

Exposes ``add_arguments(parser)`` and ``run(args) -> int`` for :mod:`extender.cli`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import re
import signal
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from discovery.common import kube
from discovery.common.heartbeat import DEFAULT_HEARTBEAT_SECONDS, agent_identity, default_instance
from discovery.common.sink import DryRunSink, TopologySink, write_json
from discovery.ib import hosts
from discovery.ib.collector import DEFAULT_IBNETDISCOVER, IbCollector, IbConfig, IbRound
from discovery.roce.agent import DEFAULT_LLDPCLI, DEFAULT_RDMA_CMD, RoceAgent, RoceConfig, parse_command
from extender import wellknown
from extender.logs import LOG_FORMATS, parse_level, setup_logging

__all__ = ["add_arguments", "run"]

log = logging.getLogger("discovery")


def _default_node_name() -> str:
    return os.environ.get("NODE_NAME") or socket.gethostname()


def _heartbeat_seconds(value: str) -> float:
    seconds = float(value)
    if seconds < 0:
        raise argparse.ArgumentTypeError("must be 0 (no heartbeat) or a positive number of seconds")
    return seconds


def _log_level(value: str) -> str:
    try:
        parse_level(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value.strip().lower()


def _common(p: argparse.ArgumentParser, period: float, kind: str) -> None:
    p.add_argument(
        "--period", type=float, default=period, metavar="SECONDS", help=f"seconds between rounds (default {period:g})"
    )
    p.add_argument(
        "--heartbeat-seconds",
        type=_heartbeat_seconds,
        default=DEFAULT_HEARTBEAT_SECONDS,
        metavar="SECONDS",
        help="write the NodeTopology's status.observedAt when the spec changed, else at most this often "
        f"(default {DEFAULT_HEARTBEAT_SECONDS:g}; 0: never)",
    )
    p.add_argument(
        "--agent-identity",
        default=default_instance(),
        metavar="NAME",
        help=f"this agent in status.agent, written as {kind}/NAME (default: $POD_NAME, else hostname)",
    )
    p.add_argument("--once", action="store_true", help="run one round and exit")
    p.add_argument(
        "--alive-file",
        type=Path,
        default=None,
        metavar="PATH",
        help="touch PATH after every round (the chart's liveness and readiness probes look at its age)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the NodeTopology object(s) that would be written (JSON on stdout) instead of writing",
    )
    p.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG") or None,
        help="kubeconfig file (default: $KUBECONFIG, else in-cluster configuration, else ~/.kube/config)",
    )
    p.add_argument(
        "--log-level", default="info", type=_log_level, help="debug, info, warning or error, any case (default info)"
    )
    p.add_argument("--log-format", default="text", choices=LOG_FORMATS, help="text, or json: one object per line")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="discover_kind", metavar="KIND", required=True)
    _add_roce_parser(sub)
    _add_ib_parser(sub)


def _add_roce_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``discover roce``: the per-node agent (LLDP through lldpcli, CNI masters and bonds, rdma link)."""
    roce = sub.add_parser(
        "roce",
        help="per-node RoCE agent: CNI masters + bonds + LLDP neighbours + rdma link",
        description="Discover which switch each RoCE NIC of this node is cabled to and publish the "
        "node's NodeTopology spec.net.roce, spec.zone and its zone label.",
    )
    roce.add_argument(
        "--node-name", default=_default_node_name(), help="this node's name (default: $NODE_NAME, else hostname)"
    )
    roce.add_argument("--cni-dir", type=Path, default=Path("/etc/cni/net.d"), help="Multus/CNI configuration directory")
    roce.add_argument("--sysfs-root", type=Path, default=Path("/sys"), help="sysfs mount point (default /sys)")
    roce.add_argument(
        "--lldpcli",
        default=" ".join(DEFAULT_LLDPCLI),
        help="command printing the LLDP neighbour table in json0 form (default %(default)r)",
    )
    roce.add_argument(
        "--lldpd-socket",
        default=None,
        metavar="PATH",
        help="lldpd control socket shared by the sidecar (adds `-u PATH` to the lldpcli command)",
    )
    roce.add_argument(
        "--rdma-cmd",
        default=" ".join(DEFAULT_RDMA_CMD),
        help="command printing RDMA links as JSON (default %(default)r)",
    )
    roce.add_argument(
        "--fabric-map",
        type=Path,
        default=None,
        metavar="FILE",
        help="YAML/JSON mapping of each leaf switch (LLDP system name) to its spine and core, e.g. "
        "`leaf-a: [spine-1, core-1]`; gives spec.tiers above the leaf (re-read every round; e.g. a "
        "ConfigMap mount)",
    )
    roce.add_argument("--timeout", type=float, default=10.0, help="timeout of each command, seconds")
    _common(roce, 10.0, "roce")


def _add_ib_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``discover ib``: the fabric-wide InfiniBand collector (ibnetdiscover, leader-elected by a Lease)."""
    ib = sub.add_parser(
        "ib",
        help="InfiniBand fabric collector: ibnetdiscover → every node's NodeTopology",
        description="Discover the InfiniBand fabric, map each HCA to its leaf switch and its Kubernetes "
        "node, and publish every node's NodeTopology spec.net.ib, spec.zone and zone label.",
    )
    ib.add_argument(
        "--input", type=Path, default=None, help="read ibnetdiscover output from FILE instead of running it"
    )
    ib.add_argument(
        "--ibnetdiscover-cmd", default=" ".join(DEFAULT_IBNETDISCOVER), help="command to run (default %(default)r)"
    )
    ib.add_argument(
        "--hostname-pattern",
        default=hosts.DEFAULT_HOSTNAME_PATTERN,
        help="regex extracting the hostname from an HCA node description: named group `host`, else "
        "the first group (default %(default)r)",
    )
    ib.add_argument(
        "--switch-names",
        type=Path,
        default=None,
        metavar="FILE",
        help="YAML/JSON mapping of switch GUID to the name to use for it (re-read every round; e.g. a "
        "ConfigMap mount); switches not in it are named by their description, with the GUID when the "
        "description is not unique in the fabric",
    )
    ib.add_argument("--lease-name", default=wellknown.DEFAULT_IB_LEASE, help="Lease for leader election")
    ib.add_argument(
        "--lease-namespace",
        default=os.environ.get("POD_NAMESPACE") or "kube-system",
        help="namespace of the Lease (default: $POD_NAMESPACE, else kube-system)",
    )
    ib.add_argument(
        "--identity",
        default=os.environ.get("POD_NAME") or socket.gethostname(),
        help="holder identity in the Lease (default: $POD_NAME, else hostname)",
    )
    ib.add_argument("--timeout", type=float, default=300.0, help="timeout of ibnetdiscover, seconds")
    _common(ib, 600.0, "ib")


def _setup_logging(level: str, fmt: str) -> None:
    root = logging.getLogger()
    if not root.handlers or fmt == "json":
        setup_logging(level, fmt)
    root.setLevel(parse_level(level))


def _alive(args: argparse.Namespace) -> Callable[[], None] | None:
    """What ``--alive-file`` asks for: the file's modification time is the last round's end."""
    path: Path | None = args.alive_file
    if path is None:
        return None

    def touch() -> None:
        try:
            path.touch()
        except OSError as exc:
            log.warning("cannot touch the alive file %s: %s", path, exc)

    return touch


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    return stop


@contextlib.asynccontextmanager
async def _sink(args: argparse.Namespace, *, collect: bool) -> AsyncIterator[TopologySink]:
    """The agents write NodeTopology objects only (with their ``zone`` label): the binder leader
    copies the label onto the Node, so neither the RoCE agent nor the IB collector may write Nodes."""
    if args.dry_run:
        if args.kubeconfig:
            async with kube.open_reader(args.kubeconfig) as reader:
                yield kube.DryRunKubeSink(reader, collect=collect)
        else:
            yield DryRunSink(collect=collect)
        return
    async with kube.open_sink(args.kubeconfig) as sink:
        yield sink


def _lldpcli_argv(args: argparse.Namespace) -> tuple[str, ...]:
    argv = parse_command(args.lldpcli)
    if args.lldpd_socket and argv:
        argv = (argv[0], "-u", args.lldpd_socket, *argv[1:])
    return argv


async def _run_roce(args: argparse.Namespace) -> int:
    config = RoceConfig(
        node_name=args.node_name,
        cni_dir=args.cni_dir,
        sysfs_root=args.sysfs_root,
        lldpcli=_lldpcli_argv(args),
        rdma_cmd=parse_command(args.rdma_cmd),
        period=args.period,
        tool_timeout=args.timeout,
        publish_incomplete=args.dry_run,
        heartbeat_seconds=args.heartbeat_seconds,
        agent=agent_identity("roce", args.agent_identity),
        fabric_map=args.fabric_map,
    )
    log.info(
        "RoCE discovery for node %s: CNI %s, sysfs %s, `%s`, `%s`%s",
        config.node_name,
        config.cni_dir,
        config.sysfs_root,
        " ".join(config.lldpcli),
        " ".join(config.rdma_cmd),
        " (dry run)" if args.dry_run else "",
    )
    async with _sink(args, collect=False) as sink:
        agent = RoceAgent(config, sink)
        if args.once:
            result = await agent.run_once()
            if args.dry_run:
                return 0
            return 0 if result.outcome is not None else 1
        await agent.run(_stop_event(), on_round=_alive(args))
    return 0


def _print_ib_dry_run(sink: TopologySink, result: IbRound) -> None:
    printed = sink.printed if isinstance(sink, DryRunSink) else []
    mapping = result.mapping
    write_json(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": printed,
            "unknownHosts": [
                {"host": h, "descriptions": d} for h, d in (mapping.unknown_hosts.items() if mapping else [])
            ],
            "unparsableDescriptions": mapping.unparsable if mapping else [],
        }
    )


async def _run_ib(args: argparse.Namespace) -> int:
    try:
        hosts.compile_pattern(args.hostname_pattern)
    except (ValueError, re.error) as e:
        log.error("invalid --hostname-pattern: %s", e)
        return 2
    config = IbConfig(
        input=args.input,
        ibnetdiscover=parse_command(args.ibnetdiscover_cmd),
        hostname_pattern=args.hostname_pattern,
        period=args.period,
        tool_timeout=args.timeout,
        heartbeat_seconds=args.heartbeat_seconds,
        agent=agent_identity("ib", args.agent_identity),
        switch_names=args.switch_names,
    )
    log.info(
        "InfiniBand discovery from %s%s",
        args.input or f"`{args.ibnetdiscover_cmd}`",
        " (dry run)" if args.dry_run else "",
    )
    if args.dry_run or args.once:  # one-shot: no leader election
        async with _sink(args, collect=args.dry_run) as sink:
            result = await IbCollector(config, sink).run_once()
            if args.dry_run:
                _print_ib_dry_run(sink, result)
                return 0 if result.error is None else 1
            return 0 if result.error is None and not result.failed else 1
    async with (
        kube.open_sink(args.kubeconfig) as kube_sink,
        kube.leader_election(kube_sink, args.lease_name, args.lease_namespace, args.identity) as lead,
    ):
        collector = IbCollector(config, kube_sink, is_leader=lead)
        await collector.run(_stop_event(), on_round=_alive(args))
    return 0


def run(args: argparse.Namespace) -> int:
    _setup_logging(args.log_level, args.log_format)
    main = _run_roce if args.discover_kind == "roce" else _run_ib
    try:
        return asyncio.run(main(args))
    except kube.KubeUnavailable as e:
        log.error("%s", e)
        return 2
    except KeyboardInterrupt:
        return 130
