"""``sky-scheduler serve``: the service (extender, webhook, binder loop, ops endpoints) until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys

from extender.framework.policy import PolicyError
from extender.logs import setup_logging
from extender.settings import ServeSettings, add_serve_arguments, settings_from_args

log = logging.getLogger("sky-scheduler")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_serve_arguments(parser)


async def serve(settings: ServeSettings) -> int:
    from extender.service import Runtime  # noqa: PLC0415 (heavy imports only when serving)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    runtime = Runtime(settings)
    try:
        await runtime.start()
    except (PolicyError, OSError):
        raise
    except Exception as exc:  # a bad kubeconfig, an unreachable API server, …: say so, exit 1
        print(f"sky-scheduler serve: cannot start: {type(exc).__name__}: {exc}", file=sys.stderr)
        with contextlib.suppress(Exception):
            await runtime.stop()
        return 1
    addresses = ", ".join(f"{name} {srv.url}" for name, srv in runtime.servers.items())
    log.info("sky-scheduler serving: %s; binder lease %s/%s", addresses, settings.lease_namespace, settings.lease_name)
    try:
        await stop.wait()
    finally:
        log.info("stopping")
        await runtime.stop()
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        print(f"sky-scheduler serve: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings.log_level, settings.log_format, background=True)
    try:
        return asyncio.run(serve(settings))
    except PolicyError as exc:
        print(f"sky-scheduler serve: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"sky-scheduler serve: {exc}", file=sys.stderr)
        return 1
