"""``sky-scheduler sandbox``: the subcommand module (arguments and run live in ``simulate.cli``)."""

from __future__ import annotations

import argparse

from extender.simulate import cli


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cli.add_sandbox_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return cli.run_sandbox(args)
