"""docs/quickstart.md is run, not read (issue 21 item 3): every ``$ `` command of its ```console
blocks runs in page order — the first one, ``sky-scheduler sandbox …``, exactly as written — with
the real kubectl from ``$SKY_TOOLS_BIN``, in a directory laid out like a clone (``examples/``), and
its output must be the one the page shows (rules: :mod:`tests.docs.console`).

The sandbox works like a cluster, asynchronously (the binder every second), so a command that
only reads (``kubectl get|describe|wait``, ``curl``, ``cat``) is re-run for a while until it shows
what the page shows, as a reader re-running it would; a command that changes something runs once.
A watch (``-w``) and the sandbox keep running: their output is read until it shows what the page
shows; the watch is then stopped with Ctrl-C (SIGINT), the sandbox at the end.
"""

from __future__ import annotations

import os
import queue
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs.console import Command, Mismatch, commands, match
from tests.kubectl import KUBECTL, needs_kubectl

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "quickstart.md"
SANDBOX = ["sky-scheduler", "sandbox"]
SETTLE_SECONDS = 20.0  # how long a reading command is re-run, or a stream read, before it fails
TRANSCRIPT = os.environ.get("SKY_QUICKSTART_TRANSCRIPT")  # a file: every command's actual output, to update the page


@dataclass(slots=True)
class Shell:
    """Where the page's commands run: a directory like a clone, the package under test first on
    ``PATH`` as ``sky-scheduler``, then the real kubectl."""

    cwd: Path
    env: dict[str, str]

    def popen(self, line: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["bash", "-c", f"exec {line}"],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def run(self, line: str) -> tuple[int, str]:
        done = subprocess.run(
            ["bash", "-c", line],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=90,
            check=False,
        )
        return done.returncode, done.stdout

    def export(self, line: str) -> None:
        """Run an ``export`` line and keep the environment it leaves."""
        done = subprocess.run(
            ["bash", "-c", f"{line} && env -0"], cwd=self.cwd, env=self.env, capture_output=True, check=True
        )
        pairs = (item.split(b"=", 1) for item in done.stdout.split(b"\0") if b"=" in item)
        self.env = {k.decode(): v.decode() for k, v in pairs}


class Stream:
    """The output of a process that keeps running, read line by line without blocking the test."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line)
        self._queue.put(None)

    def until(self, cmd: Command) -> Mismatch:
        """Read until the output is what ``cmd`` shows (more may follow), or fail after a while."""
        deadline = time.monotonic() + SETTLE_SECONDS
        result = match(cmd.expected, "".join(self.lines), open_end=True)
        while result and time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                return Mismatch(f"exited ({self.proc.wait()}) before showing what the page shows", self.lines)
            self.lines.append(line)
            result = match(cmd.expected, "".join(self.lines), open_end=True)
        return result

    def interrupt(self) -> int:
        """Ctrl-C, as the reader stops it; its exit code."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            return self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait()


def _reads_only(cmd: Command) -> bool:
    words = cmd.words
    if words[0] in ("cat", "curl"):
        return True
    return words[0] == "kubectl" and len(words) > 1 and words[1] in ("get", "describe", "wait")


def _watches(cmd: Command) -> bool:
    return cmd.words[0] == "kubectl" and ("-w" in cmd.words or "--watch" in cmd.words)


@pytest.fixture
def shell(tmp_path: Path) -> Shell:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "sky-scheduler"  # the console script, for this checkout's code
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m extender.cli "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(
        PATH=os.pathsep.join([str(bin_dir), str(KUBECTL.parent), env.get("PATH", "")]),
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        PYTHONUNBUFFERED="1",
        HOME=str(tmp_path),  # kubectl's discovery cache and config stay in the test's directory
    )
    return Shell(tmp_path, env)


@pytest.fixture
def page() -> list[Command]:
    return commands(PAGE)


def test_the_page_starts_the_sandbox_first_and_has_a_console_transcript(page: list[Command]) -> None:
    assert page, "docs/quickstart.md has no ```console block"
    assert page[0].words[:2] == SANDBOX, f"the first command starts the sandbox, not {page[0].line!r}"
    assert not any(c.words[:2] == SANDBOX for c in page[1:]), "one sandbox: the first command"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_link = readme.find("](docs/")
    assert readme.find("](docs/quickstart.md)") == first_link != -1, "the README links the quickstart first"


def _port_taken(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


@needs_kubectl
@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not found (the page's /diagnose commands use it)")
@pytest.mark.skipif(_port_taken(8080), reason="port 8080 is in use: the page's sandbox serves /diagnose there")
def test_every_command_of_the_quickstart_runs_and_shows_what_the_page_shows(shell: Shell, page: list[Command]) -> None:
    timings: list[tuple[float, Command]] = []
    sandbox = Stream(shell.popen(page[0].line))
    try:
        started = time.monotonic()
        problem = sandbox.until(page[0])
        _record(page[0], "".join(sandbox.lines))
        assert not problem, f"{PAGE.name}:{page[0].lineno}: $ {page[0].line}\n{problem}"
        timings.append((time.monotonic() - started, page[0]))
        for cmd in page[1:]:
            timings.append((_run(shell, cmd), cmd))
        assert sandbox.proc.poll() is None, "the sandbox stopped during the quickstart:\n" + "".join(sandbox.lines)
    finally:
        code = sandbox.interrupt()
        for seconds, cmd in timings:
            print(f"{seconds:6.2f} s  {PAGE.name}:{cmd.lineno}  $ {cmd.line}")
    assert code == 0, "Ctrl-C stops the sandbox cleanly:\n" + "".join(sandbox.lines[-20:])


def _record(cmd: Command, output: str) -> None:
    if TRANSCRIPT:
        with open(TRANSCRIPT, "a", encoding="utf-8") as f:
            f.write(f"$ {cmd.line}\n{output}")


def _run(shell: Shell, cmd: Command) -> float:
    """Run one command of the page as the rules say; the seconds until it showed its output."""
    where = f"{PAGE.name}:{cmd.lineno}: $ {cmd.line}"
    started = time.monotonic()
    if cmd.words[0] == "export":
        shell.export(cmd.line)
        assert not cmd.expected, f"{where}: an export prints nothing"
        return time.monotonic() - started
    if _watches(cmd):
        stream = Stream(shell.popen(cmd.line))
        problem = stream.until(cmd)
        seconds = time.monotonic() - started
        stream.interrupt()
        _record(cmd, "".join(stream.lines))
        assert not problem, f"{where}\n{problem}"
        return seconds
    deadline = started + SETTLE_SECONDS
    while True:
        code, out = shell.run(cmd.line)
        problem = match(cmd.expected, out) if code == 0 else Mismatch(f"exit code {code}", out.splitlines())
        if not problem or not _reads_only(cmd) or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    _record(cmd, out)
    assert not problem, f"{where}\n{problem}"
    return time.monotonic() - started
