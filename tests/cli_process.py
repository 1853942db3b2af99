"""Run ``sky-scheduler`` in a child process of its own, without paying Python's imports each time.

``python -m extender.cli simulate …`` spends most of its CPU importing (FastAPI, pydantic models,
kubernetes-asyncio's hundreds of model classes): about two seconds a run, some thirty runs in the
simulator's tests. :func:`run_cli` has the child forked by a server process
(:mod:`tests.cli_forkserver`) that imported those modules once. The child is still a process of
its own — its own globals, logging, event loop, standard streams — that calls the same
``extender.cli.main(argv)`` the console script calls and exits with its return value.

The server starts on first use with this process's environment; a test that needs another
environment, standard input or signals uses :mod:`subprocess` instead.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class _ForkServer:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.cli_forkserver"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT
        )
        self._buffer = b""
        atexit.register(self.close)

    def _line(self, deadline: float | None) -> str | None:
        """The next reply line; None when ``deadline`` (monotonic) passes first."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], wait)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"the CLI fork server ended (exit {self.proc.wait()})")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def run(self, argv: list[str], cwd: str, out: Path, err: Path, timeout: float) -> int | None:
        """The child's exit code; None when it ran past ``timeout`` (it is killed)."""
        assert self.proc.stdin is not None
        request = {"argv": argv, "cwd": cwd, "stdout": str(out), "stderr": str(err)}
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        pid = int(self._line(None) or "0")
        code = self._line(time.monotonic() + timeout)
        if code is not None:
            return int(code)
        os.kill(pid, signal.SIGKILL)
        self._line(None)
        return None

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


_server: _ForkServer | None = None
_lock = threading.Lock()


def run_cli(*args: str, cwd: str | Path | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``sky-scheduler ARGS`` in a child process: its exit code, stdout and stderr (UTF-8 text).

    Raises :class:`subprocess.TimeoutExpired` (the child killed) when it runs past ``timeout``."""
    global _server
    argv = ["sky-scheduler", *args]
    with _lock, tempfile.TemporaryDirectory(prefix="sky-cli-") as tmp:
        if _server is None or _server.proc.poll() is not None:
            _server = _ForkServer()
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        code = _server.run(list(args), str(cwd or os.getcwd()), out, err, timeout)
        stdout, stderr = out.read_text(encoding="utf-8"), err.read_text(encoding="utf-8")
        if code is None:
            raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr)
        return subprocess.CompletedProcess(argv, code, stdout, stderr)
