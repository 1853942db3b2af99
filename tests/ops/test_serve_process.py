"""``sky-scheduler serve`` as the Deployment runs it: a separate process, SIGTERM to stop.

The container runtime stops a pod with SIGTERM and, after the grace period, SIGKILL. The
service must notice SIGTERM itself (no server library may swallow it), stop its servers, and
release the binder Lease so that the next replica takes over at once instead of after a
lease duration.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from extender.emulator import Emulator
from extender.simulate.certs import write_self_signed
from extender.simulate.cluster import crd_directory
from tests.ops.serve_child import SERVING, free_port, start_cli


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator() as emu:
        emu.load_yaml(crd_directory())
        emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "sky-system"}})
        yield emu


def _holder(emu: Emulator) -> Any:
    lease = emu.get("coordination.k8s.io/v1", "leases", "sky-binder", "sky-system")
    return (lease.get("spec") or {}).get("holderIdentity")


def test_sigterm_stops_every_server_and_releases_the_lease(emulator: Emulator, tmp_path: Path) -> None:
    kubeconfig = emulator.write_kubeconfig(tmp_path / "kubeconfig")
    tls = write_self_signed(tmp_path / "tls")
    proc, lines = start_cli(
        [
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
            str(free_port()),
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
        ]
    )
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
