"""The RoCE agent against real lldpd daemons in network namespaces.

Each leaf switch is a namespace whose lldpd announces the switch's system name; a node namespace
has several NICs cabled (veth) to different switches. Bond membership and ``rdma -j link`` come
from the fake sysfs and captured output (this kernel has neither bonding nor RDMA netlink); the
LLDP side is real. LLDP convergence is awaited by polling with a generous deadline.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from discovery.common import kube
from discovery.common.model import NodeTopologySpec
from discovery.common.sink import MemorySink
from discovery.roce import parse
from discovery.roce.agent import RoceAgent, RoceConfig
from extender import wellknown
from extender.cache import convert
from extender.emulator import Emulator
from extender.model import topology
from tests.discovery.kube_helpers import as_the_binder_leaves_it, groups, node_obj, read_back, zone_keys
from tests.discovery.lldp_lab import LldpLab

pytestmark = pytest.mark.netns

DEADLINE = 90.0  # seconds to wait for LLDP to converge (tx-interval 1 s: normally 2–5 s)

ROCE = {
    "ens1f0": {"name": "ens1f0", "switchName": "leaf-a", "switchPort": "a-p1", "rdmaDevice": "mlx5_0", "master": ""},
    "ens1f1": {"name": "ens1f1", "switchName": "leaf-b", "switchPort": "b-p1", "rdmaDevice": "mlx5_1", "master": ""},
    "ens2f0": {
        "name": "ens2f0", "switchName": "leaf-a", "switchPort": "a-p2", "rdmaDevice": "mlx5_bond_0", "master": "bond0",
    },
    "ens2f1": {
        "name": "ens2f1", "switchName": "leaf-b", "switchPort": "b-p2", "rdmaDevice": "mlx5_bond_0", "master": "bond0",
    },
    "ens4f0": {"name": "ens4f0", "switchName": "", "switchPort": "", "rdmaDevice": "mlx5_4", "master": ""},
}  # fmt: skip


def _build_node_lab(lab: LldpLab) -> None:
    lab.add_switch("la", "leaf-a")
    lab.add_switch("lb", "leaf-b")
    lab.add_switch("lc", "leaf-c")
    lab.add_switch("dead", "silent", lldpd=False)  # a cable whose far end speaks no LLDP
    lab.add_node("n1")
    lab.cable("n1", "ens1f0", "la", "a-p1")  # macvlan master (conflist)
    lab.cable("n1", "ens1f1", "lb", "b-p1")  # ipvlan master (single-plugin .conf)
    lab.cable("n1", "ens2f0", "la", "a-p2")  # bond0 slave (bond0 is a NAD master)
    lab.cable("n1", "ens2f1", "lb", "b-p2")  # bond0 slave
    lab.cable("n1", "ens3f0", "lc", "c-p1")  # cabled, but not a CNI master: not reported
    lab.cable("n1", "ens4f0", "dead", "x-p1")  # NAD master without neighbour
    lab.start()


async def _until(
    agent: RoceAgent, sink: MemorySink, node: str, want: Callable[[NodeTopologySpec], bool]
) -> NodeTopologySpec:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while True:
        await agent.run_once()
        spec = sink.specs.get(node)
        if spec is not None and want(spec):
            return spec
        if loop.time() > deadline:
            pytest.fail(f"LLDP did not converge within {DEADLINE}s; last spec: {spec}")
        await asyncio.sleep(0.3)


@pytest.mark.anyio
async def test_agent_reports_each_nic_switch_exactly_and_follows_a_moved_cable(lab: LldpLab, fixtures: Path) -> None:
    _build_node_lab(lab)
    sink = MemorySink()
    agent = RoceAgent(
        RoceConfig(
            node_name="n1",
            cni_dir=fixtures / "cni",
            sysfs_root=fixtures / "sysfs",
            lldpcli=tuple(lab.lldpcli("n1")),
            rdma_cmd=("cat", str(fixtures / "rdma" / "roce-node.json")),
        ),
        sink,
    )
    expected = [ROCE[n] for n in sorted(ROCE)]
    spec = await _until(agent, sink, "n1", lambda s: s["net"]["roce"] == expected)
    assert spec == {
        "zone": "roce#leaf-a,leaf-b",
        "net": {"roce": expected, "ib": []},
        "tiers": [{"level": 1, "name": "leaf-a,leaf-b"}],
    }
    assert sink.labels["n1"] == topology.zone_label_value(["leaf-a", "leaf-b"])
    writes_before = len(sink.writes)

    # quiet rounds with a stable table write nothing
    for _ in range(3):
        await agent.run_once()
    assert len(sink.writes) == writes_before

    # re-cable ens1f1 from leaf-b to leaf-c (its switch-side end moves to leaf-c's namespace)
    lab.move_port("b-p1", "lb", "lc")
    moved = dict(ROCE, ens1f1={**ROCE["ens1f1"], "switchName": "leaf-c"})
    expected_moved = [moved[n] for n in sorted(moved)]
    spec = await _until(agent, sink, "n1", lambda s: s["net"]["roce"] == expected_moved)
    assert spec == {
        "zone": "roce#leaf-a,leaf-b,leaf-c",
        "net": {"roce": expected_moved, "ib": []},
        "tiers": [{"level": 1, "name": "leaf-a,leaf-b,leaf-c"}],
    }
    assert sink.labels["n1"] == topology.zone_label_value(["leaf-c", "leaf-b", "leaf-a"])
    assert len(sink.writes) > writes_before


@pytest.mark.anyio
async def test_live_json0_has_the_captured_shape_and_plain_json_is_refused(lab: LldpLab, fixtures: Path) -> None:
    lab.add_switch("la", "leaf-a")
    lab.add_node("n2")
    lab.cable("n2", "ens1f0", "la", "a-p3")
    lab.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while not parse.parse_lldp_json0(lab.neighbors_text("n2")):
        assert loop.time() < deadline, "LLDP did not converge"
        await asyncio.sleep(0.3)
    live = lab.neighbors_text("n2")
    captured = (fixtures / "lldp" / "node-one-nic.json0").read_text()
    got = [(n.interface, n.switch_name, n.port) for n in parse.parse_lldp_json0(live)]
    assert got == [(n.interface, n.switch_name, n.port) for n in parse.parse_lldp_json0(captured)]

    def shape(text: str) -> dict[str, object]:
        """The parts the parser reads, and whether every value there is a list (the json0 promise)."""
        entry = json.loads(text)["lldp"][0]["interface"][0]
        chassis, port = entry["chassis"][0], entry["port"][0]
        return {
            "chassis": sorted({"id", "name", "capability"} & set(chassis)),
            "port": sorted({"id", "descr"} & set(port)),
            "lists": all(isinstance(v, list) for d in (chassis, port) for k, v in d.items() if k != "ttl")
            and all(isinstance(entry[k], list) for k in ("chassis", "port")),
        }

    assert (
        shape(live)
        == shape(captured)
        == {
            "chassis": ["capability", "id", "name"],
            "port": ["descr", "id"],
            "lists": True,
        }
    )
    with pytest.raises(parse.ParseError, match="json0"):
        parse.parse_lldp_json0(lab.neighbors_text("n2", "json"))


@pytest.mark.anyio
async def test_nodes_cabled_to_the_same_switches_share_a_zone(lab: LldpLab, tmp_path: Path) -> None:
    lab.add_switch("la", "leaf-a")
    lab.add_switch("lb", "leaf-b")
    wiring = {"n1": ["la"], "n2": ["la"], "n3": ["lb"], "n4": ["la", "lb"], "n5": ["lb", "la"]}
    for node, switches in wiring.items():
        lab.add_node(node)
        for i, sw in enumerate(switches, start=1):
            lab.cable(node, f"eth{i}", sw, f"{sw}-{node}-{i}"[:15])
    lab.start()
    sink = MemorySink()
    agents = {}
    for node, switches in wiring.items():
        cni = tmp_path / node
        cni.mkdir()
        for i in range(1, len(switches) + 1):
            (cni / f"{i}.conf").write_text(json.dumps({"cniVersion": "0.4.0", "type": "macvlan", "master": f"eth{i}"}))
        agents[node] = RoceAgent(
            RoceConfig(
                node_name=node,
                cni_dir=cni,
                sysfs_root=tmp_path / "no-sysfs",
                lldpcli=tuple(lab.lldpcli(node)),
                rdma_cmd=(sys.executable, "-c", "print('[]')"),
            ),
            sink,
        )

    names = {"la": "leaf-a", "lb": "leaf-b"}

    def cabled_to(expected: list[str]) -> Callable[[NodeTopologySpec], bool]:
        return lambda s: sorted(x["switchName"] for x in s["net"]["roce"]) == sorted(expected)

    for node, agent in agents.items():
        await _until(agent, sink, node, cabled_to([names[sw] for sw in wiring[node]]))

    def zone(node: str, use_label: bool) -> str | None:
        roce = [x["switchName"] for x in sink.specs[node]["net"]["roce"]]
        labels = {"zone": sink.labels[node]} if use_label else {}
        return topology.node_zone_key({}, labels, roce_switches=roce)

    for use_label in (True, False):
        groups: dict[str | None, set[str]] = {}
        for node in wiring:
            groups.setdefault(zone(node, use_label), set()).add(node)
        assert sorted(map(sorted, groups.values())) == [["n1", "n2"], ["n3"], ["n4", "n5"]]
    assert zone("n4", False) == "roce#leaf-a,leaf-b"


def test_cli_once_dry_run_prints_the_node_topology(lab: LldpLab, fixtures: Path) -> None:
    _build_node_lab(lab)
    deadline = time.monotonic() + DEADLINE
    while len(parse.parse_lldp_json0(lab.neighbors_text("n1"))) < 5:
        assert time.monotonic() < deadline, "LLDP did not converge"
        time.sleep(0.3)
    argv = [
        sys.executable, "-m", "extender.cli", "discover", "roce", "--once", "--dry-run",
        "--node-name", "n1", "--cni-dir", str(fixtures / "cni"), "--sysfs-root", str(fixtures / "sysfs"),
        "--lldpd-socket", str(lab.spaces["n1"].socket), "--rdma-cmd", f"cat {fixtures / 'rdma' / 'roce-node.json'}",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    obj = json.loads(done.stdout)
    assert obj["metadata"] == {"name": "n1", "labels": {"zone": topology.zone_label_value(["leaf-a", "leaf-b"])}}
    assert obj["spec"] == {
        "zone": "roce#leaf-a,leaf-b",
        "net": {"roce": [ROCE[n] for n in sorted(ROCE)], "ib": []},
        "tiers": [{"level": 1, "name": "leaf-a,leaf-b"}],
    }
    assert "NIC ens4f0 has no LLDP neighbour yet" in done.stderr


@pytest.mark.anyio
async def test_real_lldp_to_the_api_zones_follow_a_moved_cable(
    lab: LldpLab, emulator: tuple[Emulator, Path], tmp_path: Path
) -> None:
    """Real lldpd → RoCE agents → NodeTopology objects and labels in the API emulator → the
    scheduler's zone keys; then a cable moves and the zones follow."""
    emu, kubeconfig = emulator
    lab.add_switch("la", "leaf-a")
    lab.add_switch("lb", "leaf-b")
    wiring = {"n1": "la", "n2": "la", "n3": "lb"}
    for node, sw in wiring.items():
        lab.add_node(node)
        lab.cable(node, "eth1", sw, f"{sw}-{node}")
        emu.create(node_obj(node))
    lab.start()
    cni = tmp_path / "cni"
    cni.mkdir()
    (cni / "roce.conf").write_text('{"cniVersion": "0.4.0", "type": "macvlan", "master": "eth1"}')
    names = {"la": "leaf-a", "lb": "leaf-b"}
    async with kube.open_sink(str(kubeconfig)) as sink:
        agents = {
            node: RoceAgent(
                RoceConfig(
                    node_name=node,
                    cni_dir=cni,
                    sysfs_root=tmp_path / "no-sysfs",
                    lldpcli=tuple(lab.lldpcli(node)),
                    rdma_cmd=(sys.executable, "-c", "print('[]')"),
                    resync_rounds=0,
                ),
                sink,
            )
            for node in wiring
        }

        async def converge(expected: dict[str, str]) -> None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE
            while True:
                results = {n: await a.run_once() for n, a in agents.items()}
                got = {n: [x.switch_name for x in r.discovery.nics] for n, r in results.items()}
                if got == {n: [s] for n, s in expected.items()}:
                    return
                assert loop.time() < deadline, f"LLDP did not converge: {got}"
                await asyncio.sleep(0.3)

        await converge({n: names[s] for n, s in wiring.items()})
        state = await read_back(kubeconfig, list(wiring))
        assert groups(zone_keys(state)) == [["n1", "n2"], ["n3"]]
        obj, labels = state["n3"]
        assert obj is not None and obj["spec"]["net"]["roce"] == [
            {"name": "eth1", "switchName": "leaf-b", "switchPort": "lb-n3", "rdmaDevice": "", "master": ""}
        ]
        assert obj["metadata"]["labels"][wellknown.LABEL_ZONE] == topology.zone_label_value(["leaf-b"])
        assert wellknown.LABEL_ZONE not in labels  # no agent writes a Node

        lab.move_port("la-n2", "la", "lb")  # n2's cable now ends on leaf-b
        await converge({"n1": "leaf-a", "n2": "leaf-b", "n3": "leaf-b"})
        state = await read_back(kubeconfig, list(wiring))
        assert groups(zone_keys(state)) == [["n1"], ["n2", "n3"]]
        assert state["n2"][0] is not None and state["n2"][0]["spec"]["zone"] == "roce#leaf-b"


