"""``sky-scheduler emulator``: run the Kubernetes API emulator on 127.0.0.1 until SIGINT/SIGTERM.

sky-scheduler emulator --kubeconfig-out /tmp/kc --crds crds/
kubectl --kubeconfig /tmp/kc get nodes
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

import yaml

from extender.emulator.errors import ApiError
from extender.emulator.server import Emulator, read_yaml_objects

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=0, help="TCP port (default: 0 = any free port)")
    parser.add_argument(
        "--kubeconfig-out",
        metavar="FILE",
        type=Path,
        help="write a kubeconfig for the emulator to FILE (kubectl --kubeconfig FILE …)",
    )
    parser.add_argument(
        "--crds",
        metavar="DIR",
        type=Path,
        action="append",
        default=[],
        help="apply the CustomResourceDefinitions found in the *.yaml files of DIR at start (repeatable)",
    )
    parser.add_argument(
        "--load",
        metavar="PATH",
        type=Path,
        action="append",
        default=[],
        help="apply every object of a YAML file or directory after the CRDs (repeatable)",
    )
    parser.add_argument(
        "--service",
        metavar="NS/NAME:PORT=HOST:PORT",
        type=_service_mapping,
        action="append",
        default=[],
        help="serve the Service NS/NAME port PORT at HOST:PORT for admission webhook calls (no cluster DNS "
        "here; the certificate is still checked for NAME.NS.svc) (repeatable)",
    )
    parser.add_argument(
        "--history",
        type=int,
        default=1000,
        help="watch events kept per resource; older resourceVersions get 410 Gone (default: %(default)s)",
    )


def _service_mapping(text: str) -> tuple[str, str, int, str]:
    """``NS/NAME:PORT=HOST:PORT`` → (namespace, name, port, address)."""
    service, sep, address = text.partition("=")
    namespace, slash, rest = service.partition("/")
    name, colon, port = rest.rpartition(":")
    host, _, address_port = address.rpartition(":")
    if not (sep and slash and colon and namespace and name and host and port.isdigit() and address_port.isdigit()):
        raise argparse.ArgumentTypeError(f"expected NS/NAME:PORT=HOST:PORT, got {text!r}")
    return namespace, name, int(port), address


async def _serve(args: argparse.Namespace) -> int:
    emu = Emulator(host=args.host, port=args.port, history_size=args.history)
    for namespace, name, port, address in args.service:
        emu.map_service(namespace, name, port, address)
    try:
        for directory in args.crds:
            crds = [o for o in read_yaml_objects(directory) if o.get("kind") == "CustomResourceDefinition"]
            emu.load(crds)
            print(f"applied {len(crds)} CRD(s) from {directory}", flush=True)
        for path in args.load:
            loaded = emu.load_yaml(path)
            print(f"applied {len(loaded)} object(s) from {path}", flush=True)
    except (ApiError, OSError, ValueError, yaml.YAMLError) as exc:
        print(f"sky-scheduler emulator: {exc}", file=sys.stderr)
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with emu:
        print(f"Kubernetes API emulator listening on {emu.url}", flush=True)
        if args.kubeconfig_out:
            path = emu.write_kubeconfig(args.kubeconfig_out)
            print(f"kubeconfig written to {path}", flush=True)
        await stop.wait()
    print("emulator stopped", flush=True)
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_serve(args))
    except OSError as exc:  # e.g. the port is taken
        print(f"sky-scheduler emulator: {exc}", file=sys.stderr)
        return 1
