"""Gang plans a cluster operator would call wrong, each as a small cluster through ``run_once``
(issue 16 items 1–3): found by the oracle of ``test_topology_property.py``, kept as regressions."""

from __future__ import annotations

from typing import Any

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.status import Reason
from extender.scheduler import CycleResult, Scheduler
from tests import builders as b
from tests.core.scenarios import quota_node

NOW = 1_800_000_000.0
Obj = dict[str, Any]


def cycle(objs: list[Obj]) -> CycleResult:
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, [b.queue("research"), *objs])
    assert not cache.conversion_errors, cache.conversion_errors
    return Scheduler(default_policy()).run_once(cache.snapshot(NOW))


def nodes_of(result: CycleResult, job: str, size: int) -> list[str]:
    return [quota_node(result.session, f"q-{job}-{i}") for i in range(size)]


def leaf(first: int, count: int, switch: str, model: str = "A100") -> list[Obj]:
    return [
        o
        for i in range(first, first + count)
        for o in (b.node(f"n{i}", gpu_model=model), b.topology(f"n{i}", [switch]))
    ]


def busy(node: str, gpu: int = 8) -> list[Obj]:
    """A node's GPUs held by another job's quota, its pod running."""
    q = f"busy-{node}"
    anno = {wellknown.ANNO_QUEUE_NAME: "research"}
    return [
        b.quota(q, gpu=gpu, hca=None, status={"phase": "QuotaBound", "nodeName": node}),
        b.pod(q, quota=q, gpu=gpu, hca=None, node=node, phase="Running", annotations=anno),
    ]


def partly_bound(job: str, size: int, bound: dict[int, str], *, strict: bool = False) -> list[Obj]:
    """A gang of ``size`` 8-GPU RDMA workers whose quotas ``bound`` (task index → node) were
    bound in an earlier cycle; its pods all wait."""
    objs: list[Obj] = [b.podgroup(job, min_member=size)]
    anno = {wellknown.ANNO_ENABLE_TOPOLOGY: "true"} if strict else None
    for i in range(size):
        status = {"phase": "QuotaBound", "nodeName": bound[i]} if i in bound else None
        objs.append(b.quota(f"q-{job}-{i}", gpu=8, hca=1, status=status))
        objs.append(b.pod(f"{job}-{i}", group=job, quota=f"q-{job}-{i}", gpu=8, hca=1, index=i, annotations=anno))
    return objs


def test_an_rdma_gang_runs_with_its_min_member_when_it_does_not_fit_whole() -> None:
    """4 × 8 GPU, minMember 2, on two empty nodes: the same job without ``rdma/hca`` runs two
    workers at once; so does the RDMA one (ranks 0 and 1), and the other two wait, saying why."""
    result = cycle(leaf(0, 2, "s1") + b.training_job("j", 4, gpu=8, min_member=2))
    assert nodes_of(result, "j", 4) == ["n0", "n1", "", ""]
    verdict = result.verdicts["default/j"]
    assert verdict.quota == "q-j-2" and verdict.status.reason is Reason.NO_ZONE_FITS, verdict


def test_an_rdma_gang_with_quotas_for_its_min_member_only_is_placed() -> None:
    """Hop ① let the gang through with quotas for two of its four workers (minMember 2, the
    queue has no more): hop ② places those two, as it does for a job without RDMA."""
    objs = leaf(0, 4, "s1") + b.training_job("j", 4, gpu=8, min_member=2)
    objs = [o for o in objs if o["metadata"]["name"] not in ("q-j-2", "q-j-3")]
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"] in ("j-worker-2", "j-worker-3"):
            del o["metadata"]["annotations"][wellknown.ANNO_QUOTA_NAME]
    result = cycle(objs)
    assert nodes_of(result, "j", 2) == ["n0", "n1"]


def test_one_zone_is_best_fit_whatever_its_gpu_model() -> None:
    """A gang of 2 × 8 GPU asking for no GPU model: leaf s1 (A100, one node of four busy) has room
    for 3, leaf s2 (H100) for exactly 2. Best fit takes s2, as it does when s2 is A100 too."""
    for model in ("H100", "A100"):
        result = cycle(leaf(0, 4, "s1") + busy("n0") + leaf(4, 2, "s2", model) + b.training_job("j", 2, gpu=8))
        assert nodes_of(result, "j", 2) == ["n4", "n5"], model


def test_a_partly_bound_gang_fills_its_siblings_zone_before_another() -> None:
    """Rank 0 is bound on n0 (leaf s1, where n1 is free); ranks 1 and 2 need two more nodes: one
    in s1 (n1), then one in the fewest further zones (s2), not both in the roomier s2."""
    result = cycle(leaf(0, 2, "s1") + leaf(2, 4, "s2") + partly_bound("j", 3, {0: "n0"}))
    nodes = nodes_of(result, "j", 3)
    assert nodes[:2] == ["n0", "n1"] and nodes[2] in {"n2", "n3", "n4", "n5"}, nodes


