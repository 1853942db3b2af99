"""The ``sky-scheduler`` command line: one console script, one subcommand per entry point.

Each subcommand lives in its own module, which exposes ``add_arguments(parser)`` and
``run(args) -> int``; this module only wires them together (imported lazily, so ``--help`` stays
fast and a subcommand's dependencies load only when it runs).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Protocol, cast


class _Command(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


# name → (module, one-line help). Order is the order of `sky-scheduler --help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "simulate": ("extender.simulate.cli", "Run a scenario through the real components on an in-process cluster"),
    "sandbox": ("extender.simulate.sandbox", "Keep a scenario's cluster running for kubectl, curl and /diagnose"),
    "quotas": ("extender.quotas", "Create the Quota objects a queue's jobs need (print them with --dry-run)"),
    "serve": ("extender.serve", "Run the scheduler service: extender, webhook, quota-binder loop, /diagnose"),
    "discover": ("discovery.cli", "Discover RDMA topology (RoCE per node, InfiniBand fabric) and publish NodeTopology"),
    "emulator": ("extender.emulator.cli", "Run the in-process Kubernetes API emulator on 127.0.0.1"),
}


def _load(module: str) -> _Command:
    return cast(_Command, importlib.import_module(module))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only``, the arguments of that subcommand alone (the others
    keep their one-line help), so a command does not import every other command's modules."""
    parser = argparse.ArgumentParser(
        prog="sky-scheduler",
        description="Topology- and quota-aware scheduling for AI training on Kubernetes.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or name == only:
            _load(module).add_arguments(p)
        p.set_defaults(_module=module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    chosen = next((w for w in words if not w.startswith("-")), None)
    parser = build_parser(only=chosen if chosen in COMMANDS else None)
    args = parser.parse_args(words)
    if not getattr(args, "_module", None):
        parser.print_help()
        return 2
    return _load(args._module).run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
