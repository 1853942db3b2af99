"""What the HTTP benchmarks share (``bench/webhook.py``, ``bench/extender.py``): starting a server
child process, serving until the parent closes stdin while answering CPU-time queries, settling the
heap after the build, reading an ASGI body, pinning processes to a CPU, and percentiles."""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import os
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "ALL_CPUS",
    "add_cpu_argument",
    "body_of",
    "pct",
    "pin",
    "settle_heap",
    "spawn",
    "until_eof",
    "until_eof_profiled",
]

ROOT = Path(__file__).resolve().parent.parent
ALL_CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


async def spawn(script: str, *extra: str) -> asyncio.subprocess.Process:
    """``script`` run again as a server child (stdin and stdout piped, this checkout importable;
    stdout lines up to 1 GiB: a child may print large JSON documents)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        script,
        *extra,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        limit=1 << 30,
    )


def add_cpu_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cpu",
        type=int,
        default=ALL_CPUS[-1] if ALL_CPUS else -1,
        help="the one CPU every process of the run is pinned to (default: the last one; -1: no pinning)",
    )


class _GcClock:
    """CPU seconds this process spent in the cyclic garbage collector (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0
        gc.callbacks.append(self._on)

    def _on(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.seconds += time.process_time() - self._start


async def until_eof(report: Callable[[], dict[str, Any]]) -> None:
    """Serve until the parent closes stdin; a ``cpu`` line is answered with this process's CPU time
    (``cpu``) and the part of it spent collecting garbage (``gc_cpu``)."""
    loop = asyncio.get_running_loop()
    collector = _GcClock()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        if line.strip() == "cpu":
            print(json.dumps({"cpu": time.process_time(), "gc_cpu": collector.seconds, **report()}), flush=True)


async def until_eof_profiled(report: Callable[[], dict[str, Any]], *, profile: bool, cumulative: int) -> None:
    """:func:`until_eof`, under cProfile when ``profile``: the top 30 by own time and the top
    ``cumulative`` by cumulative time go to stderr at the end. Times are the process's CPU time
    (what the benchmarks compare), not wall time: waiting in epoll or for a peer on the same CPU
    does not count."""
    prof = cProfile.Profile(time.process_time) if profile else None
    if prof is not None:
        prof.enable()
    await until_eof(report)
    if prof is not None:
        prof.disable()
        text = io.StringIO()
        stats = pstats.Stats(prof, stream=text)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumulative").print_stats(cumulative)
        print(text.getvalue(), file=sys.stderr)


def settle_heap(args: argparse.Namespace) -> None:
    """The build is over: collect (and with ``--gc-freeze`` freeze) what it made, collect again from now on."""
    if args.gc_freeze:
        gc.collect()
        gc.freeze()
    gc.enable()


async def body_of(receive: Any) -> bytes:
    """The whole body of an ASGI request."""
    chunks = []
    more = True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


def pin(cpu: int, *pids: int) -> list[int]:
    """Pin these processes (0: this one) to one CPU (``cpu`` −1: leave them as they are); the CPUs
    this process may run on afterwards."""
    if cpu >= 0 and hasattr(os, "sched_setaffinity"):
        for pid in pids:
            os.sched_setaffinity(pid, {cpu})
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` (nearest rank)."""
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]
