"""What the chart renders, read back for the chart tests: the serve and discover command lines
parsed strictly by the real parsers, and the webhook configurations."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import pytest

from tests.deploy.chart import (
    Obj,
    container,
    one,
)


def serve_args(objs: Sequence[Obj]) -> argparse.Namespace:
    from extender.settings import add_serve_arguments

    args = container(one(objs, "Deployment", "sky-scheduler"), "sky-scheduler")["args"]
    assert args[0] == "serve"
    parser = argparse.ArgumentParser(prog="sky-scheduler serve", exit_on_error=False)
    add_serve_arguments(parser)
    return parse_strictly(parser, args[1:])


def parse_strictly(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """Parse like the real command, but turn argparse's exit into a test failure with the reason."""
    try:
        ns, unknown = parser.parse_known_args(list(argv))
    except (argparse.ArgumentError, SystemExit) as e:
        pytest.fail(f"{parser.prog} rejects the chart's arguments {list(argv)}: {e}")
    if unknown:
        pytest.fail(f"{parser.prog} does not know the chart's arguments {unknown}")
    return ns


def discover_parser() -> argparse.ArgumentParser:
    from discovery.cli import add_arguments

    parser = argparse.ArgumentParser(prog="sky-scheduler discover", exit_on_error=False)
    add_arguments(parser)
    return parser


def webhook_entries(objs: Sequence[Obj]) -> list[dict[str, Any]]:
    hooks: list[dict[str, Any]] = one(objs, "MutatingWebhookConfiguration")["webhooks"]
    return hooks


def pods_webhook(objs: Sequence[Obj]) -> dict[str, Any]:
    """The entry for pods that name sky-scheduler (the first)."""
    hook = webhook_entries(objs)[0]
    assert hook["name"].startswith("pods.")
    return hook
