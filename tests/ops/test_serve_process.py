"""``sky-scheduler serve`` as the Deployment runs it: a separate process, SIGTERM to stop.

The container runtime stops a pod with SIGTERM and, after the grace period, SIGKILL. The
service must notice SIGTERM itself (no server library may swallow it), stop its servers, and
release the binder Lease so that the next replica takes over at once instead of after a
lease duration.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def _wait_for_line(proc: subprocess.Popen[str], pattern: re.Pattern[str], seen: list[str]) -> re.Match[str]:
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            pytest.fail(f"serve exited ({proc.poll()}) before it was serving:\n{''.join(seen)}")
        seen.append(line)
        if m := pattern.search(line):
            return m
    pytest.fail(f"serve did not start within 60 s:\n{''.join(seen)}")


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
    seen: list[str] = []
    try:
        m = _wait_for_line(proc, SERVING, seen)
        urls = dict(part.split(" ", 1) for part in m.group(1).split(", "))
        assert set(urls) == {"extender", "ops", "webhook"}, urls
        assert httpx.get(f"{urls['ops']}/healthz", timeout=5).status_code == 200
        deadline = time.monotonic() + 30
        while _holder(emulator) != "replica-a":
            assert time.monotonic() < deadline, f"replica-a never acquired the lease:\n{''.join(seen)}"
            time.sleep(0.1)

        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"serve ignored SIGTERM for 30 s:\n{''.join(seen)}")
        seen.append(err)
        assert proc.returncode == 0, "".join(seen)
        assert "stopping" in err
        assert not _holder(emulator), "the lease was not released on a clean stop"
        for url in urls.values():
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"{url}/", timeout=2, verify=False)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
