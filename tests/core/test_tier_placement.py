"""Placement in the lowest tier that holds a gang (issue 17 item 4): one NVLink domain, else one
leaf, else leaves under one spine, else the cluster — through ``run_once``, with tiers read from
node labels (NVIDIA Topograph's and the GPU operator's)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.props import PROPERTY
from tests.core.scenarios import quota_node

NOW = 1_800_000_000.0
LEAF, SPINE, CLIQUE = "network.topology.nvidia.com/leaf", "network.topology.nvidia.com/spine", "nvidia.com/gpu.clique"


def place(objs: list[dict[str, Any]], job: str, workers: int, gpu: int = 8) -> list[str]:
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, [b.queue("research"), *objs, *b.training_job(job, workers, gpu=gpu, hca=1)])
    assert not cache.conversion_errors
    ssn = Scheduler(default_policy()).run_once(cache.snapshot(NOW)).session
    return [quota_node(ssn, f"q-{job}-{i}") for i in range(workers)]


def busy(node: str, gpu: int = 8) -> list[dict[str, Any]]:
    """A whole node (or ``gpu`` GPUs of it) held by another queue's quota, bound by another
    controller (the scheduler would give an idle quota of its own back before it plans)."""
    status = {"phase": "QuotaBound", "nodeName": node, "boundBy": None}
    return [b.quota(f"busy-{node}", queue="ops", gpu=gpu, hca=None, status=status)]


def labelled(name: str, index: int, **labels: str) -> dict[str, Any]:
    return b.node(name, index=index, labels=labels)


def test_a_gang_no_leaf_holds_takes_two_leaves_of_one_spine_not_emptier_leaves_of_two() -> None:
    """s1, s2 (spine sp1) are empty; s3 (sp2) and s4 (sp3) have one free node each. Without the
    spine tier the fewest-zones rule would break only one empty leaf ({s1, s3}); with it the gang
    stays under sp1."""
    objs: list[dict[str, Any]] = []
    layout = [("s1", "sp1"), ("s1", "sp1"), ("s2", "sp1"), ("s2", "sp1"), ("s3", "sp2"), ("s3", "sp2"), ("s4", "sp3")]
    layout.append(("s4", "sp3"))
    for i, (leaf, spine) in enumerate(layout):
        objs.append(labelled(f"n{i}", i, **{LEAF: leaf, SPINE: spine}))
    objs += busy("n4") + busy("n6")
    nodes = place(objs, "wide", 3)
    assert set(nodes) <= {"n0", "n1", "n2", "n3"} and len(set(nodes)) == 3, nodes


def test_topograph_labels_alone_drive_placement() -> None:
    """No NodeTopology, no agent of ours: the leaf label makes the zones."""
    objs = [labelled(f"n{i}", i, **{LEAF: "l1" if i < 3 else "l2"}) for i in range(5)]
    nodes = place(objs, "pair", 2)
    assert set(nodes) <= {"n3", "n4"}, nodes  # best fit: l2 holds exactly two, l1 stays whole


def test_a_gang_inside_one_nvlink_domain_needs_no_rdma_hop() -> None:
    objs = [b.node("n0", index=0), b.node("n1", index=1)]
    objs += [labelled("n2", 2, **{CLIQUE: "c1"}), labelled("n3", 3, **{CLIQUE: "c1"})]
    for i in range(4):
        objs.append(b.topology(f"n{i}", ["s1"]))
    assert place(objs, "pair", 2) == ["n2", "n3"]


@st.composite
def fabrics(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, tuple[str, str]], dict[str, int], int, int]:
    """≤ 8 nodes in ≤ 4 leaves under ≤ 2 spines, some GPUs already held; one gang to place."""
    objs: list[dict[str, Any]] = []
    where: dict[str, tuple[str, str]] = {}
    free: dict[str, int] = {}
    n = 0
    for leaf in range(draw(st.integers(1, 4))):
        spine = f"sp{draw(st.integers(1, 2))}"
        for _ in range(draw(st.integers(1, 2))):
            name = f"n{n}"
            objs.append(labelled(name, n, **{LEAF: f"s{leaf}", SPINE: spine}))
            used = draw(st.sampled_from([0, 0, 4, 8]))
            if used:
                objs += busy(name, used)
            where[name], free[name] = (f"s{leaf}", spine), 8 - used
            n += 1
    return objs, where, free, draw(st.integers(1, 6)), draw(st.sampled_from([2, 4, 8]))


def lowest_span(where: dict[str, tuple[str, str]], free: dict[str, int], workers: int, gpu: int) -> int | None:
    """The exhaustive oracle: 1 if one leaf holds the gang, 2 if the leaves of one spine do, 3 if
    only the whole cluster does, None if nothing does."""
    slots = {n: f // gpu for n, f in free.items()}
    for level in (0, 1):
        units: dict[str, int] = {}
        for node, tiers in where.items():
            units[tiers[level]] = units.get(tiers[level], 0) + slots[node]
        if any(v >= workers for v in units.values()):
            return level + 1
    return 3 if sum(slots.values()) >= workers else None


@PROPERTY
@given(fabrics())
def test_the_highest_tier_spanned_is_the_lowest_possible(case: Any) -> None:
    objs, where, free, workers, gpu = case
    nodes = place(objs, "g", workers, gpu)
    best = lowest_span(where, free, workers, gpu)
    if best is None:
        assert not any(nodes), nodes
        return
    assert all(nodes), f"fits (span {best}) but not placed"
    leaves = {where[n][0] for n in nodes}
    spines = {where[n][1] for n in nodes}
    span = 1 if len(leaves) == 1 else (2 if len(spines) == 1 else 3)
    assert span == best, (nodes, span, best)


def test_a_hard_leaf_limit_keeps_a_gang_that_fits_only_across_leaves_waiting() -> None:
    from extender.framework.status import Reason

    objs: list[dict[str, Any]] = [b.queue("research")]
    for i in range(4):
        objs += [b.node(f"n{i}", index=i), b.topology(f"n{i}", ["s1" if i < 2 else "s2"])]
    job = b.training_job("wide", 3, gpu=8, hca=1)
    for o in job:
        if o["kind"] == "PodGroup":
            o["spec"]["topology"] = {"highestTierAllowed": "leaf", "mode": "hard"}
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs + job)
    assert not cache.conversion_errors
    result = Scheduler(default_policy()).run_once(cache.snapshot(NOW))
    assert not any(quota_node(result.session, f"q-wide-{i}") for i in range(3))
    status = result.verdicts["default/wide"].status
    assert status.reason is Reason.FITS_ONLY_ABOVE_ALLOWED_TIER, status.message()
    assert "highestTierAllowed is leaf" in status.message()
    # soft (the default): the same gang runs across the two leaves
    for o in job:
        if o["kind"] == "PodGroup":
            o["spec"]["topology"] = {"highestTierAllowed": "leaf"}
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs + job)
    ssn = Scheduler(default_policy()).run_once(cache.snapshot(NOW)).session
    assert all(quota_node(ssn, f"q-wide-{i}") for i in range(3))


def test_a_hard_leaf_limit_counts_the_leaf_of_the_gangs_bound_quotas() -> None:
    """Leaves s1 (n0, n1) and s2 (n2, n3); ``g`` (two whole-node workers, kept hard to one leaf)
    has rank 0 bound on n0, and another queue's quota fills n1. Rank 1 fits only in s2: the
    gang would then span two leaves, so it waits (``FitsOnlyAboveAllowedTier``) — the limit is
    the gang's, its bound quotas included, not that of the zones its rest would take."""
    from extender.framework.status import Reason

    objs: list[dict[str, Any]] = [b.queue("research"), *busy("n1")]
    for i in range(4):
        objs += [b.node(f"n{i}", index=i), b.topology(f"n{i}", ["s1" if i < 2 else "s2"])]
    objs.append(b.podgroup("g", min_member=2, topology={"highestTierAllowed": "leaf", "mode": "hard"}))
    for i in range(2):
        status = {"phase": "QuotaBound", "nodeName": "n0"} if i == 0 else None
        objs += [
            b.quota(f"q-g-{i}", gpu=8, status=status),
            b.pod(f"g-{i}", group="g", quota=f"q-g-{i}", gpu=8, index=i),
        ]
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    result = Scheduler(default_policy()).run_once(cache.snapshot(NOW))
    assert quota_node(result.session, "q-g-1") == ""
    verdict = result.verdicts["default/g"].status
    assert verdict.reason is Reason.FITS_ONLY_ABOVE_ALLOWED_TIER, verdict.message()
