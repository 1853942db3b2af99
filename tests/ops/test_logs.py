"""Logging of every entry point: ``--log-format json`` (one object per line, ``extra`` fields as
members), levels in any case (flags, environment, chart values)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from extender.logs import parse_level
from extender.settings import add_serve_arguments, settings_from_args

REPO = Path(__file__).resolve().parents[2]

_CHILD = """
import logging
from extender.logs import setup_logging
setup_logging("{level}", "{fmt}", background={background})
log = logging.getLogger("extender.binder.loop")
log.debug("hidden")
log.info("quota %s bound to %s", "q-7", "n3", extra={{"quota": "q-7", "job": "ml/llama", "node": "n3"}})
try:
    raise RuntimeError("boom")
except RuntimeError:
    log.exception("cycle failed", extra={{"job": "ml/llama"}})
"""


def _child(level: str, fmt: str, background: bool = False) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.format(level=level, fmt=fmt, background=background)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stderr.splitlines()


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_json_lines_carry_the_extra_fields(background: bool) -> None:
    lines = _child("INFO", "json", background)
    docs = [json.loads(line) for line in lines if line.startswith("{")]
    assert len(docs) == 2, lines  # debug is below INFO
    first, second = docs
    assert first["message"] == "quota q-7 bound to n3"
    assert (first["level"], first["logger"]) == ("info", "extender.binder.loop")
    assert (first["quota"], first["job"], first["node"]) == ("q-7", "ml/llama", "n3")
    assert first["time"].endswith("Z") and "T" in first["time"]
    assert second["level"] == "error" and second["job"] == "ml/llama"
    assert "RuntimeError: boom" in second["exc_info"]


@pytest.mark.parametrize("background", [False, True], ids=["inline", "background"])
def test_text_stays_the_default_shape(background: bool) -> None:
    lines = _child("debug", "text", background)
    assert any(line.endswith("INFO extender.binder.loop: quota q-7 bound to n3") for line in lines), lines
    assert any("DEBUG extender.binder.loop: hidden" in line for line in lines)
    assert any(line.endswith("ERROR extender.binder.loop: cycle failed") for line in lines), lines
    assert lines[-1] == "RuntimeError: boom"  # the traceback follows the line


_MUTATED = """
import logging
from extender.logs import setup_logging
setup_logging("info", "text", background=True)
items = ["before"]
logging.getLogger("x").info("items %s", items)
items[0] = "after"  # changed after the call: the line says what it was at the call
"""


def test_background_lines_say_what_was_logged_at_the_call() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _MUTATED], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stderr.rstrip().endswith("INFO x: items ['before']"), out.stderr


@pytest.mark.parametrize("given", ["info", "INFO", "Info", " warning "])
def test_levels_in_any_case(given: str) -> None:
    assert parse_level(given) in (20, 30)
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    settings = settings_from_args(parser.parse_args(["--log-level", given, "--webhook-port", "0"]), env={})
    assert settings.log_level == given


def test_bad_level_and_format_are_named() -> None:
    with pytest.raises(ValueError, match="not one of debug, info, warning, error"):
        parse_level("loud")
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    args = parser.parse_args(["--log-format", "xml", "--webhook-port", "0"])
    with pytest.raises(ValueError, match="--log-format must be text or json"):
        settings_from_args(args, env={})


def test_discovery_accepts_levels_in_any_case() -> None:
    from extender.cli import build_parser

    args = build_parser().parse_args(["discover", "roce", "--log-level", "Debug", "--log-format", "json"])
    assert (args.log_level, args.log_format) == ("debug", "json")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["discover", "roce", "--log-level", "LOUD"])
