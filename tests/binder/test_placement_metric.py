"""``sky_gang_placements_total{tier}``: the real binder loop against the emulator counts each job
once, when its binds commit, under the highest tier its nodes span (NodeTopology ``spec.tiers``)."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from extender.binder.placements import placement_tier
from extender.simulate.cluster import LocalCluster
from tests import builders as b

pytestmark = pytest.mark.anyio


def _cluster() -> list[dict[str, Any]]:
    """Leaves s1 = n0–n3 and s2 = n4–n7, both under spine sp1 (as our IB collector writes it)."""
    objs = b.seed_cluster()
    for o in objs:
        if o["kind"] == "NodeTopology":
            leaf = o["spec"]["net"]["roce"][0]["switchName"]
            o["spec"]["tiers"] = [{"level": 1, "name": leaf}, {"level": 2, "name": "sp1"}]
    return [*objs, b.queue("research")]


def _placements(cl: LocalCluster) -> dict[str, float]:
    text = cl.rt.metrics.render().decode()
    return {
        s.labels["tier"]: s.value
        for fam in text_string_to_metric_families(text)
        if fam.name == "sky_gang_placements"
        for s in fam.samples
        if s.name == "sky_gang_placements_total"
    }


async def test_placements_are_counted_once_by_the_tier_they_span() -> None:
    async with LocalCluster() as cl:
        cl.apply(_cluster() + b.training_job("one", 1, gpu=8, hca=8))
        await cl.settle()
        await cl.cycle()
        assert _placements(cl) == {"node": 1.0}
        await cl.cycle()  # nothing new placed: nothing new counted
        assert _placements(cl) == {"node": 1.0}
        cl.apply(b.training_job("four", 4, gpu=8, hca=8))  # a leaf with 4 free whole nodes holds it
        await cl.settle()
        await cl.cycle()
        leaves = {"n0": "s1", "n1": "s1", "n2": "s1", "n3": "s1"}
        four = {cl.quota_nodes()[f"q-four-{i}"] for i in range(4)}
        assert len({leaves.get(n, "s2") for n in four}) == 1
        assert _placements(cl) == {"node": 1.0, "leaf": 1.0}
        cl.apply(b.training_job("wide", 3, gpu=8, hca=8))  # 3 whole nodes left, all in the other leaf
        await cl.settle()
        await cl.cycle()
        assert _placements(cl) == {"node": 1.0, "leaf": 2.0}
    async with LocalCluster() as cl:  # a gang no leaf holds spans the spine
        cl.apply(_cluster() + b.training_job("five", 5, gpu=8, hca=8))
        await cl.settle()
        await cl.cycle()
        assert len(set(cl.quota_nodes().values())) == 5
        assert _placements(cl) == {"spine": 1.0}


def test_placement_tier_labels() -> None:
    tiers = {"a": ("", "s1", "sp1"), "b": ("", "s2", "sp1"), "c": ("", "s3", "sp2"), "d": ("", "s1", "sp1")}
    assert placement_tier(["a", "a"], tiers.__getitem__) == "node"
    assert placement_tier(["a", "d"], tiers.__getitem__) == "leaf"
    assert placement_tier(["a", "b"], tiers.__getitem__) == "spine"
    assert placement_tier(["a", "c"], tiers.__getitem__) == "cluster"
