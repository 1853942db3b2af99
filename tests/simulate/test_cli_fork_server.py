"""tests/cli_process.run_cli answers as ``python -m extender.cli`` does: the same exit code, the
same standard output and error, a run past its timeout killed (and the server still serving)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_process import run_cli

ROOT = Path(__file__).resolve().parents[2]
FAT_TREE = ROOT / "tests" / "fixtures" / "discovery" / "ib" / "fat-tree.txt"


def _spawned(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "extender.cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        check=False,
    )


def _untimed(log: str) -> str:
    """Log lines without their timestamps (the two runs happen at different times)."""
    return re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", "", log, flags=re.M)


@pytest.mark.parametrize(
    "args",
    [
        ("simulate", "--format", "json"),  # exit 0, a document on stdout
        ("simulate", "no-such-embedded-scenario"),  # exit 2, the error on stderr
        ("no-such-command",),  # argparse's usage error (SystemExit 2)
        ("discover", "ib", "--input", str(FAT_TREE), "--once", "--dry-run"),  # logs on stderr, JSON on stdout
    ],
    ids=["json", "bad-scenario", "usage-error", "discover"],
)
def test_a_forked_run_answers_as_the_entry_point_does(args: tuple[str, ...]) -> None:
    forked, spawned = run_cli(*args, cwd=ROOT), _spawned(*args)
    assert (forked.returncode, forked.stdout) == (spawned.returncode, spawned.stdout)
    assert _untimed(forked.stderr) == _untimed(spawned.stderr)
    assert forked.stdout or forked.stderr  # the comparison is about something


def test_a_run_past_its_timeout_is_killed_and_the_server_serves_on() -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        run_cli("simulate", "seed-8-node", timeout=0.05, cwd=ROOT)
    assert run_cli("simulate", "no-such-embedded-scenario", cwd=ROOT).returncode == 2
