"""The floors of bench/binder_cycle.py: a minimal per-gang greedy on a real snapshot (objects built by
tests/builders, through the real conversion and cache), capacity only and with the configured
policy's stages. Hand-checked placements; both floors must give them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bench.binder_cycle import launcher
from bench.greedy_floor import greedy_floor, policy_floor
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.framework.session import Snapshot
from tests import builders as b

Floor = Callable[[Snapshot], dict[str, str]]
FLOORS = [
    pytest.param(greedy_floor, id="capacity"),
    pytest.param(lambda snap: policy_floor(snap, default_policy()), id="policy"),
]


def cache_of(objs: list[dict[str, Any]]) -> ClusterCache:
    cache = ClusterCache(clock=lambda: 1_800_000_000.0)
    b.feed(cache, objs)
    assert not cache.conversion_errors, cache.conversion_errors
    return cache


def two_leaves(models: tuple[str, str] = ("A100", "A100")) -> list[dict[str, Any]]:
    """Leaf s1 = n0–n3, leaf s2 = n4–n7, 8 GPUs each."""
    objs = []
    for n in range(8):
        objs.append(b.node(f"n{n}", gpu_model=models[n // 4], index=n))
        objs.append(b.topology(f"n{n}", [f"s{n // 4 + 1}"]))
    return objs


def bound_quota(name: str, node: str, gpu: int = 8) -> dict[str, Any]:
    return b.quota(name, gpu=gpu, hca=1, status={"phase": "QuotaBound", "nodeName": node})


@pytest.mark.parametrize("floor", FLOORS)
def test_a_gang_that_fits_one_leaf_takes_distinct_nodes_in_rank_order(floor: Floor) -> None:
    cache = cache_of(two_leaves() + b.training_job("train", 4, quota_prefix="q-train"))
    assert floor(cache.snapshot()) == {f"q-train-{i}": f"n{i}" for i in range(4)}


@pytest.mark.parametrize("floor", FLOORS)
def test_best_fit_takes_the_leaf_with_the_least_room_that_holds_the_gang(floor: Floor) -> None:
    objs = [*two_leaves(), bound_quota("busy", "n0"), *b.training_job("j", 3, gpu=8, quota_prefix="q")]
    cache = cache_of(objs)
    assert floor(cache.snapshot()) == {"q-0": "n1", "q-1": "n2", "q-2": "n3"}


@pytest.mark.parametrize("floor", FLOORS)
def test_no_leaf_holds_it_the_fewest_leaves_largest_first(floor: Floor) -> None:
    objs = [*two_leaves(), bound_quota("busy", "n0"), *b.training_job("j", 6, gpu=8, quota_prefix="q")]
    got = floor(cache_of(objs).snapshot())
    # s2 has 4 free nodes, s1 three: s2 first, then two of s1 in index order
    assert got == {"q-0": "n4", "q-1": "n5", "q-2": "n6", "q-3": "n7", "q-4": "n1", "q-5": "n2"}


@pytest.mark.parametrize("floor", FLOORS)
def test_zones_never_mix_gpu_models(floor: Floor) -> None:
    cache = cache_of(two_leaves(("A100", "H100")) + b.training_job("j", 6, gpu=8, quota_prefix="q"))
    assert floor(cache.snapshot()) == {}


@pytest.mark.parametrize("floor", FLOORS)
def test_workers_share_nodes_only_when_the_leaf_has_too_few(floor: Floor) -> None:
    objs = [*two_leaves()[:8], *b.training_job("j", 6, gpu=4, quota_prefix="q")]  # leaf s1 only
    got = floor(cache_of(objs).snapshot())
    # 6 workers of 4 GPUs on 4 nodes: n0 and n1 take two each (one per node per pass), and the
    # ranks ascend with the node index: consecutive ranks share a node
    assert got == {"q-0": "n0", "q-1": "n0", "q-2": "n1", "q-3": "n1", "q-4": "n2", "q-5": "n3"}


@pytest.mark.parametrize("floor", FLOORS)
def test_gangs_go_in_creation_order_and_one_that_does_not_fit_is_skipped_whole(floor: Floor) -> None:
    big = b.training_job("big", 9, gpu=8, quota_prefix="big")  # 9 nodes: there are 8
    small = b.training_job("small", 2, gpu=8, quota_prefix="small")
    for o in small:
        o["metadata"]["creationTimestamp"] = "2026-11-29T09:00:00Z"
    got = floor(cache_of(two_leaves() + big + small).snapshot())
    assert got == {"small-0": "n0", "small-1": "n1"}


@pytest.mark.parametrize("floor", FLOORS)
def test_it_does_not_change_the_cache(floor: Floor) -> None:
    cache = cache_of(two_leaves() + b.training_job("j", 4, gpu=8, quota_prefix="q"))
    before = {n: c.ledger_state() for n, c in cache.nodes.items()}
    assert len(floor(cache.snapshot())) == 4
    assert {n: c.ledger_state() for n, c in cache.nodes.items()} == before
    assert all(not q.node_name for q in cache.quotas.values())


def test_the_policy_floor_keeps_off_a_node_the_policy_refuses() -> None:
    objs = two_leaves()
    objs[0] = b.node("n0", gpu_model="A100", index=0, unschedulable=True)
    cache = cache_of([*objs, *b.training_job("j", 4, gpu=8, quota_prefix="q")])
    # capacity alone fits s1 (n0–n3); the predicates refuse the cordoned n0, so the policy floor
    # takes the other leaf whole
    assert greedy_floor(cache.snapshot()) == {f"q-{i}": f"n{i}" for i in range(4)}
    assert policy_floor(cache.snapshot(), default_policy()) == {f"q-{i}": f"n{i + 4}" for i in range(4)}


@pytest.mark.parametrize("floor", FLOORS)
@pytest.mark.parametrize(
    ("workers", "placed"),
    [(1, {"q-b-0": "n0"}), (3, {"q-b-0": "n4", "q-b-1": "n5", "q-b-2": "n6"})],
)
def test_a_launcher_is_placed_as_its_largest_sibling_but_gives_away_only_its_own_request(
    floor: Floor, workers: int, placed: dict[str, str]
) -> None:
    """An MPIJob (``binder_cycle --launchers``): a GPU-less launcher (rank 0) and three 8-GPU
    workers take one leaf, n0–n3, each as large as the largest (a sound fit); n0 keeps its GPUs
    and n1–n3 have none left, so a later one-worker gang fits s1, the leaf with the least room,
    on n0, and a three-worker gang only s2."""
    mpi = launcher(b.training_job("a", 3, gpu=8), "a")
    cache = cache_of([*two_leaves(), *mpi, *b.training_job("b", workers, gpu=8)])
    first = {"q-a-launcher": "n0", "q-a-0": "n1", "q-a-1": "n2", "q-a-2": "n3"}
    assert floor(cache.snapshot()) == first | placed
