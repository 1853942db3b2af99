"""A job's tier limit (highestTierAllowed + mode) from every accepted spelling, through the cache
as the informers feed it; bad values are conversion errors the cache reports, never a crash."""

from __future__ import annotations

from typing import Any

import pytest

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.cache.convert import ConvertOptions
from extender.model import topology
from tests import builders as b

W = wellknown


def _cache(objs: list[dict[str, Any]], opts: ConvertOptions | None = None) -> ClusterCache:
    cache = ClusterCache(opts, clock=lambda: 1_800_000_000.0)
    b.feed(cache, [b.queue("research"), *objs])
    return cache


def _pg(spec_extra: dict[str, Any], topology_: dict[str, Any] | None = None) -> dict[str, Any]:
    pg = b.podgroup("train", min_member=2, topology=topology_)
    pg["spec"].update(spec_extra)
    return pg


def _limit(cache: ClusterCache, key: str = "default/train") -> tuple[int | None, str]:
    job = cache.jobs[key]
    return job.highest_tier, job.tier_mode


@pytest.mark.parametrize(
    ("topo", "extra", "want"),
    [
        ({"highestTierAllowed": 1, "mode": "hard"}, {}, (1, "hard")),
        ({"highestTierAllowed": "spine"}, {}, (2, "soft")),
        ({"highestTierAllowed": "nvlink", "mode": "soft"}, {}, (0, "soft")),
        ({"highestTierAllowed": "accelerator"}, {}, (0, "soft")),
        ({"highestTierAllowed": "core", "mode": "hard"}, {}, (3, "hard")),
        ({"highestTierAllowed": "5"}, {}, (5, "soft")),
        (None, {"networkTopology": {"mode": "hard", "highestTierAllowed": 2}}, (2, "hard")),
        ({"highestTierAllowed": "leaf"}, {"networkTopology": {"highestTierAllowed": 1}}, (1, "soft")),
        ({"mode": "soft"}, {}, (None, "soft")),  # soft alone: no limit
        ({"enabled": True}, {}, (None, "soft")),
    ],
)
def test_podgroup_spellings(topo: dict[str, Any] | None, extra: dict[str, Any], want: tuple[int | None, str]) -> None:
    cache = _cache([_pg(extra, topo), b.pod("train-0", group="train")])
    assert _limit(cache) == want
    assert cache.conversion_errors == {}
    clone = cache.jobs["default/train"].clone()
    assert (clone.highest_tier, clone.tier_mode) == want
    assert clone.tier_hard == (want[0] is not None and want[1] == "hard")


