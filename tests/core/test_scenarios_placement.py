"""Scenarios: the seed example and what follows it — workers on one leaf in rank order, packing,
gangs spanning leaves, and never mixing GPU models."""

from __future__ import annotations

from typing import Any

import pytest

from extender.framework.intents import BindQuota
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.scenarios import (
    GPU,
    HCA,
    NOW,
    POLICY,
    binds,
    bound,
    cycle,
    make_cache,
    node_of,
    write_back,
)


def test_seed_example_four_workers_land_on_one_leaf_in_rank_order() -> None:
    cache = make_cache(b.seed_cluster() + b.training_job("train", 4, quota_prefix="q-train"))
    before = {n: c.ledger_state() for n, c in cache.nodes.items()}
    result = cycle(cache)
    assert bound(result) == {"q-train-0": "n0", "q-train-1": "n1", "q-train-2": "n2", "q-train-3": "n3"}
    # one intent per binding, in rank order; nothing else is written
    assert result.intents == [BindQuota(f"q-train-{i}", f"n{i}") for i in range(4)]
    assert result.verdicts == {}
    for i in range(4):  # seed 2.8: quota_idle 7,7 on n0–n3; the pod ledger does not move at hop ②
        n = node_of(result, f"n{i}")
        assert n.quota_idle.get(GPU) == 7000 and n.quota_idle.get(HCA) == 7000
        assert n.idle.get(GPU) == 8000
        assert set(n.quota_allocated) == {f"q-train-{i}"}
    for i in range(4, 8):
        assert node_of(result, f"n{i}").quota_allocated == {}
    assert {n: c.ledger_state() for n, c in cache.nodes.items()} == before  # the cache is untouched


def test_a_second_four_worker_job_packs_into_the_same_leaf() -> None:
    """After the seed job holds one GPU on each of n0–n3, a second identical job also goes to
    leaf s1, n0–n3: both leaves can hold it whole, and namedzone's best fit prefers the zone with
    the least free room (keeping s2 whole for a bigger gang)."""
    cache = make_cache(b.seed_cluster() + b.training_job("train", 4, quota_prefix="q-train"))
    sched = Scheduler(POLICY)
    write_back(cache, cycle(cache, sched))
    assert {n: q.node_name for n, q in cache.quotas.items()} == {f"q-train-{i}": f"n{i}" for i in range(4)}
    b.feed(cache, b.training_job("second", 4))
    result = cycle(cache, sched, NOW + 1)
    assert binds(result) == {f"q-second-{i}": f"n{i}" for i in range(4)}
    for i in range(4):
        n = node_of(result, f"n{i}")
        assert n.quota_idle.get(GPU) == 6000
        assert set(n.quota_allocated) == {f"q-train-{i}", f"q-second-{i}"}
    assert result.verdicts == {}


def test_a_gang_of_five_whole_node_workers_spans_exactly_two_leaves() -> None:
    cache = make_cache(b.seed_cluster() + b.training_job("big", 5, gpu=8, hca=8))
    result = cycle(cache)
    placed = binds(result)
    assert len(placed) == 5
    assert len(set(placed.values())) == 5  # one whole-node quota per node
    leaves = {cache.nodes[n].zone for n in placed.values()}
    assert leaves == {"roce#s1", "roce#s2"}
    assert placed == {f"q-big-{i}": f"n{i}" for i in range(5)}  # all of s1, then the first node of s2
    for n in placed.values():
        assert node_of(result, n).quota_idle.get(GPU) == 0


def mixed_cluster() -> list[dict[str, Any]]:
    """Two leaves; on each leaf two A100 nodes and two H100 nodes (same switch, different GPUs)."""
    objs: list[dict[str, Any]] = []
    for leaf in range(2):
        for i in range(4):
            n = leaf * 4 + i
            objs.append(b.node(f"n{n}", gpu_model="A100" if i < 2 else "H100"))
            objs.append(b.topology(f"n{n}", [f"s{leaf + 1}"]))
    return objs


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_a_job_never_mixes_gpu_models_even_on_one_switch(workers: int) -> None:
    cache = make_cache(mixed_cluster() + b.training_job("mix", workers, gpu=8, hca=8))
    result = cycle(cache)
    placed = binds(result)
    assert len(placed) == workers, result.verdicts
    models = {cache.nodes[n].labels["nvidia.com/gpu.product"] for n in placed.values()}
    assert len(models) == 1
    zones = {cache.nodes[n].zone for n in placed.values()}
    # one leaf would hold 3–4 nodes of mixed models; one model per leaf holds only 2
    assert len(zones) == (1 if workers <= 2 else 2)


def test_a_job_asking_for_a_model_gets_only_that_model() -> None:
    objs = [*mixed_cluster(), b.podgroup("h", min_member=2)]
    for i in range(2):
        objs.append(b.quota(f"q-h-{i}", gpu=8, hca=8, node_selector={"nvidia.com/gpu.product": "H100"}))
        objs.append(b.pod(f"h-{i}", group="h", quota=f"q-h-{i}", gpu=8, hca=8, index=i))
    result = cycle(make_cache(objs))
    assert binds(result) == {"q-h-0": "n2", "q-h-1": "n3"}
