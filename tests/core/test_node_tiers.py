"""A node's topology tiers: annotation > NodeTopology ``spec.tiers`` > labels, per tier; the leaf
tier is the seed's zone key, which a Topograph leaf label gives when nothing of ours does."""

from __future__ import annotations

from typing import Any

import pytest

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.cache.convert import ConvertOptions, node_from_api, topology_tiers
from extender.model import topology
from extender.model.node import NodeInfo
from extender.model.resources import Resource
from extender.settings import ServeSettings, _validate
from tests import builders

TOPOGRAPH_0X = {
    "network.topology.nvidia.com/accelerator": "nvl1",
    "network.topology.nvidia.com/leaf": "s1",
    "network.topology.nvidia.com/spine": "s2",
    "network.topology.nvidia.com/core": "s3",
}
TOPOGRAPH_1X = {
    "accelerator.topograph.run/domain": "nvl7",
    "fabric.topograph.run/tier-0": "leaf-9",
    "fabric.topograph.run/tier-1": "spine-4",
    "fabric.topograph.run/tier-2": "core-1",
}
OPTS = ConvertOptions()


def _topo(name: str, switches: list[str], tiers: list[dict[str, Any]], kind: str = "ib") -> dict[str, Any]:
    obj = builders.topology(name, switches, kind=kind)
    obj["spec"]["tiers"] = tiers
    return obj


def _tiers(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
           topo: dict[str, Any] | None = None, opts: ConvertOptions = OPTS) -> tuple[str, ...]:  # fmt: skip
    node = node_from_api(builders.node("n1", labels=labels, annotations=annotations), topo, opts)
    assert node.tier(1) == node.zone
    return node.tiers


def test_topograph_0x_labels_alone_give_every_tier_and_the_zone() -> None:
    assert _tiers(TOPOGRAPH_0X) == ("nvl1", "s1", "s2", "s3")


def test_topograph_1x_tier_n_is_our_tier_n_plus_1() -> None:
    assert _tiers(TOPOGRAPH_1X) == ("nvl7", "leaf-9", "spine-4", "core-1")
    assert _tiers({"fabric.topograph.run/tier-3": "super"}) == ("", "", "", "", "super")


def test_the_gpu_operator_clique_wins_the_nvlink_tier() -> None:
    labels = {"nvidia.com/gpu.clique": "uuid.3", **TOPOGRAPH_0X, **TOPOGRAPH_1X}
    assert _tiers(labels)[0] == "uuid.3"
    assert _tiers({**TOPOGRAPH_0X, **TOPOGRAPH_1X})[:4] == ("nvl1", "s1", "s2", "s3")  # 0.x keys listed first


def test_our_node_topology_wins_over_labels_and_the_annotation_over_both() -> None:
    topo = _topo("n1", ["leaf-7"], [{"level": 1, "name": "leaf-7"}, {"level": 2, "name": "spine-a+1"}])
    assert _tiers(TOPOGRAPH_0X, topo=topo) == ("nvl1", "ib#leaf-7", "spine-a+1", "s3")
    annotations = {"scheduling.infini-ai.com/tier-2": "spine-x", "scheduling.infini-ai.com/tier-0": "rack-9"}
    assert _tiers(TOPOGRAPH_0X, annotations, topo) == ("rack-9", "ib#leaf-7", "spine-x", "s3")
    # a tier only an annotation names extends the tuple; a malformed tier annotation is ignored
    more = {"scheduling.infini-ai.com/tier-5": "hall-2", "scheduling.infini-ai.com/tier-x": "?"}
    assert _tiers(None, more, topo) == ("", "ib#leaf-7", "spine-a+1", "", "", "hall-2")


def test_the_leaf_tier_is_the_seeds_zone_key_with_the_leaf_label_last() -> None:
    topo = _topo("n1", ["leaf-7"], [{"level": 1, "name": "leaf-7"}])
    # generated key from our NodeTopology beats Topograph's leaf label
    assert _tiers(TOPOGRAPH_0X, topo=topo)[1] == "ib#leaf-7"
    # the agents' zone label beats the generated key, the annotations beat the label
    assert _tiers({**TOPOGRAPH_0X, "zone": "md5"}, topo=topo)[1] == "md5"
    assert _tiers({"zone": "md5"}, {"scheduling.infini-ai.com/tier-1": "t1"}, topo)[1] == "t1"
    both = {"scheduling.infini-ai.com/tier-1": "t1", wellknown.ANNO_RDMA_TOPOLOGY_KEY: "seed"}
    assert _tiers({"zone": "md5"}, both, topo)[1] == "seed"
    # nothing of ours: the leaf label is the zone key
    assert _tiers({"network.topology.nvidia.com/leaf": "s1"})[1] == "s1"
    assert _tiers({"fabric.topograph.run/tier-0": "leaf-9"})[1] == "leaf-9"


