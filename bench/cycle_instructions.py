"""The binder cycle against its floors in executed instructions (issue 16 item 8), counted by
valgrind's callgrind: a ratio that repeats to a few hundredths of a percent where wall time on a
shared 2-core machine moves by 5 % from run to run — fine enough to see a change of 1 %.

Each count runs in its own process under ``valgrind --tool=callgrind --instr-atstart=no``. The
process builds the cluster of ``bench/binder_cycle.py`` (``build``), settles the heap, runs one
cycle and one floor uncounted (the warm-up the timed benchmark also does), then switches
instrumentation on with ``callgrind_control``, runs the counted work once with automatic
collection paused, and switches it off; callgrind reports the instructions executed in between.
``PYTHONHASHSEED`` is fixed, so set and dict order — and with them the count — repeat.

Counted: ``cycle`` — ``Scheduler.run_once`` on a fresh snapshot, as ``full_cycle_seconds``;
``floor`` — the capacity floor (``bench/greedy_floor.py``), as ``floor_seconds``;
``plugin_calls`` — the policy's recorded filter and score calls made again on the plugins
directly (``bench/plugin_calls.py``). Printed: each count, ``ratio_to_floor`` (cycle / floor;
the issue's target ≤ 2.0, ``target_met``), ``plugin_calls_ratio_to_floor`` and
``ratio_to_floor_with_plugin_calls`` (cycle / (floor + plugin calls)). Instructions weigh
operations unlike time does (a cache miss costs no more than a hit), so these ratios are close
to, not equal to, the timed ones; use them to compare two versions of the code.

Usage: ``python bench/cycle_instructions.py [--nodes 2500] [--leaves 40] [--jobs 1000]
[--workers 8] [--launchers]``; needs ``valgrind`` (Debian: ``apt install valgrind``). About a minute at the
default size, which keeps the benchmark's shape (gangs of 8, zones of ~60 nodes, 40 leaves) at
half its node count. ``--launchers``: every gang has a GPU-less launcher (``binder_cycle.py``),
so the cycle takes the planner's path for gangs of mixed sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WHATS = ("cycle", "floor", "plugin_calls")
RATIO_TARGET = 2.0
_COLLECTED = re.compile(r"^==\d+== Collected : (\d+)$", re.MULTILINE)


def collected(valgrind_stderr: str) -> int:
    """The instruction count callgrind prints at exit (``==pid== Collected : N``)."""
    found = _COLLECTED.findall(valgrind_stderr)
    if len(found) != 1:
        raise RuntimeError(f"callgrind printed {len(found)} counts; its output ends:\n{valgrind_stderr[-2000:]}")
    return int(found[0])


def count(what: str, args: argparse.Namespace) -> int:
    """Instructions of ``what`` in a fresh process under callgrind."""
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null"]
    cmd += [sys.executable, str(Path(__file__).resolve()), "--count", what]
    cmd += ["--nodes", str(args.nodes), "--leaves", str(args.leaves), "--jobs", str(args.jobs)]
    cmd += ["--workers", str(args.workers)] + (["--launchers"] if args.launchers else [])
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{what}: exit {done.returncode}:\n{done.stderr[-2000:]}")
    return collected(done.stderr)


def counted_run(what: str, args: argparse.Namespace) -> None:
    """The child: build, warm up, then run ``what`` once with instrumentation on."""
    from bench.binder_cycle import build
    from bench.greedy_floor import greedy_floor
    from bench.plugin_calls import record_cycle, replay_seconds
    from extender import heap
    from extender.conf import default_policy
    from extender.scheduler import Scheduler

    with heap.paused():
        cache = build(args.nodes, args.leaves, args.jobs, args.workers, launchers=args.launchers)
    heap.settle()
    Scheduler(default_policy()).run_once(cache.snapshot())
    greedy_floor(cache.snapshot())
    recorded = record_cycle(cache, default_policy()) if what == "plugin_calls" else None

    def instrument(on: bool) -> None:
        flag = "on" if on else "off"
        subprocess.run(["callgrind_control", "-i", flag, str(os.getpid())], check=True, capture_output=True)

    instrument(True)
    if recorded is not None:
        replay_seconds(*recorded)  # pauses collection itself
    else:
        with heap.paused():
            if what == "cycle":
                Scheduler(default_policy()).run_once(cache.snapshot())
            else:
                greedy_floor(cache.snapshot())
    instrument(False)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    counts = {what: count(what, args) for what in WHATS}
    cycle, floor, calls = counts["cycle"], counts["floor"], counts["plugin_calls"]
    ratio = round(cycle / floor, 2)
    return {
        "benchmark": "cycle_instructions",
        "nodes": args.nodes,
        "leaves": args.leaves,
        "jobs": args.jobs,
        "workers": args.workers,
        "launchers": args.launchers,
        "cycle_instructions": cycle,
        "floor_instructions": floor,
        "plugin_calls_instructions": calls,
        "ratio_to_floor": ratio,
        "plugin_calls_ratio_to_floor": round(calls / floor, 2),
        "ratio_to_floor_with_plugin_calls": round(cycle / (floor + calls), 2),
        "target_met": {"ratio_to_floor_at_most_2": ratio <= RATIO_TARGET},
        "python": sys.version.split()[0],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=2500)
    ap.add_argument("--leaves", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--launchers", action="store_true", help="each gang is an MPIJob: a GPU-less launcher first")
    ap.add_argument("--count", choices=WHATS, help=argparse.SUPPRESS)  # the child's part
    args = ap.parse_args(argv)
    if args.count:
        counted_run(args.count, args)
        return 0
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print(
            "cycle_instructions: needs valgrind and callgrind_control (Debian: apt install valgrind)", file=sys.stderr
        )
        return 2
    print(json.dumps(measure(args), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
