"""`sky-scheduler discover …` as a user runs it (subprocesses of the real entry point)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from extender import cli
from tests.cli_process import run_cli

PY = sys.executable


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    if env is None:  # this process's environment: a child of the CLI fork server (no import cost)
        return run_cli("discover", *args, timeout=120)
    return subprocess.run(
        [PY, "-m", "extender.cli", "discover", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_flags_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_NAME", "gpu-n42")
    args = cli.build_parser().parse_args(["discover", "roce"])
    assert (args.node_name, str(args.cni_dir), str(args.sysfs_root), args.period) == (
        "gpu-n42", "/etc/cni/net.d", "/sys", 10.0,
    )  # fmt: skip
    assert (args.lldpcli, args.rdma_cmd, args.once, args.dry_run) == (
        "lldpcli -f json0 show neighbors", "rdma -j link", False, False,
    )  # fmt: skip
    args = cli.build_parser().parse_args(["discover", "ib", "--input", "f.txt", "--once", "--dry-run"])
    assert (str(args.input), args.period, args.lease_name, args.ibnetdiscover_cmd) == (
        "f.txt", 600.0, "sky-scheduler-ib-collector", "ibnetdiscover",
    )  # fmt: skip


def test_heartbeat_flags_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    monkeypatch.setenv("POD_NAME", "sky-scheduler-roce-x7k2q")
    for kind in ("roce", "ib"):
        args = cli.build_parser().parse_args(["discover", kind])
        assert (args.heartbeat_seconds, args.agent_identity) == (300.0, "sky-scheduler-roce-x7k2q")
    args = cli.build_parser().parse_args(["discover", "ib", "--heartbeat-seconds", "0", "--agent-identity", "me"])
    assert (args.heartbeat_seconds, args.agent_identity) == (0.0, "me")
    monkeypatch.delenv("POD_NAME")
    assert cli.build_parser().parse_args(["discover", "roce"]).agent_identity == socket.gethostname()
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["discover", "roce", "--heartbeat-seconds", "-1"])


def test_roce_once_dry_run_without_any_tool_prints_a_result_and_says_what_is_missing(
    fixtures: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no lldpcli, no rdma
    done = _run("roce", "--once", "--dry-run", "--node-name", "n1", "--cni-dir", str(fixtures / "cni"), env=env)
    assert done.returncode == 0, done.stderr
    obj = json.loads(done.stdout)
    assert obj["kind"] == "NodeTopology" and obj["metadata"]["name"] == "n1"
    assert [n["name"] for n in obj["spec"]["net"]["roce"]] == ["bond0", "ens1f0", "ens1f1", "ens4f0"]
    assert obj["spec"]["zone"] == ""
    err = done.stderr
    assert err.count("lldpcli not found on PATH (is the lldpd sidecar running?) — will retry every 10s") == 1
    assert err.count("rdma not found on PATH") == 1
    assert "Traceback" not in err


def test_roce_once_dry_run_on_a_bare_machine(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}
    done = _run("roce", "--once", "--dry-run", "--cni-dir", str(tmp_path / "no-cni"), env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["spec"] == {"zone": "", "net": {"roce": [], "ib": []}, "tiers": []}
    assert "CNI configuration directory" in done.stderr and "does not exist" in done.stderr
    assert "lldpcli not found on PATH (is the lldpd sidecar running?)" in done.stderr
    assert "rdma not found on PATH" in done.stderr


def test_roce_once_dry_run_with_captured_inputs(fixtures: Path) -> None:
    done = _run(
        "roce", "--once", "--dry-run", "--node-name", "gpu-n01",
        "--cni-dir", str(fixtures / "cni"), "--sysfs-root", str(fixtures / "sysfs"),
        "--lldpcli", f"cat {fixtures / 'lldp' / 'node-four-nics.json0'}",
        "--rdma-cmd", f"cat {fixtures / 'rdma' / 'roce-node.json'}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    spec = json.loads(done.stdout)["spec"]
    assert spec["zone"] == "roce#leaf-a,leaf-b"
    assert [(n["name"], n["switchName"], n["master"]) for n in spec["net"]["roce"]] == [
        ("ens1f0", "leaf-a", ""),
        ("ens1f1", "leaf-b", ""),
        ("ens2f0", "leaf-a", "bond0"),
        ("ens2f1", "leaf-b", "bond0"),
        ("ens4f0", "", ""),
    ]


def test_ib_once_dry_run_from_a_saved_fabric(fixtures: Path) -> None:
    done = _run("ib", "--input", str(fixtures / "ib" / "fat-tree.txt"), "--once", "--dry-run")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["kind"] == "List"
    names = [i["metadata"]["name"] for i in doc["items"]]
    assert names == ["gpu-n01", "gpu-n02", "gpu-n03", "gpu-n04", "gpu-n05", "gpu-n99"]
    assert all(i["kind"] == "NodeTopology" and i["metadata"]["labels"]["zone"] for i in doc["items"])
    assert doc["unknownHosts"] == []  # no cluster to compare with
    assert doc["unparsableDescriptions"] == ["??? (0x1070fd0300178000)"]


def test_ib_dry_run_groups_an_unrenamed_edr_fabric_by_leaf(fixtures: Path, tmp_path: Path) -> None:
    done = _run("ib", "--input", str(fixtures / "ib" / "edr-2level.txt"), "--once", "--dry-run")
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)["items"]
    assert len(items) == 96
    by_zone: dict[str, list[str]] = {}
    for item in items:
        by_zone.setdefault(item["spec"]["zone"], []).append(item["metadata"]["name"])
    assert sorted(by_zone.values()) == [[f"node{n:03d}" for n in range(k * 24 + 1, k * 24 + 25)] for k in range(4)]
    spines = {item["spec"]["tiers"][1]["name"] for item in items}
    assert spines == {"SwitchIB Mellanox Technologies (0x7cfe900300b1e100)+1"}  # one spine group
    names = tmp_path / "names.json"
    names.write_text(json.dumps({f"0x7cfe900300b1e20{k}": f"edr-leaf-{k + 1}" for k in range(4)}))
    done = _run(
        "ib", "--input", str(fixtures / "ib" / "edr-2level.txt"), "--once", "--dry-run", "--switch-names", str(names)
    )
    assert done.returncode == 0, done.stderr
    zones = {i["metadata"]["name"]: i["spec"]["zone"] for i in json.loads(done.stdout)["items"]}
    assert (zones["node001"], zones["node025"], zones["node096"]) == ("ib#edr-leaf-1", "ib#edr-leaf-2", "ib#edr-leaf-4")
    names.write_text("not: [valid")
    done = _run(
        "ib", "--input", str(fixtures / "ib" / "edr-2level.txt"), "--once", "--dry-run", "--switch-names", str(names)
    )
    assert done.returncode == 1 and "names.json: not YAML or JSON" in done.stderr and "Traceback" not in done.stderr


def test_ib_bad_pattern_and_bad_input_fail_cleanly(fixtures: Path, tmp_path: Path) -> None:
    done = _run(
        "ib", "--input", str(fixtures / "ib" / "fat-tree.txt"), "--once", "--dry-run", "--hostname-pattern", "("
    )
    assert done.returncode == 2 and "invalid --hostname-pattern" in done.stderr and "Traceback" not in done.stderr
    done = _run("ib", "--input", str(tmp_path / "missing.txt"), "--once", "--dry-run")
    assert done.returncode == 1 and "cannot read ibnetdiscover output" in done.stderr


def test_writing_without_a_cluster_is_a_clear_error(fixtures: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(tmp_path)  # no ~/.kube/config either
    for kind in (["ib", "--input", str(fixtures / "ib" / "fat-tree.txt")], ["roce"]):
        done = _run(*kind, "--once", env=env)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        assert "cannot load a Kubernetes configuration" in done.stderr and "--dry-run" in done.stderr


def test_sigterm_stops_the_loop_cleanly_and_unchanged_rounds_print_nothing(fixtures: Path) -> None:
    argv = [
        PY, "-m", "extender.cli", "discover", "roce", "--dry-run", "--period", "0.1", "--log-level", "DEBUG",
        "--node-name", "gpu-n01", "--cni-dir", str(fixtures / "cni"), "--sysfs-root", str(fixtures / "sysfs"),
        "--lldpcli", f"cat {fixtures / 'lldp' / 'node-four-nics.json0'}",
        "--rdma-cmd", f"cat {fixtures / 'rdma' / 'roce-node.json'}",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        rounds = 0
        deadline = time.monotonic() + 120
        while rounds < 5:  # wait for several rounds (the first writes, the others must not)
            line = proc.stderr.readline()
            assert line, "agent exited early"
            rounds += "round done" in line
            assert time.monotonic() < deadline
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert out.count('"kind": "NodeTopology"') == 1