@pytest.mark.parametrize(
    ("topo", "extra", "says"),
    [
        ({"highestTierAllowed": "rack"}, {}, "tier 'rack'"),
        ({"highestTierAllowed": 17}, {}, "tier 17"),
        ({"highestTierAllowed": -1}, {}, "tier -1"),
        ({"highestTierAllowed": True}, {}, "tier True"),
        ({"highestTierAllowed": 1, "mode": "strict"}, {}, "mode 'strict'"),
        ({"mode": "hard"}, {}, "mode hard needs highestTierAllowed"),
        ({"highestTierAllowed": 1}, {"networkTopology": {"highestTierAllowed": 2}}, "disagree"),
        (None, {"networkTopology": "hard"}, "spec.networkTopology must be an object"),
    ],
)
def test_podgroup_bad_values_are_conversion_errors(
    topo: dict[str, Any] | None, extra: dict[str, Any], says: str
) -> None:
    cache = _cache([_pg(extra, topo)])
    err = cache.conversion_errors["PodGroup/default/train"]
    assert says in err and "train" in err
    assert "default/train" not in cache.jobs  # skipped, as other unconvertible PodGroups are


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        ({W.ANNO_HIGHEST_TIER_ALLOWED: "leaf", W.ANNO_TOPOLOGY_MODE: "hard"}, (1, "hard")),
        ({W.ANNO_HIGHEST_TIER_ALLOWED: "2"}, (2, "soft")),
        ({W.ANNO_HIGHEST_TIER_ALLOWED: "Spine", W.ANNO_TOPOLOGY_MODE: "HARD"}, (2, "hard")),
        ({W.ANNO_KUEUE_REQUIRED_TOPOLOGY: "network.topology.nvidia.com/leaf"}, (1, "hard")),
        ({W.ANNO_KUEUE_PREFERRED_TOPOLOGY: "network.topology.nvidia.com/spine"}, (2, "soft")),
        ({W.ANNO_KUEUE_PREFERRED_TOPOLOGY: "fabric.topograph.run/tier-1"}, (2, "soft")),  # 1.x tier-1 = spine
        ({W.ANNO_KUEUE_REQUIRED_TOPOLOGY: "nvidia.com/gpu.clique"}, (0, "hard")),
        ({W.ANNO_KUEUE_REQUIRED_TOPOLOGY: "zone"}, (1, "hard")),
        ({W.ANNO_KAI_REQUIRED_PLACEMENT: "network.topology.nvidia.com/core"}, (3, "hard")),
        (
            {
                W.ANNO_KUEUE_REQUIRED_TOPOLOGY: "network.topology.nvidia.com/leaf",
                W.ANNO_HIGHEST_TIER_ALLOWED: "1",
                W.ANNO_TOPOLOGY_MODE: "hard",
            },
            (1, "hard"),
        ),
        ({}, (None, "soft")),
    ],
)
def test_pod_annotation_spellings_of_a_lone_pod(annotations: dict[str, str], want: tuple[int | None, str]) -> None:
    cache = _cache([b.pod("solo", annotations=annotations)])
    assert cache.conversion_errors == {}
    assert _limit(cache, "default/solo") == want


def test_kueue_label_maps_through_the_configured_topology_labels() -> None:
    opts = ConvertOptions(tier_labels=topology.parse_tier_labels("1=example.com/rack,2=example.com/row"))
    anno = {W.ANNO_KUEUE_REQUIRED_TOPOLOGY: "example.com/row"}
    assert _limit(_cache([b.pod("solo", annotations=anno)], opts), "default/solo") == (2, "hard")
    # the default Topograph key is not configured here: a clear error, not a guess
    anno = {W.ANNO_KUEUE_REQUIRED_TOPOLOGY: "network.topology.nvidia.com/leaf"}
    cache = _cache([b.pod("solo", annotations=anno)], opts)
    err = cache.conversion_errors["Pod/default/solo"]
    assert "not a topology label" in err and "example.com/rack" in err


@pytest.mark.parametrize(
    ("annotations", "says"),
    [
        ({W.ANNO_HIGHEST_TIER_ALLOWED: "rack"}, "tier 'rack'"),
        ({W.ANNO_HIGHEST_TIER_ALLOWED: "1", W.ANNO_TOPOLOGY_MODE: "maybe"}, "mode 'maybe'"),
        ({W.ANNO_TOPOLOGY_MODE: "hard"}, "needs highestTierAllowed"),
        ({W.ANNO_KUEUE_REQUIRED_TOPOLOGY: W.LABEL_HOSTNAME}, "not a topology label"),
        (
            {
                W.ANNO_KUEUE_REQUIRED_TOPOLOGY: "network.topology.nvidia.com/leaf",
                W.ANNO_KUEUE_PREFERRED_TOPOLOGY: "network.topology.nvidia.com/spine",
            },
            "disagree",
        ),
        (
            {W.ANNO_HIGHEST_TIER_ALLOWED: "2", W.ANNO_KAI_REQUIRED_PLACEMENT: "network.topology.nvidia.com/leaf"},
            "disagree",
        ),
    ],
)
def test_pod_bad_annotations_are_conversion_errors(annotations: dict[str, str], says: str) -> None:
    cache = _cache([b.pod("solo", annotations=annotations)])
    err = cache.conversion_errors["Pod/default/solo"]
    assert says in err and "solo" in err
    assert "default/solo" not in cache.jobs