def test_a_strict_gang_partly_bound_is_placed_in_rank_order_around_its_bound_quota() -> None:
    """Rank 0 of a strict-order gang is bound on n2; ranks 1 and 2 must sit on node index ≥ 2.
    n0 and n1 are free but come first: the gang takes n3 and n4 instead of failing its order
    check every cycle."""
    result = cycle(leaf(0, 6, "s1") + partly_bound("j", 3, {0: "n2"}, strict=True))
    assert nodes_of(result, "j", 3) == ["n2", "n3", "n4"]


def test_a_strict_gang_whose_bound_quota_leaves_no_room_in_order_waits_and_says_so() -> None:
    """Rank 1 is bound on n0, the lowest index: rank 0 must sit on n0 too, which is full."""
    result = cycle(leaf(0, 3, "s1") + partly_bound("j", 2, {1: "n0"}, strict=True))
    assert nodes_of(result, "j", 2) == ["", "n0"]
    assert result.verdicts["default/j"].status.reason is Reason.TOPOLOGY_ORDER


def partly_bound_mixed(job: str, gpus: list[int], bound: dict[int, str], *, strict: bool = False) -> list[Obj]:
    """A gang of RDMA quotas of ``gpus`` GPUs each (task order: a launcher beside workers) whose
    quotas ``bound`` (task index → node) were bound in an earlier cycle; its pods all wait."""
    objs: list[Obj] = [b.podgroup(job, min_member=len(gpus))]
    anno = {wellknown.ANNO_ENABLE_TOPOLOGY: "true"} if strict else None
    for i, gpu in enumerate(gpus):
        status = {"phase": "QuotaBound", "nodeName": bound[i]} if i in bound else None
        objs.append(b.quota(f"q-{job}-{i}", gpu=gpu, hca=1, status=status))
        objs.append(b.pod(f"{job}-{i}", group=job, quota=f"q-{job}-{i}", gpu=gpu, hca=1, index=i, annotations=anno))
    return objs


def test_a_strict_mixed_gang_partly_bound_is_placed_in_rank_order_around_its_bound_quota() -> None:
    """A launcher (1 GPU, rank 0) and three 8-GPU workers; worker rank 1 is bound on n2. The
    launcher must sit on node index ≤ 2, ranks 2 and 3 on ≥ 2 (n2 is full): n3 and n4. n0 and n1
    are free and come first, yet a worker there would fail the order check every cycle."""
    result = cycle(leaf(0, 6, "s1") + partly_bound_mixed("j", [1, 8, 8, 8], {1: "n2"}, strict=True))
    nodes = nodes_of(result, "j", 4)
    assert nodes[1:] == ["n2", "n3", "n4"] and nodes[0] in {"n0", "n1", "n2"}, (nodes, result.verdicts.get("default/j"))


def test_a_strict_mixed_gang_whose_bound_quotas_leave_no_room_in_order_waits_and_says_so() -> None:
    """Ranks 0 and 3 (8 GPUs each) are bound on n3 and n5: ranks 1 (1 GPU) and 2 (8 GPUs) must
    both sit on n4, which holds 8. The gang fits n0–n2 in any order, so it waits for its order."""
    gang = partly_bound_mixed("j", [8, 1, 8, 8], {0: "n3", 3: "n5"}, strict=True)
    result = cycle(leaf(0, 3, "s1") + leaf(3, 3, "s2") + gang)
    assert nodes_of(result, "j", 4) == ["n3", "", "", "n5"]
    assert result.verdicts["default/j"].status.reason is Reason.TOPOLOGY_ORDER


def test_a_strict_mixed_gang_partly_bound_that_fits_in_no_order_waits_for_room() -> None:
    """Rank 1 is bound on n1; ranks 0 and 2 (8 GPUs each) find one free node (n0 and n1 hold 8 GPUs
    between them: n1 is taken by rank 1's 8, n2 by another job). No order would do: NoZoneFits."""
    gang = partly_bound_mixed("j", [8, 8, 1], {1: "n1"}, strict=True)
    result = cycle(leaf(0, 3, "s1") + busy("n2", 8) + busy("n0", 4) + gang)
    assert nodes_of(result, "j", 3) == ["", "n1", ""]
    assert result.verdicts["default/j"].status.reason is Reason.NO_ZONE_FITS


def test_a_gang_s_statically_bound_quota_goes_to_its_node_and_the_gang_beside_it() -> None:
    """A gang of two whose rank 0 claims a quota pinned to n5 (``spec.staticBindNode``), not yet
    bound: the gang plan reaches it before ``allocate_quota`` pins it, and must put it on n5 too
    (it went to n0, the lowest index); rank 1 then goes beside it, in n5's leaf."""
    objs = [
        *b.seed_cluster(),
        b.quota("q-pin", gpu=8, hca=8, static_bind_node="n5"),
        b.quota("q-free", gpu=8, hca=8),
        b.podgroup("g", min_member=2),
        b.pod("g-worker-0", group="g", quota="q-pin", gpu=8, hca=8, index=0),
        b.pod("g-worker-1", group="g", quota="q-free", gpu=8, hca=8, index=1),
    ]
    result = cycle(objs)
    got = {q: quota_node(result.session, q) for q in ("q-pin", "q-free")}
    assert got == {"q-pin": "n5", "q-free": "n6"}
