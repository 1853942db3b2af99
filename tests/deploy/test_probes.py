"""Liveness and readiness of the discovery workloads: each agent touches its --alive-file after
every round, and the rendered exec probes — run here with the real sh, find and test — pass on a
fresh file and fail on a stale or missing one."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.chart import container, one, render_variant

_PROBE_DIR = "/run/sky-alive"


def _workloads() -> list[tuple[dict[str, Any], str]]:
    objs = render_variant("default")
    return [
        (one(objs, "DaemonSet", "sky-scheduler-roce"), "agent"),
        (one(objs, "Deployment", "sky-scheduler-ib"), "collector"),
    ]


def _run(command: list[str], alive: Path) -> int:
    argv = [a.replace(_PROBE_DIR, str(alive.parent)) for a in command]
    return subprocess.run(argv, check=False, timeout=30, capture_output=True).returncode


@pytest.mark.parametrize("index", [0, 1])
def test_agent_probes_follow_the_alive_file(index: int, tmp_path: Path) -> None:
    owner, name = _workloads()[index]
    c = container(owner, name)
    assert f"--alive-file={_PROBE_DIR}/alive" in c["args"]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts["alive"] == _PROBE_DIR
    live, ready = c["livenessProbe"]["exec"]["command"], c["readinessProbe"]["exec"]["command"]
    alive = tmp_path / "alive"
    assert _run(live, alive) != 0 and _run(ready, alive) != 0  # before the first round
    alive.touch()
    assert _run(live, alive) == 0 and _run(ready, alive) == 0
    hour_ago = time.time() - 3600 * 2
    os.utime(alive, (hour_ago, hour_ago))
    assert _run(live, alive) != 0, "a loop that stopped turning must fail liveness"
    assert _run(ready, alive) == 0


def test_the_lldpd_sidecar_is_probed_through_its_socket() -> None:
    owner, _ = _workloads()[0]
    lldpd = container(owner, "lldpd")
    assert lldpd["livenessProbe"]["exec"]["command"] == [
        "lldpcli",
        "-u",
        "/run/lldpd/lldpd.socket",
        "show",
        "configuration",
    ]


def test_the_roce_agent_touches_the_alive_file_every_round(tmp_path: Path) -> None:
    """The real ``discover roce`` loop (dry run, the test fixtures for its commands), stopped by
    SIGTERM once its alive file has been touched twice."""
    import signal
    import sys

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "discovery"
    alive = tmp_path / "alive"
    argv = [
        sys.executable, "-m", "extender.cli", "discover", "roce", "--dry-run", "--period", "0.2",
        "--node-name", "gpu-n01", "--cni-dir", str(fixtures / "cni"), "--sysfs-root", str(fixtures / "sysfs"),
        "--lldpcli", f"cat {fixtures / 'lldp' / 'node-four-nics.json0'}",
        "--rdma-cmd", f"cat {fixtures / 'rdma' / 'roce-node.json'}", "--alive-file", str(alive),
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not alive.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the agent never touched its alive file"
            time.sleep(0.05)
        first = alive.stat().st_mtime_ns
        while alive.stat().st_mtime_ns == first:
            assert time.monotonic() < deadline, "the alive file was touched once only"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
