"""Scenarios with spines, cores and NVLink domains (issue 17 item 6): the objects they make are
what our agents or Topograph would write, the scheduler's cache reads the same tiers from them,
the jobs table shows the tiers a job spans and the SVG puts each spine over its own leaves."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.simulate.scenario import Scenario, ScenarioError, load_scenario
from extender.simulate.scenario_objects import cluster_objects
from tests.cli_process import run_cli
from tests.simulate.test_svg import NS, _overlaps

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "examples" / "scenarios"

BASE: dict[str, Any] = {
    "name": "tiers",
    "leaves": [
        {"name": "s1", "nodes": ["n0", "n1"], "nvlink": "nvl-a"},
        {"name": "s2", "nodes": ["n2", "n3"]},
        {"name": "s3", "nodes": ["n4"]},
    ],
    "spines": [{"name": "sp1", "leaves": ["s1", "s2"]}, {"name": "sp2", "leaves": ["s3"]}],
    "cores": [{"name": "c1", "spines": ["sp1", "sp2"]}],
    "nodes": {"n1": {"nvlink": "nvl-b"}},
    "steps": [{"title": "nothing"}],
}


def _scenario(**changes: Any) -> Scenario:
    return Scenario.model_validate({**BASE, **changes})


def _by_kind(objs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


def _cache(sc: Scenario) -> ClusterCache:
    cache = ClusterCache(clock=lambda: 1_800_000_000.0)
    for obj in cluster_objects(sc):
        if obj["kind"] == "Node":
            cache.on_node_add(obj)
        elif obj["kind"] == wellknown.KIND_NODETOPOLOGY:
            cache.on_topology_add(obj)
    assert cache.conversion_errors == {}
    return cache


def test_agents_write_spec_tiers_and_the_clique_label_and_the_cache_reads_them() -> None:
    sc = _scenario()
    objs = cluster_objects(sc)
    topos = _by_kind(objs, wellknown.KIND_NODETOPOLOGY)
    assert topos["n0"]["spec"]["tiers"] == [
        {"level": 1, "name": "s1"},
        {"level": 2, "name": "sp1"},
        {"level": 3, "name": "c1"},
    ]
    assert topos["n4"]["spec"]["tiers"][1] == {"level": 2, "name": "sp2"}
    labels = {n: o["metadata"]["labels"] for n, o in _by_kind(objs, "Node").items()}
    assert labels["n0"]["nvidia.com/gpu.clique"] == "nvl-a"
    assert labels["n1"]["nvidia.com/gpu.clique"] == "nvl-b"  # the node's own domain wins over its leaf's
    assert "nvidia.com/gpu.clique" not in labels["n2"]
    assert not any(k.startswith("network.topology.nvidia.com/") for v in labels.values() for k in v)
    nodes = _cache(sc).nodes
    assert nodes["n0"].tiers == ("nvl-a", nodes["n0"].zone, "sp1", "c1")
    assert nodes["n1"].tier(0) == "nvl-b" and nodes["n1"].zone == nodes["n0"].zone
    assert nodes["n2"].tier(2) == "sp1" and nodes["n2"].zone != nodes["n0"].zone
    assert nodes["n4"].tier(2) == "sp2" and nodes["n4"].tier(3) == "c1"


def test_topograph_scenarios_have_no_nodetopology_only_labels() -> None:
    sc = _scenario(topologyFrom="topograph")
    objs = cluster_objects(sc)
    assert _by_kind(objs, wellknown.KIND_NODETOPOLOGY) == {}
    labels = _by_kind(objs, "Node")["n1"]["metadata"]["labels"]
    assert {k: v for k, v in labels.items() if k.startswith("network.topology.nvidia.com/")} == {
        "network.topology.nvidia.com/accelerator": "nvl-b",
        "network.topology.nvidia.com/leaf": "s1",
        "network.topology.nvidia.com/spine": "sp1",
        "network.topology.nvidia.com/core": "c1",
    }
    nodes = _cache(sc).nodes
    assert nodes["n1"].tiers == ("nvl-b", "s1", "sp1", "c1")  # the leaf label is the zone key
    assert nodes["n4"].zone == "s3"


def test_scenarios_without_spines_make_the_objects_they_always_made() -> None:
    sc = load_scenario("gang-spans-leaves")
    topologies = [o for o in cluster_objects(sc) if o["kind"] == wellknown.KIND_NODETOPOLOGY]
    # nothing above the leaf; the zone and the leaf (tier 1) as the agents write them on every node
    assert topologies and all(
        o["spec"]["tiers"] == [{"level": 1, "name": o["spec"]["net"]["roce"][0]["switchName"]}] for o in topologies
    )
    assert all(o["spec"]["zone"] == "roce#" + o["spec"]["net"]["roce"][0]["switchName"] for o in topologies)
    assert not sc.has_upper_tiers


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"spines": [{"name": "sp1", "leaves": ["s1", "s9"]}]}, "spine sp1: leaves lists 's9'"),
        ({"spines": [{"name": "a", "leaves": ["s1"]}, {"name": "b", "leaves": ["s1"]}]}, "s1 is under two spines"),
        ({"spines": [{"name": "a", "leaves": ["s1"]}, {"name": "a", "leaves": ["s2"]}]}, "two spines"),
        ({"cores": [{"name": "c1", "spines": ["sp9"]}]}, "core c1: spines lists 'sp9'"),
        (
            {"topologyFrom": "topograph", "steps": [{"events": [{"cableMoved": {"n0": "s2"}}]}]},
            "needs topologyFrom: agents",
        ),
    ],
)
def test_bad_fabrics_are_clear_errors(tmp_path: Path, changes: dict[str, Any], says: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**BASE, **changes}))
    with pytest.raises(ScenarioError, match=says.replace("(", r"\(")):
        load_scenario(str(bad))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("simulate", *args, "--quiet", cwd=ROOT)


def test_topograph_labels_alone_place_the_gang_in_one_leaf_and_the_table_says_so() -> None:
    path = str(SCENARIOS / "topograph-labels.yaml")
    r = _cli(path, "--format", "json")
    assert r.returncode == 0, r.stderr
    job = json.loads(r.stdout)["jobs"]["default/four"]
    assert job == {"leaves": ["s2"], "nodes": ["n4", "n5", "n6", "n7"], "span": ["leaf"], "spines": ["sp1"]}
    r = _cli(path)
    lines = r.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:3] == ["JOB", "SPAN", "SPINES"])
    assert lines[header + 1].split()[:4] == ["default/four", "leaf", "sp1", "s2"]


def test_the_svg_puts_each_spine_over_its_own_leaves(tmp_path: Path) -> None:
    out = tmp_path / "p.svg"
    r = _cli(str(SCENARIOS / "spine-before-emptier-leaves.yaml"), "--svg", str(out), "--svg-step", "1")
    assert r.returncode == 0, r.stderr
    root = ET.fromstring(out.read_text())
    assert _overlaps(root) == []
    xs: dict[str, float] = {}
    ys: dict[str, float] = {}
    for t in root.iter(f"{NS}text"):
        if t.text in {"core", "spine sp1", "spine sp2", "leaf s1", "leaf s2", "leaf s3", "leaf s4"}:
            xs[t.text], ys[t.text] = float(t.get("x", 0)), float(t.get("y", 0))
    assert len(xs) == 7, xs
    assert ys["core"] < ys["spine sp1"] == ys["spine sp2"] < ys["leaf s1"]
    assert xs["spine sp1"] == pytest.approx((xs["leaf s1"] + xs["leaf s2"]) / 2)
    assert xs["spine sp2"] == pytest.approx((xs["leaf s3"] + xs["leaf s4"]) / 2)
    assert xs["leaf s2"] - xs["leaf s1"] < xs["leaf s3"] - xs["leaf s2"]  # spine groups stand apart


def test_a_scenario_nodetopology_has_the_zone_and_tiers_the_roce_agent_writes() -> None:
    from discovery.common.model import RoceNic, merge_spec
    from extender.simulate.fabric import topology_object

    for switches, upper in ((["s1"], {}), (["s2", "s1"], {2: "sp1"})):
        agent, _ = merge_spec(
            None, roce=[RoceNic(f"eth{i}", s) for i, s in enumerate(switches)], upper_tiers=upper.items()
        )
        ours = topology_object("n0", switches, tiers={1: switches[0], **upper})["spec"]
        assert (ours["zone"], ours["tiers"]) == (agent["zone"], agent["tiers"])
