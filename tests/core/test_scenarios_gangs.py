"""Scenarios: a gang that cannot fit binds nothing, and its verdict says why."""

from __future__ import annotations

import pytest

from extender import wellknown
from extender.framework.intents import BindQuota
from extender.framework.session import FitStage
from extender.framework.status import summarize
from tests import builders as b
from tests.core.scenarios import (
    GPU,
    binds,
    cycle,
    make_cache,
    node_of,
    three_free_nodes,
)


@pytest.mark.parametrize("topology", [True, False], ids=["rdma-gang", "plain-gang"])
def test_a_gang_of_four_where_only_three_nodes_fit_binds_nothing(topology: bool) -> None:
    cache = make_cache(three_free_nodes(topology))
    result = cycle(cache)
    assert not [i for i in result.intents if isinstance(i, BindQuota)]
    assert all(not q.node_name for name, q in result.quotas.items() if name.startswith("q-four"))
    for i in range(5, 8):  # discarded: the free nodes are as free as before
        assert node_of(result, f"n{i}").quota_idle.get(GPU) == 8000
    verdict = result.verdicts["default/four"]
    assert not verdict.status.ok
    assert verdict.stage in (FitStage.GANG, FitStage.ZONE_SELECTION, FitStage.NODE_PREDICATES)


@pytest.mark.parametrize("topology", [True, False], ids=["rdma-gang", "plain-gang"])
def test_the_verdict_of_a_gang_that_cannot_fit_says_why(topology: bool) -> None:
    """The user must read *why*: no zone holds 4 whole nodes (topology), or which nodes refuse
    the 4th quota and why (``5 nodes: InsufficientQuotaIdle(nvidia.com/gpu 8 > 4)``)."""
    result = cycle(make_cache(three_free_nodes(topology)))
    verdict = result.verdicts["default/four"]
    if topology:
        assert verdict.stage is FitStage.ZONE_SELECTION
        assert verdict.status.message() == "NoZoneFits(no zone holds 4×8 GPU: the roomiest, roce#s2, takes 3 of 4)"
    else:
        # the first three quotas took n5–n7; the fourth finds every node short, and says how
        assert verdict.stage is FitStage.NODE_PREDICATES
        assert verdict.quota == "q-four-3"
        assert verdict.per_node is not None
        assert summarize(verdict.per_node) == [
            "5 nodes: InsufficientQuotaIdle(nvidia.com/gpu 8 > 4)",
            "3 nodes: InsufficientQuotaIdle(nvidia.com/gpu 8 > 0)",
        ]


@pytest.mark.parametrize("where", ["annotations", "labels"])
def test_pods_naming_a_podgroup_that_does_not_exist_wait_for_it(where: str) -> None:
    """``scheduling.k8s.io/group-name`` joins pods to a PodGroup whether an annotation or a label
    names it (``pod_job_key``); either way the gang waits until the PodGroup exists rather than
    running pod by pod."""
    objs = [b.node("n0"), b.node("n1")]
    podgroup = None
    for o in b.training_job("train", 2, gpu=8):
        if o["kind"] == "PodGroup":
            podgroup = o
            continue
        if o["kind"] == "Pod":
            meta = o["metadata"]
            group = meta["annotations"].pop(wellknown.ANNO_GROUP_NAME)
            meta.setdefault(where, {})[wellknown.ANNO_GROUP_NAME] = group
        objs.append(o)
    assert podgroup is not None
    cache = make_cache(objs)
    missing = cache.jobs["default/train"].podgroup_missing  # read once: mypy would keep the narrowing below
    assert missing
    assert not binds(cycle(cache)), "a gang without its PodGroup was placed"
    cache.on_podgroup_add(podgroup)
    assert not cache.jobs["default/train"].podgroup_missing
    assert len(binds(cycle(cache))) == 2, "the gang runs once its PodGroup exists"