def test_podgroup_wins_over_pods_and_pods_give_the_tightest_limit() -> None:
    soft_spine = {W.ANNO_HIGHEST_TIER_ALLOWED: "spine"}
    hard_leaf = {W.ANNO_HIGHEST_TIER_ALLOWED: "leaf", W.ANNO_TOPOLOGY_MODE: "hard"}
    soft_leaf = {W.ANNO_HIGHEST_TIER_ALLOWED: "leaf"}
    pods = [
        b.pod("train-0", group="train", annotations=soft_spine),
        b.pod("train-1", group="train", annotations=soft_leaf),
    ]
    cache = _cache([b.podgroup("train", min_member=2), *pods])
    assert _limit(cache) == (1, "soft")
    hard_pod = b.pod("train-2", group="train", annotations=hard_leaf)
    cache.on_pod_add(hard_pod)
    assert _limit(cache) == (1, "hard")
    # a PodGroup that names a tier wins over every pod; one that names none leaves them in charge
    cache.on_podgroup_update({}, _pg({}, {"highestTierAllowed": "core"}))
    assert _limit(cache) == (3, "soft")
    cache.on_podgroup_update({}, _pg({}, {"strictOrder": True}))
    assert _limit(cache) == (1, "hard")
    # the hard pod goes: the limit relaxes with it
    cache.on_pod_delete(hard_pod)
    assert _limit(cache) == (1, "soft")


def test_tier_names_and_spans() -> None:
    assert [topology.describe_tier(lv) for lv in range(6)] == ["nvlink", "leaf", "spine", "core", "tier-4", "tier-5"]
    assert all(topology.parse_tier(name) == lv for name, lv in topology.TIER_NAMES.items())
    for level in range(4):
        assert topology.parse_tier(topology.describe_tier(level)) == level
    rows = [("nvl1", "s1", "sp1", "c1"), ("nvl2", "s1", "sp1", "c1"), ("", "s2", "sp1", "c1")]
    assert topology.spanned_tier(rows[:1]) == 0
    assert topology.spanned_tier(rows[:2]) == 1
    assert topology.spanned_tier(rows) == 2
    assert topology.spanned_tier([*rows, ("", "s9", "sp9", "c1")]) == 3
    assert topology.spanned_tier([("", "s1"), ("", "s2")]) is None  # no spine known: the cluster
    assert topology.spanned_tier([("", "s1"), ()]) is None
    assert topology.spanned_tier([]) is None


def test_a_deleted_unreadable_pod_takes_its_error_with_it() -> None:
    """The cache keeps why a pod of ours could not be read (the filter and /diagnose say it) only
    while the pod exists: deleted, nothing is said of it any more (it was kept for ever)."""
    bad = b.pod("solo", annotations={W.ANNO_HIGHEST_TIER_ALLOWED: "rack"})
    cache = _cache([bad])
    assert cache.pod_problem("default", "solo") is not None
    cache.on_pod_delete(bad)
    assert cache.pod_problem("default", "solo") is None and cache.conversion_errors == {}


@pytest.mark.parametrize("scheduler", ["default-scheduler", wellknown.SCHEDULER_NAME])
def test_a_running_pod_with_a_foreign_topology_annotation_still_uses_its_node(scheduler: str) -> None:
    """A pod Kueue placed with the stock scheduler (``podset-required-topology`` naming a label
    this scheduler is not configured with) runs on n0 with all its 8 GPUs: its annotation says
    nothing to us about where it goes — it is there — so it is counted in n0's ledger like any
    pod. Before, its conversion failed on the annotation and the pod was left out: n0 looked
    idle and the extender placed pods onto GPUs in use."""
    kueue = {W.ANNO_KUEUE_REQUIRED_TOPOLOGY: "cloud.google.com/gce-topology-block"}
    running = b.pod("theirs", gpu=8, hca=None, node="n0", phase="Running", annotations=kueue, scheduler=scheduler)
    cache = _cache([b.node("n0"), running])
    assert cache.conversion_errors == {}
    node = cache.snapshot().nodes["n0"]
    assert node.idle.get(W.RESOURCE_GPU) == 0
