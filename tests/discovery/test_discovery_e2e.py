"""End to end against the project's Kubernetes API emulator (real HTTP, NodeTopology CRD applied).

The agents read nodes / NodeTopology objects over HTTP, write through ``extender.kube.writer``,
and the zone keys the scheduler derives (``extender.model.topology.node_zone_key``) from what was
written group the nodes as they are wired.
"""

from __future__ import annotations

import asyncio
import copy
import json
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from discovery.common import kube
from discovery.roce.agent import RoceAgent, RoceConfig
from extender import wellknown
from extender.emulator import Emulator
from extender.kube import client as kube_client
from extender.model import topology
from tests.cli_process import run_cli
from tests.discovery.kube_helpers import (
    HEARTBEAT,
    groups,
    heartbeat_writes,
    node_obj,
    read_back,
    spec_writes,
    writes,
    zone_keys,
)


def _discover(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("discover", *args, timeout=120)  # a child of the CLI fork server (no import cost)


def test_ib_dry_run_against_a_cluster_lists_unknown_hosts_and_writes_nothing(
    emulator: tuple[Emulator, Path], fixtures: Path
) -> None:
    emu, kubeconfig = emulator
    for obj in [
        node_obj("gpu-n01"),
        node_obj("gpu-n02"),
        node_obj("node-3", "gpu-n03"),
        node_obj("gpu-n04"),
        node_obj("gpu-n05"),
    ]:
        emu.create(obj)
    done = _discover(
        "ib", "--input", str(fixtures / "ib" / "fat-tree.txt"), "--once", "--dry-run", "--kubeconfig", str(kubeconfig)
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert [i["metadata"]["name"] for i in doc["items"]] == ["gpu-n01", "gpu-n02", "gpu-n04", "gpu-n05", "node-3"]
    assert doc["unknownHosts"] == [{"host": "gpu-n99", "descriptions": ["gpu-n99 mlx5_0"]}]
    assert emu.list(wellknown.API_VERSION, wellknown.NODETOPOLOGIES) == []
    assert "zone" not in emu.get("v1", "nodes", "gpu-n01")["metadata"]["labels"]


def _parse_time(value: str) -> float:
    """RFC 3339 UTC with seconds, as the agents write it (and ``format_time`` prints)."""
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def _table(fixtures: Path, neighbours: dict[str, tuple[str, str]]) -> str:
    """A json0 neighbour table (captured shape) with the given interface → (switch, port)."""
    doc = json.loads((fixtures / "lldp" / "node-one-nic.json0").read_text())
    template = doc["lldp"][0]["interface"][0]
    entries = []
    for iface, (switch, port) in neighbours.items():
        e = copy.deepcopy(template)
        e["name"] = iface
        e["chassis"][0]["name"] = [{"value": switch}]
        e["port"][0]["id"] = [{"type": "ifname", "value": port}]
        e["port"][0]["descr"] = [{"value": port}]
        entries.append(e)
    doc["lldp"][0]["interface"] = entries
    return json.dumps(doc)


WIRING = {  # node → its NICs' (switch, port)
    "n1": {"ens1f0": ("leaf-a", "a-1"), "ens1f1": ("leaf-b", "b-1")},
    "n2": {"ens1f0": ("leaf-a", "a-2"), "ens1f1": ("leaf-b", "b-2")},
    "n3": {"ens1f0": ("leaf-c", "c-1"), "ens1f1": ("leaf-c", "c-2")},
}
N1_SPEC = {  # what n1's agent publishes for its two cables
    "zone": "roce#leaf-a,leaf-b",
    "net": {
        "roce": [
            {"name": "ens1f0", "switchName": "leaf-a", "switchPort": "a-1", "rdmaDevice": "mlx5_0", "master": ""},
            {"name": "ens1f1", "switchName": "leaf-b", "switchPort": "b-1", "rdmaDevice": "mlx5_1", "master": ""},
        ],
        "ib": [],
    },
    "tiers": [{"level": 1, "name": "leaf-a,leaf-b"}],
}


def _cni_dir(tmp_path: Path) -> Path:
    """A CNI config directory naming the two RDMA NICs (macvlan masters)."""
    cni = tmp_path / "cni"
    cni.mkdir()
    for i, nic in enumerate(["ens1f0", "ens1f1"]):
        (cni / f"{i}.conf").write_text(json.dumps({"cniVersion": "0.4.0", "type": "macvlan", "master": nic}))
    return cni


def _roce_config(node: str, cni: Path, fixtures: Path, table: Path, **extra: Any) -> RoceConfig:
    """The agent of ``node``, reading its neighbour table from ``table`` and the captured rdma output."""
    return RoceConfig(
        node_name=node,
        cni_dir=cni,
        sysfs_root=fixtures / "sysfs",
        lldpcli=("cat", str(table)),
        rdma_cmd=("cat", str(fixtures / "rdma" / "roce-node.json")),
        **extra,
    )


@pytest.mark.anyio
async def test_roce_agents_write_node_topologies_and_the_scheduler_zones_follow_the_cables(
    emulator: tuple[Emulator, Path], fixtures: Path, tmp_path: Path
) -> None:
    emu, kubeconfig = emulator
    cni = _cni_dir(tmp_path)
    tables = {n: tmp_path / f"{n}.json0" for n in WIRING}
    for n, nics in WIRING.items():
        emu.create(node_obj(n))
        tables[n].write_text(_table(fixtures, nics))

    async with kube.open_sink(str(kubeconfig)) as sink:
        agents = {
            # resync_rounds=0: compare with the API every round, which proves "no change, no write"
            n: RoceAgent(_roce_config(n, cni, fixtures, tables[n], resync_rounds=0), sink)
            for n in WIRING
        }
        for agent in agents.values():
            assert (await agent.run_once()).outcome is not None

        state = await read_back(kubeconfig, list(WIRING))
        obj, labels = state["n1"]
        assert obj is not None
        assert obj["spec"] == N1_SPEC
        # the zone label goes on the NodeTopology; no agent writes a Node (the binder leader copies
        # the label: tests/binder/test_loop_emulator.py)
        assert obj["metadata"]["labels"][wellknown.LABEL_ZONE] == topology.zone_label_value(["leaf-a", "leaf-b"])
        assert wellknown.LABEL_ZONE not in labels
        assert groups(zone_keys(state)) == [["n1", "n2"], ["n3"]]

        # a second round with nothing changed writes nothing
        before = writes(emu)
        for agent in agents.values():
            await agent.run_once()
        assert writes(emu) == before

        # n2's second cable moves from leaf-b to leaf-c: only n2 is rewritten, and it leaves n1's zone
        tables["n2"].write_text(_table(fixtures, {"ens1f0": ("leaf-a", "a-2"), "ens1f1": ("leaf-c", "c-9")}))
        for agent in agents.values():
            await agent.run_once()
        assert {name for _, _, name in writes(emu)[len(before) :]} == {"n2"}
        state = await read_back(kubeconfig, list(WIRING))
        obj2, labels2 = state["n2"]
        assert obj2 is not None and obj2["spec"]["zone"] == "roce#leaf-a,leaf-c"
        assert wellknown.LABEL_ZONE not in labels2
        assert obj2["metadata"]["labels"][wellknown.LABEL_ZONE] == topology.zone_label_value(["leaf-a", "leaf-c"])
        assert groups(zone_keys(state)) == [["n1"], ["n2"], ["n3"]]

        # n1 is re-cabled like n2: they share a zone again
        tables["n1"].write_text(_table(fixtures, {"ens1f0": ("leaf-a", "a-1"), "ens1f1": ("leaf-c", "c-8")}))
        await agents["n1"].run_once()
        assert groups(zone_keys(await read_back(kubeconfig, list(WIRING)))) == [["n1", "n2"], ["n3"]]

        # n3 loses every link: no zone any more, and no stale zone label on the node or its
        # NodeTopology (the scheduler would still take the label for its zone)
        tables["n3"].write_text(_table(fixtures, {}))
        await agents["n3"].run_once()
        state = await read_back(kubeconfig, list(WIRING))
        obj3, labels3 = state["n3"]
        assert obj3 is not None and obj3["spec"]["zone"] == ""
        assert wellknown.LABEL_ZONE not in labels3
        assert wellknown.LABEL_ZONE not in (obj3["metadata"].get("labels") or {})


@pytest.mark.anyio
async def test_roce_heartbeat_is_a_status_write_of_its_own_throttled_and_skipped_without_object(
    emulator: tuple[Emulator, Path], fixtures: Path, tmp_path: Path
) -> None:
    emu, kubeconfig = emulator
    emu.create(node_obj("gpu-n01"))
    table = tmp_path / "lldp.json0"
    table.write_text(_table(fixtures, {"ens1f0": ("leaf-a", "a-1"), "ens1f1": ("leaf-b", "b-1")}))
    skew = [0.0]  # fake time: the throttle's monotonic clock and the wall clock move together
    config = _roce_config("gpu-n01", _cni_dir(tmp_path), fixtures, table, agent="roce/agent-pod-1")
    ntopo = (wellknown.API_VERSION, wellknown.NODETOPOLOGIES, "gpu-n01")

    async with kube.open_sink(str(kubeconfig)) as sink:
        agent = RoceAgent(config, sink, clock=lambda: skew[0], wall_clock=lambda: time.time() + skew[0])

        async def round_writes() -> list[tuple[str, str, str]]:
            start = len(writes(emu))
            result = await agent.run_once()
            assert result.error is None
            return writes(emu)[start:]

        # the first round: the object (POST, with its zone label), then the heartbeat through the
        # status subresource — two calls, none to the Node
        assert await round_writes() == [
            ("create", "nodetopologies", ""),  # POST to the collection
            ("update", "nodetopologies/status", "gpu-n01"),
        ]
        ((obj, _),) = (await read_back(kubeconfig, ["gpu-n01"])).values()
        assert obj is not None and obj["spec"]["zone"] == "roce#leaf-a,leaf-b"
        assert obj["status"]["agent"] == "roce/agent-pod-1"
        first = obj["status"]["observedAt"]
        assert abs(_parse_time(first) - time.time()) < 60

        # the API server ignores status in a write of the main resource, and so does the emulator
        resp = await kube_client.request(
            sink.api,
            "PUT",
            kube_client.resource_path(wellknown.GROUP, wellknown.VERSION, wellknown.NODETOPOLOGIES, name="gpu-n01"),
            body={**obj, "status": {"observedAt": "2000-01-01T00:00:00Z", "agent": "someone-else"}},
        )
        assert resp.status == 200, resp.json()
        assert emu.get(*ntopo)["status"] == {"observedAt": first, "agent": "roce/agent-pod-1"}

        # nothing changed, within the interval: no write at all
        for _ in range(3):
            skew[0] += 10
            assert await round_writes() == []
        # 300 s after the last heartbeat: the heartbeat alone
        skew[0] += 270
        assert await round_writes() == [(*HEARTBEAT, "gpu-n01")]
        second = emu.get(*ntopo)["status"]["observedAt"]
        assert _parse_time(second) - _parse_time(first) >= 299

        # a moved cable: the spec and its zone label (PUT of the object), and the heartbeat at once
        table.write_text(_table(fixtures, {"ens1f0": ("leaf-a", "a-1"), "ens1f1": ("leaf-c", "c-1")}))
        skew[0] += 10
        assert await round_writes() == [
            ("update", "nodetopologies", "gpu-n01"),
            ("update", "nodetopologies/status", "gpu-n01"),
        ]
        assert emu.get(*ntopo)["spec"]["zone"] == "roce#leaf-a,leaf-c"

        # the object is deleted: the heartbeat finds nothing (404) and quietly writes nothing;
        # the next round publishes the object again, then its heartbeat
        emu.delete(*ntopo)
        skew[0] += 300
        start = len(emu.journal.records())
        result = await agent.run_once()
        assert not result.heartbeat and result.error is None and "heartbeat" not in agent.conditions.active
        assert [(r.verb, r.subresource, r.code) for r in emu.journal.records()[start:]] == [("get", "", 404)]
        skew[0] += 10
        assert [w[:2] for w in await round_writes()] == [
            ("create", "nodetopologies"),
            HEARTBEAT,
        ]  # the node keeps its label: no patch
        assert emu.get(*ntopo)["status"]["agent"] == "roce/agent-pod-1"


def test_ib_collector_writes_every_node_and_follows_a_moved_cable(
    emulator: tuple[Emulator, Path], fixtures: Path
) -> None:
    emu, kubeconfig = emulator
    nodes = ["gpu-n01", "gpu-n02", "node-3", "gpu-n04", "gpu-n05", "cpu-01"]
    for name in nodes:
        emu.create(node_obj(name, "gpu-n03" if name == "node-3" else None))
    fabric = str(fixtures / "ib" / "fat-tree.txt")
    done = _discover(
        "ib", "--input", fabric, "--once", "--kubeconfig", str(kubeconfig), "--agent-identity", "collector-e2e"
    )
    assert done.returncode == 0, done.stderr
    assert "'gpu-n99'" in done.stderr and "not a Kubernetes node" in done.stderr
    mapped = ["gpu-n01", "gpu-n02", "gpu-n04", "gpu-n05", "node-3"]
    assert sorted(heartbeat_writes(emu)) == mapped  # one status write each, after its object
    for name in mapped:
        status = emu.get(wellknown.API_VERSION, wellknown.NODETOPOLOGIES, name)["status"]
        assert status["agent"] == "ib/collector-e2e"
        assert abs(_parse_time(status["observedAt"]) - time.time()) < 120

    state = asyncio.run(read_back(kubeconfig, nodes))
    assert state["cpu-01"][0] is None and wellknown.LABEL_ZONE not in state["cpu-01"][1]
    obj, labels = state["gpu-n01"]
    assert obj is not None
    assert obj["spec"]["zone"] == "ib#MF0;leaf-01:MQM8700/U1,MF0;leaf-02:MQM8700/U1"
    assert [(p["name"], p["port"], p["switchName"]) for p in obj["spec"]["net"]["ib"]] == [
        ("mlx5_0", 1, "MF0;leaf-01:MQM8700/U1"),
        ("mlx5_1", 1, "MF0;leaf-02:MQM8700/U1"),
    ]
    assert obj["metadata"]["labels"][wellknown.LABEL_ZONE] == topology.zone_label_value(
        ["MF0;leaf-01:MQM8700/U1", "MF0;leaf-02:MQM8700/U1"]
    )
    assert wellknown.LABEL_ZONE not in labels  # the collector never writes a Node
    assert not [r for r in emu.journal.records() if r.resource == "nodes" and r.verb in ("patch", "update")]
    ib_nodes = [n for n in nodes if n != "cpu-01"]
    assert groups({n: k for n, k in zone_keys(state).items() if n in ib_nodes}) == [
        ["gpu-n01"], ["gpu-n02", "node-3"], ["gpu-n04"], ["gpu-n05"],
    ]  # fmt: skip

    before, all_before = spec_writes(emu), len(writes(emu))
    again = _discover("ib", "--input", fabric, "--once", "--kubeconfig", str(kubeconfig))
    assert again.returncode == 0, again.stderr
    assert spec_writes(emu) == before  # nothing changed: no object nor label written
    # a new process has written no heartbeat yet: the only writes are heartbeats (or none, when
    # still within the same second: an equal status is not written again)
    assert {w[:2] for w in writes(emu)[all_before:]} <= {HEARTBEAT}

    moved = _discover(
        "ib", "--input", str(fixtures / "ib" / "fat-tree-moved.txt"), "--once", "--kubeconfig", str(kubeconfig)
    )
    assert moved.returncode == 0, moved.stderr
    assert {name for _, _, name in spec_writes(emu)[len(before) :]} == {"gpu-n02"}
    state = asyncio.run(read_back(kubeconfig, ib_nodes))
    assert groups(zone_keys(state)) == [["gpu-n01"], ["gpu-n02", "gpu-n04"], ["gpu-n05"], ["node-3"]]


def test_ib_collector_loop_takes_the_lease_writes_and_stops_on_sigterm(
    emulator: tuple[Emulator, Path], fixtures: Path
) -> None:
    emu, kubeconfig = emulator
    emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "sky-system"}})
    emu.create(node_obj("gpu-n01"))
    argv = [
        sys.executable, "-m", "extender.cli", "discover", "ib", "--input", str(fixtures / "ib" / "fat-tree.txt"),
        "--kubeconfig", str(kubeconfig), "--period", "0.5", "--lease-namespace", "sky-system",
        "--identity", "collector-a",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while emu.try_get(wellknown.API_VERSION, wellknown.NODETOPOLOGIES, "gpu-n01") is None:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the collector wrote nothing"
            time.sleep(0.1)
        lease = emu.get("coordination.k8s.io/v1", "leases", wellknown.DEFAULT_IB_LEASE, "sky-system")
        assert lease["spec"]["holderIdentity"] == "collector-a"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    lease = emu.get("coordination.k8s.io/v1", "leases", wellknown.DEFAULT_IB_LEASE, "sky-system")
    assert not lease["spec"].get("holderIdentity")  # released on a clean stop


def test_roce_once_writes_through_the_cli(emulator: tuple[Emulator, Path], fixtures: Path) -> None:
    emu, kubeconfig = emulator
    emu.create(node_obj("gpu-n01"))
    argv = [
        "roce", "--once", "--kubeconfig", str(kubeconfig), "--node-name", "gpu-n01",
        "--cni-dir", str(fixtures / "cni"), "--sysfs-root", str(fixtures / "sysfs"),
        "--lldpcli", f"cat {fixtures / 'lldp' / 'node-four-nics.json0'}",
        "--rdma-cmd", f"cat {fixtures / 'rdma' / 'roce-node.json'}",
    ]  # fmt: skip
    done = _discover(*argv)
    assert done.returncode == 0, done.stderr
    obj = emu.get(wellknown.API_VERSION, wellknown.NODETOPOLOGIES, "gpu-n01")
    assert obj["spec"]["zone"] == "roce#leaf-a,leaf-b" and len(obj["spec"]["net"]["roce"]) == 5
    # the zone label goes on the agent's own NodeTopology; the Node is not touched (the binder
    # leader copies the label: tests/binder/test_loop_emulator.py)
    assert obj["metadata"]["labels"][wellknown.LABEL_ZONE] == topology.zone_label_value(["leaf-a", "leaf-b"])
    assert wellknown.LABEL_ZONE not in (emu.get("v1", "nodes", "gpu-n01")["metadata"].get("labels") or {})
    assert not [r for r in emu.journal.records() if r.resource == "nodes" and r.verb != "create"]  # no read either
    # once more, unchanged: exits 0 and writes no object nor label (only, maybe, its heartbeat)
    before, all_before = spec_writes(emu), len(writes(emu))
    assert _discover(*argv).returncode == 0
    assert spec_writes(emu) == before
    assert {w[:2] for w in writes(emu)[all_before:]} <= {HEARTBEAT}
    assert emu.get(wellknown.API_VERSION, wellknown.NODETOPOLOGIES, "gpu-n01")["status"]["agent"].startswith("roce/")
