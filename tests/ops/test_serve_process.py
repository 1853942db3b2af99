"""``sky-scheduler serve`` as the Deployment runs it: a separate process, SIGTERM to stop.

The container runtime stops a pod with SIGTERM and, after the grace period, SIGKILL. The
service must notice SIGTERM itself (no server library may swallow it), stop its servers, and
release the binder Lease so that the next replica takes over at once instead of after a
lease duration.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from extender.emulator import Emulator
from extender.simulate.certs import write_self_signed
from extender.simulate.cluster import crd_directory

REPO = Path(__file__).resolve().parents[2]
SERVING = re.compile(r"sky-scheduler serving: (.*); binder lease")


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator() as emu:
        emu.load_yaml(crd_directory())
        emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "sky-system"}})
        yield emu


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Lines:
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
                line = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                pytest.fail(f"serve exited ({self.proc.poll()}) before logging {pattern.pattern!r}:\n{self.text()}")
            self.seen.append(line)
            if m := pattern.search(line):
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


def _holder(emu: Emulator) -> Any:
    lease = emu.get("coordination.k8s.io/v1", "leases", "sky-binder", "sky-system")
    return (lease.get("spec") or {}).get("holderIdentity")


def test_sigterm_stops_every_server_and_releases_the_lease(emulator: Emulator, tmp_path: Path) -> None:
    kubeconfig = emulator.write_kubeconfig(tmp_path / "kubeconfig")
    tls = write_self_signed(tmp_path / "tls")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "extender.cli",
            "serve",
            "--kubeconfig",
            str(kubeconfig),
            "--extender-port",
            "0",
            "--ops-port",
            "0",
            "--webhook-address",
            "127.0.0.1",
            "--webhook-port",
            str(_free_port()),
            "--tls-cert-file",
            str(tls.cert_file),
            "--tls-key-file",
            str(tls.key_file),
            "--leader-elect",
            "--lease-name",
            "sky-binder",
            "--lease-namespace",
            "sky-system",
            "--identity",
            "replica-a",
            "--retry-period",
            "0.2",
            "--log-level",
            "info",
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = _Lines(proc)
    try:
        m = lines.wait_for(SERVING)
        urls = dict(part.split(" ", 1) for part in m.group(1).split(", "))
        assert set(urls) == {"extender", "ops", "webhook"}, urls
        assert httpx.get(f"{urls['ops']}/healthz", timeout=5).status_code == 200
        deadline = time.monotonic() + 30
        while _holder(emulator) != "replica-a":
            assert time.monotonic() < deadline, f"replica-a never acquired the lease:\n{lines.text()}"
            time.sleep(0.1)
        # the cache synced: the service settled its heap once (extender.heap)
        lines.wait_for(re.compile(r"heap settled in [0-9.]+ s"))

        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"serve ignored SIGTERM for 30 s:\n{lines.text()}")
        err = lines.rest()
        assert proc.returncode == 0, err
        assert "stopping" in err
        assert not _holder(emulator), "the lease was not released on a clean stop"
        for url in urls.values():
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"{url}/", timeout=2, verify=False)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
