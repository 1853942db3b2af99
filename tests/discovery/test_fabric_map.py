"""The RoCE fabric map (leaf → spine → core) and the RoCE agent writing spec.tiers from it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from discovery.common import fabric_map
from discovery.common.model import IbPort, RoceNic, merge_spec
from discovery.common.sink import MemorySink
from discovery.roce.agent import RoceAgent, RoceConfig

MAP = """
# leaf: [spine, core]
leaf-a: [spine-1, core-1]
leaf-b: [spine-1, core-1]
leaf-c: [spine-2, core-1]
leaf-d: spine-1            # the core comes from what the other leaves of spine-1 say
leaf-e: spine-9
"""


def test_the_map_is_leaf_to_its_chain_of_units() -> None:
    fmap = fabric_map.parse_fabric_map(MAP, "map.yaml")
    assert fmap == {
        "leaf-a": ("spine-1", "core-1"),
        "leaf-b": ("spine-1", "core-1"),
        "leaf-c": ("spine-2", "core-1"),
        "leaf-d": ("spine-1", "core-1"),
        "leaf-e": ("spine-9",),
    }
    assert fabric_map.parse_fabric_map('{"leaf-a": ["s", "c"]}') == {"leaf-a": ("s", "c")}
    assert fabric_map.parse_fabric_map("") == {}


def test_a_node_on_several_leaves_gets_the_units_they_share_or_all_of_them() -> None:
    fmap = fabric_map.parse_fabric_map(MAP)
    assert fabric_map.map_tiers(fmap, ["leaf-a"]) == [(2, "spine-1"), (3, "core-1")]
    assert fabric_map.map_tiers(fmap, ["leaf-b", "leaf-a", ""]) == [(2, "spine-1"), (3, "core-1")]
    assert fabric_map.map_tiers(fmap, ["leaf-a", "leaf-c"]) == [(2, "spine-1,spine-2"), (3, "core-1")]
    assert fabric_map.map_tiers(fmap, ["leaf-a", "leaf-e"]) == [(2, "spine-1,spine-9"), (3, "core-1")]
    assert fabric_map.map_tiers(fmap, ["leaf-zz"]) == []


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("- leaf-a\n", "expected a mapping"),
        ("leaf-a: []\n", "expected a name or a list"),
        ("leaf-a: {spine: s}\n", "expected a name or a list"),
        ("leaf-a: [s1, c1]\nleaf-b: [s1, c2]\n", r"'s1' \(level 2\) is under 'c1' for leaf 'leaf-a' but under 'c2'"),
        ("leaf-a: [s1\n", "not YAML or JSON"),
    ],
)
def test_a_bad_map_is_a_clear_error(text: str, needle: str) -> None:
    with pytest.raises(fabric_map.FabricMapError, match=needle):
        fabric_map.parse_fabric_map(text, "map.yaml")


def test_the_roce_agent_keeps_its_hands_off_the_tiers_of_an_infiniband_node() -> None:
    ib = [IbPort("mlx5_0", 1, "0x1", "ib-leaf", "0x2")]
    spec, _ = merge_spec(None, ib=ib, upper_tiers=[(2, "ib-spine")])
    assert spec["tiers"] == [{"level": 1, "name": "ib-leaf"}, {"level": 2, "name": "ib-spine"}]
    spec, _ = merge_spec(spec, roce=[RoceNic("ens1", "tor-1")], upper_tiers=[(2, "roce-spine")])
    assert spec["tiers"] == [{"level": 1, "name": "ib-leaf"}, {"level": 2, "name": "ib-spine"}]
    spec, _ = merge_spec(None, roce=[RoceNic("ens1", "tor-1")], upper_tiers=[(3, "c"), (2, "s")])
    assert spec["tiers"] == [{"level": 1, "name": "tor-1"}, {"level": 2, "name": "s"}, {"level": 3, "name": "c"}]
    spec, _ = merge_spec(spec, roce=[RoceNic("ens1", "tor-1")])  # None: the upper tiers stay
    assert [t["level"] for t in spec["tiers"]] == [1, 2, 3]
    spec, _ = merge_spec(spec, roce=[RoceNic("ens1", "")], upper_tiers=[(2, "s")])
    assert spec["tiers"] == []  # no leaf, no tiers


def _agent(fixtures: Path, fmap: Path | None, sink: MemorySink) -> RoceAgent:
    config = RoceConfig(
        node_name="gpu-n01",
        cni_dir=fixtures / "cni",
        sysfs_root=fixtures / "sysfs",
        lldpcli=("cat", str(fixtures / "lldp" / "node-four-nics.json0")),
        rdma_cmd=("cat", str(fixtures / "rdma" / "roce-node.json")),
        fabric_map=fmap,
    )
    return RoceAgent(config, sink)


@pytest.mark.anyio
async def test_the_agent_writes_tiers_from_the_map_and_follows_its_edits(
    fixtures: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fmap = tmp_path / "fabric-map.yaml"
    fmap.write_text(MAP)
    sink = MemorySink()
    agent = _agent(fixtures, fmap, sink)
    await agent.run_once()
    assert sink.specs["gpu-n01"]["tiers"] == [
        {"level": 1, "name": "leaf-a,leaf-b"},
        {"level": 2, "name": "spine-1"},
        {"level": 3, "name": "core-1"},
    ]
    writes = len(sink.writes)
    await agent.run_once()
    assert len(sink.writes) == writes  # unchanged map, unchanged cables: nothing written
    fmap.write_text("leaf-a: [spine-7]\nleaf-b: [spine-7]\n")  # the ConfigMap was edited
    await agent.run_once()
    assert sink.specs["gpu-n01"]["tiers"][1:] == [{"level": 2, "name": "spine-7"}]
    # an unreadable map is said once and leaves the tiers as they are
    fmap.write_text("leaf-a: [s1, c1]\nleaf-b: [s1, c2]\n")
    writes = len(sink.writes)
    with caplog.at_level(logging.WARNING, logger="discovery.roce"):
        await agent.run_once()
        await agent.run_once()
    assert sink.specs["gpu-n01"]["tiers"][1:] == [{"level": 2, "name": "spine-7"}]
    assert len(sink.writes) == writes
    assert sum("a unit has one parent" in r.getMessage() for r in caplog.records) == 1
    # a leaf missing from the map is said, and has no tier above it
    fmap.write_text("leaf-a: [spine-1]\n")
    with caplog.at_level(logging.WARNING, logger="discovery.roce"):
        await agent.run_once()
    assert sink.specs["gpu-n01"]["tiers"][1:] == [{"level": 2, "name": "spine-1"}]
    assert any("leaf 'leaf-b' is not in the fabric map" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_without_a_map_there_is_only_the_leaf_tier(fixtures: Path) -> None:
    sink = MemorySink()
    await _agent(fixtures, None, sink).run_once()
    assert sink.specs["gpu-n01"]["tiers"] == [{"level": 1, "name": "leaf-a,leaf-b"}]


def test_one_tier_per_level_whatever_the_caller_passes() -> None:
    spec, _ = merge_spec(None, roce=[RoceNic("ens1", "tor-1")], upper_tiers=[(2, "b"), (2, "a"), (1, "x"), (3, "")])
    assert spec["tiers"] == [{"level": 1, "name": "tor-1"}, {"level": 2, "name": "b"}]
