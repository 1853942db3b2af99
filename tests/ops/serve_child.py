"""A ``sky-scheduler`` command in a child process, as a container runs it, and its stderr read
line by line: shared by the tests that start ``serve`` for real."""

from __future__ import annotations

import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVING = re.compile(r"sky-scheduler serving: (.*); binder lease")


def start_cli(args: Sequence[str]) -> tuple[subprocess.Popen[str], StderrLines]:
    """``python -m extender.cli <args>`` from the repository, stdout dropped, stderr followed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "extender.cli", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, StderrLines(proc)


def free_port() -> int:
    """A loopback TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class StderrLines:
    """The child's stderr, read line by line in a thread: a wait for a line that never comes
    ends at its deadline instead of blocking in ``readline``."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        self.proc = proc
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def text(self) -> str:
        return "".join(self.seen)

    def wait_for(self, pattern: re.Pattern[str], timeout: float = 60.0) -> re.Match[str]:
        for line in self.seen:
            if m := pattern.search(line):
                return m
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                got = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if got is None:
                pytest.fail(f"serve exited ({self.proc.poll()}) before logging {pattern.pattern!r}:\n{self.text()}")
            self.seen.append(got)
            if m := pattern.search(got):
                return m
        pytest.fail(f"serve did not log {pattern.pattern!r} within {timeout:.0f} s:\n{self.text()}")

    def rest(self, timeout: float = 30.0) -> str:
        """Everything up to the end of the stream (the process has exited)."""
        self._thread.join(timeout)
        while True:
            try:
                line = self._queue.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.seen.append(line)
        return self.text()
