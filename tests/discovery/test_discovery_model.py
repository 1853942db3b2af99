"""The shared spec model, the merge rule, publishing only on change, one log line per condition."""

from __future__ import annotations

import hashlib
import logging

import pytest

from discovery.common.conditions import ConditionLog
from discovery.common.model import IbPort, NodeTopologySpec, RoceNic, merge_spec, spec_from_json, zone_of
from discovery.common.sink import MemorySink, node_topology_object, publish_part
from extender.model import topology


def _md5(s: str) -> str:
    return hashlib.md5(s.encode(), usedforsecurity=False).hexdigest()


def test_roce_zone_is_the_sorted_switch_set_and_label_its_md5() -> None:
    spec, label = merge_spec(
        None,
        roce=[RoceNic("ens2", "S2"), RoceNic("ens1", "S1"), RoceNic("ens3", "S1"), RoceNic("ens4", "")],
    )
    assert spec["zone"] == "roce#S1,S2"
    assert label == _md5("S1,S2")
    assert [n["name"] for n in spec["net"]["roce"]] == ["ens1", "ens2", "ens3", "ens4"]
    # the same derivation the scheduler uses
    assert spec["zone"] == topology.generated_zone_key("roce", ["S2", "S1"])
    assert label == topology.zone_label_value(["S1", "S2"])


def test_nodes_on_the_same_switch_set_share_zone_and_label() -> None:
    a = merge_spec(None, roce=[RoceNic("x", "S1"), RoceNic("y", "S2")])
    b = merge_spec(None, roce=[RoceNic("p", "S2"), RoceNic("q", "S1"), RoceNic("r", "S2")])
    c = merge_spec(None, roce=[RoceNic("x", "S1")])
    assert a[0]["zone"] == b[0]["zone"] and a[1] == b[1]
    assert c[0]["zone"] != a[0]["zone"] and c[1] != a[1]


def test_a_node_without_any_switch_has_an_empty_zone_and_no_label() -> None:
    spec, label = merge_spec(None, roce=[RoceNic("ens1")])
    expected: NodeTopologySpec = {"zone": "", "net": {"roce": [spec["net"]["roce"][0]], "ib": []}, "tiers": []}
    assert spec == expected
    assert label is None
    assert zone_of({"roce": [], "ib": []}) == (None, None)


def test_each_agent_replaces_only_its_own_list_and_ib_wins_the_zone() -> None:
    spec, _ = merge_spec(None, roce=[RoceNic("ens1", "R1")])
    spec, label = merge_spec(spec, ib=[IbPort("mlx5_0", 1, "0x1", "IB1", "0x2")])
    assert [n["name"] for n in spec["net"]["roce"]] == ["ens1"]
    assert spec["zone"] == "ib#IB1"
    assert label == _md5("IB1")
    spec2, label2 = merge_spec(spec, roce=[RoceNic("ens1", "R2")])
    assert spec2["net"]["ib"] == spec["net"]["ib"]
    assert spec2["net"]["roce"][0]["switchName"] == "R2"
    assert (spec2["zone"], label2) == ("ib#IB1", label)


def test_spec_from_json_tolerates_missing_and_foreign_fields() -> None:
    spec = spec_from_json({"net": {"roce": [{"name": "a", "extra": 1}], "ib": [{"name": "m", "port": "2"}]}})
    expected: NodeTopologySpec = {
        "zone": "",
        "net": {
            "roce": [{"name": "a", "switchName": "", "switchPort": "", "rdmaDevice": "", "master": ""}],
            "ib": [{"name": "m", "port": 2, "guid": "", "switchName": "", "switchGuid": "", "rdmaDevice": ""}],
        },
        "tiers": [],
    }
    assert spec == expected
    empty: NodeTopologySpec = {"zone": "", "net": {"roce": [], "ib": []}, "tiers": []}
    assert spec_from_json(None) == empty


def test_node_topology_object_carries_the_zone_label() -> None:
    spec, label = merge_spec(None, roce=[RoceNic("ens1", "S1")])
    obj = node_topology_object("n1", spec, label)
    assert obj["apiVersion"] == "scheduling.infini-ai.com/v1alpha1"
    assert obj["kind"] == "NodeTopology"
    assert obj["metadata"] == {"name": "n1", "labels": {"zone": label}}
    assert obj["spec"] == spec


@pytest.mark.anyio
async def test_publish_writes_only_when_the_topology_changes() -> None:
    sink = MemorySink()
    first = await publish_part(sink, "n1", roce=[RoceNic("ens1", "S1")])
    again = await publish_part(sink, "n1", roce=[RoceNic("ens1", "S1")])
    moved = await publish_part(sink, "n1", roce=[RoceNic("ens1", "S2")])
    assert (first.changed, again.changed, moved.changed) == (True, False, True)
    assert sink.writes == ["n1", "n1"]
    assert sink.specs["n1"]["zone"] == "roce#S2"
    assert sink.labels["n1"] == _md5("S2")
    gone = await publish_part(sink, "n1", roce=[RoceNic("ens1")])
    assert gone.changed and "n1" not in sink.labels


def test_condition_is_logged_once_while_it_persists_and_once_when_resolved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logging.getLogger("test.conditions")
    c = ConditionLog(log)
    with caplog.at_level(logging.INFO, logger="test.conditions"):
        for _ in range(5):
            c.begin_round()
            c.report("tool", "tool not found")
            c.end_round()
        c.begin_round()
        c.report("tool", "tool failed (exit 1)")  # a different message is a new line
        c.end_round()
        c.begin_round()
        c.end_round()
        c.begin_round()
        c.end_round()
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["tool not found", "tool failed (exit 1)", "resolved: tool failed (exit 1)"]
