"""The InfiniBand collector: hostname mapping, what it writes, unknown hosts, errors, leadership."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from discovery.common.model import NodeTopologySpec, RoceNic, merge_spec
from discovery.common.sink import MemorySink, NodeRef
from discovery.ib import hosts
from discovery.ib.collector import IbCollector, IbConfig
from extender.model import topology

LEAF1 = "MF0;leaf-01:MQM8700/U1"
LEAF2 = "MF0;leaf-02:MQM8700/U1"
LEAF3 = "MF0;leaf-03:MQM8700/U1"

NODES = [
    NodeRef("gpu-n01", {"kubernetes.io/hostname": "gpu-n01"}),
    NodeRef("gpu-n02"),
    NodeRef("node-3", {"kubernetes.io/hostname": "gpu-n03"}),  # matched by the hostname label
    NodeRef("GPU-N04"),  # matched case-insensitively
    NodeRef("gpu-n05.cluster.local"),  # matched by its first DNS label
    NodeRef("cpu-01"),  # no HCA: left alone
]


_DEFAULTS = IbConfig()


def _collector(
    fixtures: Path,
    sink: MemorySink,
    name: str = "fat-tree.txt",
    *,
    hostname_pattern: str = _DEFAULTS.hostname_pattern,
    switch_names: Path | None = None,
) -> IbCollector:
    config = IbConfig(input=fixtures / "ib" / name, hostname_pattern=hostname_pattern, switch_names=switch_names)
    return IbCollector(config, sink)


@pytest.mark.anyio
async def test_every_node_gets_its_exact_ib_topology(fixtures: Path) -> None:
    sink = MemorySink(NODES)
    result = await _collector(fixtures, sink).run_once()
    assert result.error is None
    assert sorted(sink.specs) == ["GPU-N04", "gpu-n01", "gpu-n02", "gpu-n05.cluster.local", "node-3"]
    assert sink.specs["gpu-n01"] == {
        "zone": f"ib#{LEAF1},{LEAF2}",
        "net": {
            "roce": [],
            "ib": [
                {"name": "mlx5_0", "port": 1, "guid": "0x0c42a10300a1b200", "switchName": LEAF1,
                 "switchGuid": "0xb8599f0300fc6d00", "rdmaDevice": "mlx5_0"},
                {"name": "mlx5_1", "port": 1, "guid": "0x0c42a10300a1b210", "switchName": LEAF2,
                 "switchGuid": "0xb8599f0300fc6e00", "rdmaDevice": "mlx5_1"},
            ],
        },
        # both spines form one group; leaf-04 (no HCA) hangs off that group only: no tier 3
        "tiers": [{"level": 1, "name": f"{LEAF1},{LEAF2}"}, {"level": 2, "name": "MF0;spine-01:MQM8700/U1+1"}],
    }  # fmt: skip
    assert sink.specs["GPU-N04"]["net"]["ib"] == [
        {"name": "HCA-1", "port": 1, "guid": "0x0c42a10300a1b500", "switchName": LEAF2,
         "switchGuid": "0xb8599f0300fc6e00", "rdmaDevice": ""},
    ]  # fmt: skip
    n05 = sink.specs["gpu-n05.cluster.local"]["net"]["ib"]
    assert [(p["name"], p["port"], p["guid"]) for p in n05] == [
        ("mlx5_0", 1, "0x1070fd0300176a4c"),
        ("mlx5_0", 2, "0x1070fd0300176a4d"),
    ]
    assert sink.labels["gpu-n01"] == topology.zone_label_value([LEAF2, LEAF1])
    # nodes on the same leaf share a zone; the two-leaf node is its own zone
    assert sink.labels["gpu-n02"] == sink.labels["node-3"] != sink.labels["gpu-n01"]
    assert result.mapping is not None
    assert result.mapping.unknown_hosts == {"gpu-n99": ["gpu-n99 mlx5_0"]}
    assert result.mapping.unparsable == ["??? (0x1070fd0300178000)"]


@pytest.mark.anyio
async def test_unknown_hosts_are_logged_once_and_a_second_round_writes_nothing(
    fixtures: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = MemorySink(NODES)
    collector = _collector(fixtures, sink)
    with caplog.at_level(logging.INFO, logger="discovery.ib"):
        await collector.run_once()
        writes = list(sink.writes)
        second = await collector.run_once()
    assert sink.writes == writes
    assert not any(o.changed for o in second.outcomes.values())
    lines = [r.getMessage() for r in caplog.records]
    assert sum("'gpu-n99'" in m and "not a Kubernetes node" in m for m in lines) == 1
    assert sum("no hostname in HCA description ???" in m for m in lines) == 1


@pytest.mark.anyio
async def test_a_moved_cable_rewrites_only_that_node(fixtures: Path) -> None:
    sink = MemorySink(NODES)
    await _collector(fixtures, sink).run_once()
    before = len(sink.writes)
    await _collector(fixtures, sink, "fat-tree-moved.txt").run_once()
    assert sink.writes[before:] == ["gpu-n02"]
    assert sink.specs["gpu-n02"]["zone"] == f"ib#{LEAF2}"
    assert sink.labels["gpu-n02"] == sink.labels["GPU-N04"]


@pytest.mark.anyio
async def test_the_roce_part_of_a_node_is_kept(fixtures: Path) -> None:
    sink = MemorySink(NODES)
    sink.specs["gpu-n02"], _ = merge_spec(None, roce=[RoceNic("ens1f0", "tor-1")])
    await _collector(fixtures, sink).run_once()
    assert [n["name"] for n in sink.specs["gpu-n02"]["net"]["roce"]] == ["ens1f0"]
    assert sink.specs["gpu-n02"]["zone"] == f"ib#{LEAF1}"


@pytest.mark.anyio
async def test_hostname_pattern_with_a_plain_group(fixtures: Path) -> None:
    sink = MemorySink([NodeRef("n01"), NodeRef("n02")])
    await _collector(fixtures, sink, hostname_pattern=r"^gpu-(n\d+)\s").run_once()
    assert sorted(sink.specs) == ["n01", "n02"]


def test_hostname_pattern_rules() -> None:
    rx = hosts.compile_pattern(hosts.DEFAULT_HOSTNAME_PATTERN)
    assert hosts.split_description("gpu-n01 mlx5_0", rx) == ("gpu-n01", "mlx5_0")
    assert hosts.split_description("gpu-n01 HCA-1", rx) == ("gpu-n01", "HCA-1")
    assert hosts.split_description("???", rx) is None
    assert hosts.split_description("", rx) is None
    named = hosts.compile_pattern(r"HCA-\d+ on (?P<host>[\w.-]+)")
    assert hosts.split_description("HCA-2 on gpu-n07", named) == ("gpu-n07", "HCA-2 on")
    both = hosts.compile_pattern(r"(?P<hca>HCA-\d+) on (?P<host>[\w.-]+)")
    assert hosts.split_description("HCA-2 on gpu-n07", both) == ("gpu-n07", "HCA-2")
    with pytest.raises(ValueError, match="no group"):
        hosts.compile_pattern(r"^\S+")


def test_two_adapters_with_the_same_description_do_not_collide() -> None:
    from discovery.ib.parse import HcaAttachment

    atts = [
        HcaAttachment("0x01", "gpu-n01 HCA-1", 1, "0x01", "0xaa", "leaf", 1),
        HcaAttachment("0x02", "gpu-n01 HCA-1", 1, "0x02", "0xaa", "leaf", 2),
    ]
    m = hosts.map_attachments(atts, None, hosts.compile_pattern(hosts.DEFAULT_HOSTNAME_PATTERN))
    assert [(p.name, p.port) for p in m.nodes["gpu-n01"]] == [("0x01", 1), ("0x02", 1)]


@pytest.mark.anyio
async def test_without_a_cluster_hostnames_are_node_names(fixtures: Path) -> None:
    sink = MemorySink(None)
    result = await _collector(fixtures, sink).run_once()
    assert "gpu-n99" in sink.specs and result.mapping is not None and result.mapping.unknown_hosts == {}


@pytest.mark.anyio
async def test_unreadable_fabric_is_an_error_logged_once_not_a_crash(
    fixtures: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = MemorySink(NODES)
    missing = IbCollector(IbConfig(input=tmp_path / "nope.txt"), sink)
    no_tool = IbCollector(IbConfig(ibnetdiscover=("ibnetdiscover-missing-xyz",)), sink)
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("this is not ibnetdiscover output\n")
    bad = IbCollector(IbConfig(input=garbage), sink)
    with caplog.at_level(logging.INFO, logger="discovery.ib"):
        for collector in (missing, no_tool, bad):
            for _ in range(2):
                result = await collector.run_once()
                assert result.error is not None
    assert sink.writes == []
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(lines) == 3
    assert "cannot read ibnetdiscover output" in lines[0]
    assert "not found on PATH (install infiniband-diags, or give a saved output with --input)" in lines[1]
    assert "cannot parse the ibnetdiscover output: line 1" in lines[2]


@pytest.mark.anyio
async def test_ibnetdiscover_is_run_as_a_command(fixtures: Path) -> None:
    sink = MemorySink(NODES)
    collector = IbCollector(IbConfig(ibnetdiscover=("cat", str(fixtures / "ib" / "fat-tree.txt"))), sink)
    result = await collector.run_once()
    assert result.error is None and "gpu-n01" in sink.specs


@pytest.mark.anyio
async def test_a_standby_instance_does_nothing(fixtures: Path) -> None:
    sink = MemorySink(NODES)
    leader = False
    collector = IbCollector(IbConfig(input=fixtures / "ib" / "fat-tree.txt"), sink, is_leader=lambda: leader)
    assert (await collector.run_once()).skipped and sink.writes == []
    leader = True
    assert not (await collector.run_once()).skipped and sink.writes


# ------------------------------------------------------------------ heartbeat

MAPPED = ["GPU-N04", "gpu-n01", "gpu-n02", "gpu-n05.cluster.local", "node-3"]
WALL0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


class FlakySink(MemorySink):
    """Heartbeats of the nodes in ``failing`` raise."""

    def __init__(self) -> None:
        super().__init__(NODES)
        self.failing: set[str] = set()

    async def heartbeat(self, node: str, observed_at: str, agent: str) -> bool:
        if node in self.failing:
            raise ConnectionError("apiserver unreachable")
        return await super().heartbeat(node, observed_at, agent)


def _beating(fixtures: Path, sink: MemorySink, now: list[float], name: str = "fat-tree.txt") -> IbCollector:
    return IbCollector(
        IbConfig(input=fixtures / "ib" / name, period=120, heartbeat_seconds=300, agent="ib/collector-a"),
        sink,
        clock=lambda: now[0],
        wall_clock=lambda: WALL0 + now[0],
    )


@pytest.mark.anyio
async def test_every_mapped_node_gets_a_heartbeat_throttled_per_node(fixtures: Path) -> None:
    sink, now = MemorySink(NODES), [0.0]
    collector = _beating(fixtures, sink, now)
    first = await collector.run_once()
    assert sorted(first.heartbeats) == MAPPED
    assert {h.node for h in sink.heartbeats} == set(MAPPED) and len(sink.heartbeats) == 5
    assert {(h.observed_at, h.agent) for h in sink.heartbeats} == {("2027-01-15T08:00:00Z", "ib/collector-a")}
    assert "cpu-01" not in sink.status  # not in the fabric: not checked
    now[0] = 120
    assert (await collector.run_once()).heartbeats == []  # within the interval, nothing changed
    # a moved cable: that node's heartbeat at once, the others' when they are due
    moved = _beating(fixtures, sink, now, "fat-tree-moved.txt")
    moved.heartbeats = collector.heartbeats  # the same process, the same throttle
    assert (await moved.run_once()).heartbeats == ["gpu-n02"]
    assert sink.status["gpu-n02"]["observedAt"] == "2027-01-15T08:02:00Z"
    now[0] = 300
    assert sorted((await moved.run_once()).heartbeats) == sorted(set(MAPPED) - {"gpu-n02"})
    assert len(sink.writes) == 6  # five objects, one rewrite: heartbeats are not writes of the spec


@pytest.mark.anyio
async def test_heartbeat_seconds_zero_disables_the_collectors_heartbeats(fixtures: Path) -> None:
    sink = MemorySink(NODES)
    collector = IbCollector(IbConfig(input=fixtures / "ib" / "fat-tree.txt", heartbeat_seconds=0), sink)
    for _ in range(3):
        assert (await collector.run_once()).heartbeats == []
    assert sink.heartbeats == [] and len(sink.writes) == 5


@pytest.mark.anyio
async def test_failing_heartbeats_are_one_condition_not_a_failed_round(
    fixtures: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink, now = FlakySink(), [0.0]
    sink.failing = {"gpu-n01", "gpu-n02"}
    collector = _beating(fixtures, sink, now)
    with caplog.at_level(logging.INFO, logger="discovery.ib"):
        for _ in range(2):
            result = await collector.run_once()
            assert result.error is None and result.failed == {}
            assert sorted(result.heartbeat_failed) == ["gpu-n01", "gpu-n02"]
            now[0] += 120
        assert sorted(sink.specs) == MAPPED  # every object written all the same
        sink.failing = set()
        result = await collector.run_once()  # retried each round, not after the interval
    assert sorted(result.heartbeats) == ["gpu-n01", "gpu-n02"]  # the others are not due (240 s)
    lines = [r.getMessage() for r in caplog.records]
    assert [m for m in lines if m.startswith("cannot write the heartbeat")] == [
        "cannot write the heartbeat (status) of NodeTopology gpu-n01 and 1 other node(s): "
        "ConnectionError: apiserver unreachable — will retry every 120s"
    ]
    assert sum(m.startswith("resolved: cannot write the heartbeat") for m in lines) == 1


Q = "Quantum Mellanox Technologies"
THREE_TIER_NODES = [NodeRef(f"gpu-a0{i}") for i in range(1, 6)] + [
    NodeRef(n) for n in ("gpu-b01", "gpu-b02", "gpu-b03", "gpu-b04", "gpu-d01", "gpu-x01")
]  # stor-01 is a storage host, not a Kubernetes node


def _tier_names(spec: NodeTopologySpec) -> list[tuple[int, str]]:
    return [(t["level"], t["name"]) for t in spec["tiers"]]


@pytest.mark.anyio
async def test_identical_switch_descriptions_still_group_hosts_by_leaf_and_pod(fixtures: Path) -> None:
    sink = MemorySink(THREE_TIER_NODES)
    result = await _collector(fixtures, sink, "fat-tree-3tier.txt").run_once()
    assert result.error is None and result.mapping is not None
    assert result.mapping.unknown_hosts == {"stor-01": ["stor-01 mlx5_0"]}
    assert result.mapping.unparsable == ["??? (0x248a070300a100e0)"]
    assert sorted(sink.specs) == sorted(n.name for n in THREE_TIER_NODES)
    zones: dict[str, list[str]] = {}
    for node, spec in sorted(sink.specs.items()):
        zones.setdefault(spec["zone"], []).append(node)
    a1, a2, b1 = (f"{Q} (0x0c42a10301b0000{c})" for c in "789")
    assert zones == {
        f"ib#{a1}": ["gpu-a01", "gpu-a02", "gpu-a03"],
        f"ib#{a2}": ["gpu-a04", "gpu-a05"],
        f"ib#{b1}": ["gpu-b01", "gpu-b02", "gpu-b03"],
        f"ib#{Q} (0x0c42a10301b0000a)": ["gpu-b04"],
        f"ib#{a1},{a2}": ["gpu-d01"],
        f"ib#{a2},{b1}": ["gpu-x01"],
    }
    pod_a, pod_b, cores = (f"{Q} (0x0c42a10301b0000{c})+1" for c in "351")
    assert _tier_names(sink.specs["gpu-a01"]) == [(1, a1), (2, pod_a), (3, cores)]
    assert _tier_names(sink.specs["gpu-b04"])[1:] == [(2, pod_b), (3, cores)]
    assert _tier_names(sink.specs["gpu-d01"]) == [(1, f"{a1},{a2}"), (2, pod_a), (3, cores)]
    assert _tier_names(sink.specs["gpu-x01"])[1] == (2, f"{pod_a},{pod_b}")
    assert sink.labels["gpu-a01"] == topology.zone_label_value([a1]) != sink.labels["gpu-a04"]


@pytest.mark.anyio
async def test_switch_names_file_names_leaves_and_is_reread_each_round(fixtures: Path, tmp_path: Path) -> None:
    names = tmp_path / "switch-names.yaml"
    names.write_text("0x0c42a10301b00007: leaf-a1\n0x0c42a10301b00003: spine-a1\n0x0c42a10301b00004: spine-a2\n")
    sink = MemorySink(THREE_TIER_NODES)
    collector = _collector(fixtures, sink, "fat-tree-3tier.txt", switch_names=names)
    await collector.run_once()
    a01 = sink.specs["gpu-a01"]
    assert a01["zone"] == "ib#leaf-a1" and a01["net"]["ib"][0]["switchName"] == "leaf-a1"
    assert _tier_names(a01)[:2] == [(1, "leaf-a1"), (2, "spine-a1+1")]
    assert sink.labels["gpu-a01"] == topology.zone_label_value(["leaf-a1"])
    before = len(sink.writes)
    names.write_text("0x0c42a10301b00007: rack-1-leaf\n")  # the ConfigMap was edited
    await collector.run_once()
    assert sink.specs["gpu-a01"]["zone"] == "ib#rack-1-leaf"
    assert {"gpu-a01", "gpu-a02", "gpu-a03", "gpu-d01"} <= set(sink.writes[before:])


@pytest.mark.anyio
async def test_a_bad_switch_names_file_writes_nothing_and_says_why(
    fixtures: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    names = tmp_path / "switch-names.yaml"
    names.write_text("0x1: same\n0x2: same\n")
    sink = MemorySink(THREE_TIER_NODES)
    with caplog.at_level(logging.INFO, logger="discovery.ib"):
        result = await _collector(fixtures, sink, "fat-tree-3tier.txt", switch_names=names).run_once()
    assert result.error is not None and "given to two switches" in result.error
    assert sink.writes == []
    assert any("switch-names.yaml" in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