@pytest.mark.anyio
async def test_real_lldp_with_a_fabric_map_gives_the_scheduler_spine_and_core_tiers(
    lab: LldpLab, emulator: tuple[Emulator, Path], tmp_path: Path
) -> None:
    """Real lldpd on four leaves → RoCE agents with a fabric map (two spines, one core) →
    NodeTopology spec.tiers in the API emulator → the scheduler's NodeInfo.tiers; then a cable
    moves to a leaf under the other spine and the spine tier follows."""
    emu, kubeconfig = emulator
    for sw in ("l1", "l2", "l3", "l4"):
        lab.add_switch(sw, f"leaf-{sw[1]}")
    wiring = {"n1": "l1", "n2": "l2", "n3": "l3"}
    for node, sw in wiring.items():
        lab.add_node(node)
        lab.cable(node, "eth1", sw, f"{sw}-{node}")
        emu.create(node_obj(node))
    lab.start()
    cni = tmp_path / "cni"
    cni.mkdir()
    (cni / "roce.conf").write_text('{"cniVersion": "0.4.0", "type": "macvlan", "master": "eth1"}')
    fmap = tmp_path / "fabric-map.yaml"  # what a ConfigMap mount holds
    fmap.write_text("leaf-1: [spine-a, core]\nleaf-2: [spine-a, core]\nleaf-3: [spine-b, core]\nleaf-4: [spine-b]\n")
    async with kube.open_sink(str(kubeconfig)) as sink:
        agents = {
            node: RoceAgent(
                RoceConfig(
                    node_name=node,
                    cni_dir=cni,
                    sysfs_root=tmp_path / "no-sysfs",
                    lldpcli=tuple(lab.lldpcli(node)),
                    rdma_cmd=(sys.executable, "-c", "print('[]')"),
                    resync_rounds=0,
                    fabric_map=fmap,
                ),
                sink,
            )
            for node in wiring
        }

        async def scheduler_tiers(expected_leaves: dict[str, str]) -> dict[str, tuple[str, ...]]:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE
            while True:
                results = {n: await a.run_once() for n, a in agents.items()}
                got = {n: [x.switch_name for x in r.discovery.nics] for n, r in results.items()}
                if got == {n: [s] for n, s in expected_leaves.items()}:
                    break
                assert loop.time() < deadline, f"LLDP did not converge: {got}"
                await asyncio.sleep(0.3)
            out = {}
            for node in wiring:
                topo = emu.get(wellknown.API_VERSION, wellknown.NODETOPOLOGIES, node)
                seen = as_the_binder_leaves_it(emu.get("v1", "nodes", node), topo)
                info = convert.node_from_api(seen, topo, convert.ConvertOptions())
                out[node] = info.tiers
            return out

        def leaf(name: str) -> str:  # the zone key: the agents' zone label on the node wins (seed)
            return topology.zone_label_value([name]) or ""

        tiers = await scheduler_tiers({"n1": "leaf-1", "n2": "leaf-2", "n3": "leaf-3"})
        assert tiers == {
            "n1": ("", leaf("leaf-1"), "spine-a", "core"),
            "n2": ("", leaf("leaf-2"), "spine-a", "core"),
            "n3": ("", leaf("leaf-3"), "spine-b", "core"),
        }
        topo = emu.get(wellknown.API_VERSION, wellknown.NODETOPOLOGIES, "n3")
        assert topo["spec"]["tiers"] == [
            {"level": 1, "name": "leaf-3"}, {"level": 2, "name": "spine-b"}, {"level": 3, "name": "core"},
        ]  # fmt: skip

        lab.move_port("l2-n2", "l2", "l4")  # n2's cable now ends on leaf-4, under spine-b
        tiers = await scheduler_tiers({"n1": "leaf-1", "n2": "leaf-4", "n3": "leaf-3"})
        # leaf-4's chain stops at spine-b; the core comes from what leaf-3 says of spine-b
        assert tiers["n2"] == ("", leaf("leaf-4"), "spine-b", "core")
        assert tiers["n1"] == ("", leaf("leaf-1"), "spine-a", "core")