def test_a_node_without_any_source_has_no_tiers_and_no_zone() -> None:
    node = node_from_api(builders.node("n1"), None, OPTS)
    assert (node.tiers, node.zone, node.tier(0), node.tier(3)) == ((), "", "", "")


def test_the_label_key_list_is_configurable() -> None:
    opts = ConvertOptions(tier_labels=topology.parse_tier_labels("1=rack,2=row,2=network.topology.nvidia.com/spine"))
    labels = {"rack": "r1", "network.topology.nvidia.com/spine": "s2", "nvidia.com/gpu.clique": "c"}
    assert _tiers(labels, opts=opts) == ("", "r1", "s2")  # gpu.clique is not in the list any more
    assert _tiers({**labels, "row": "w1"}, opts=opts) == ("", "r1", "w1")
    assert _tiers(labels, opts=ConvertOptions(tier_labels=())) == ()


@pytest.mark.parametrize(
    ("text", "pairs"),
    [
        ("", ()),
        ("0=a, 1=b/c ,,1=d", ((0, "a"), (1, "b/c"), (1, "d"))),
        ("2=x,2=x", ((2, "x"),)),
        (topology.format_tier_labels(wellknown.DEFAULT_TIER_LABELS), wellknown.DEFAULT_TIER_LABELS),
    ],
)
def test_tier_label_setting_round_trips(text: str, pairs: tuple[tuple[int, str], ...]) -> None:
    assert topology.parse_tier_labels(text) == pairs


@pytest.mark.parametrize("bad", ["leaf", "x=leaf", "1=", "-1=a", "17=a", "1=a b"])
def test_a_bad_tier_label_entry_is_a_clear_error(bad: str) -> None:
    with pytest.raises(ValueError, match="TIER=LABEL-KEY"):
        topology.parse_tier_labels(bad)
    with pytest.raises(ValueError, match="--topology-labels"):
        _validate(ServeSettings(webhook_port=0, topology_labels=bad))


def test_node_topology_tiers_skip_malformed_entries() -> None:
    tiers = [
        {"level": 2, "name": "a"}, {"level": 2, "name": "b"}, {"level": True, "name": "c"},
        {"level": "3", "name": "d"}, {"level": 4, "name": ""}, "x", {"level": 0, "name": "z"},
    ]  # fmt: skip
    topo = {"spec": {"tiers": tiers}}
    assert topology_tiers(topo) == {2: "a", 0: "z"}
    assert topology_tiers(None) == {} and topology_tiers({"spec": None}) == {}


def test_tiers_and_zone_stay_aligned_in_the_model() -> None:
    assert NodeInfo("a", Resource.empty(), zone="z").tiers == ("", "z")
    assert NodeInfo("a", Resource.empty(), tiers=("n", "l", "s")).zone == "l"
    assert NodeInfo("a", Resource.empty(), zone="z", tiers=("n",)).tiers == ("n", "z")


def test_cache_rebuilds_tiers_when_topology_or_labels_change_and_clones_keep_them() -> None:
    cache = ClusterCache()
    node = builders.node("n1", labels=TOPOGRAPH_0X)
    builders.feed(cache, [node])
    assert cache.nodes["n1"].tiers == ("nvl1", "s1", "s2", "s3")
    topo = _topo("n1", ["leaf-7"], [{"level": 1, "name": "leaf-7"}, {"level": 2, "name": "spine-a"}])
    cache.on_topology_add(topo)
    assert cache.nodes["n1"].tiers == ("nvl1", "ib#leaf-7", "spine-a", "s3")
    moved = _topo("n1", ["leaf-8"], [{"level": 1, "name": "leaf-8"}, {"level": 2, "name": "spine-b"}])
    cache.on_topology_update(topo, moved)
    assert cache.nodes["n1"].tiers == ("nvl1", "ib#leaf-8", "spine-b", "s3")
    relabelled = builders.node("n1", labels={**TOPOGRAPH_0X, "network.topology.nvidia.com/core": "s9"})
    cache.on_node_update(node, relabelled)
    assert cache.nodes["n1"].tiers == ("nvl1", "ib#leaf-8", "spine-b", "s9")
    cache.on_topology_delete(moved)
    assert cache.nodes["n1"].tiers == ("nvl1", "s1", "s2", "s9")
    snap = cache.snapshot()
    clone = snap.nodes["n1"].clone()
    assert clone.tiers == snap.nodes["n1"].tiers and clone.zone == "s1"
    assert cache.zones() == {("A100", "s1"): ["n1"]}
