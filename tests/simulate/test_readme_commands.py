"""The README's two first commands are the ones users and CI run (issue 21): the first makes a
virtual environment (a PEP 668 system Python refuses a bare pip install) and runs the embedded
default; the second is exactly what ``.ci/run`` executes."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block is not None, "the README has no sh block"
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_first_command_makes_a_venv_then_simulates_the_embedded_default() -> None:
    first = _readme_commands()[0]
    steps = [s.strip() for s in first.split("&&")]
    assert steps[0].startswith("python3 -m venv ")
    venv = shlex.split(steps[0])[-1]
    assert steps[1] == f". {venv}/bin/activate"
    assert steps[2] == "pip install -e ."
    assert shlex.split(steps[3])[:2] == ["sky-scheduler", "simulate"] and "--svg" in steps[3]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    second = _readme_commands()[1]
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.startswith("exec ")]
    assert ci == [f"exec {second}"]
