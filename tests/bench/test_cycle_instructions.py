"""bench/cycle_instructions.py: the instruction counts callgrind reports, read right."""

from __future__ import annotations

import json
import shutil

import pytest

from bench import cycle_instructions
from bench.cycle_instructions import collected

VALGRIND_TAIL = """==4242== Events    : Ir
==4242== Collected : 905275110
==4242==
==4242== I   refs:      905,275,110
"""


def test_the_count_is_the_collected_line() -> None:
    assert collected(VALGRIND_TAIL) == 905275110


@pytest.mark.parametrize("stderr", ["", VALGRIND_TAIL + VALGRIND_TAIL, "==1== I   refs: 12\n"])
def test_no_count_or_two_counts_is_an_error_that_shows_the_output(stderr: str) -> None:
    with pytest.raises(RuntimeError, match="callgrind printed"):
        collected(stderr)


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_a_small_cluster_counts_the_cycle_above_the_floor_and_repeats(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--nodes", "16", "--leaves", "2", "--jobs", "4", "--workers", "4"]
    assert cycle_instructions.main(args) == 0
    first = capsys.readouterr().out
    assert cycle_instructions.main(args) == 0
    again = capsys.readouterr().out
    a, b = json.loads(first), json.loads(again)
    assert a["cycle_instructions"] > a["floor_instructions"] > 0
    assert a["plugin_calls_instructions"] > 0
    assert abs(a["cycle_instructions"] - b["cycle_instructions"]) <= 0.005 * a["cycle_instructions"]
