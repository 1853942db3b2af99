"""Scenarios: a gang that cannot fit binds nothing, and its verdict says why."""

from __future__ import annotations

import pytest

from extender.framework.intents import BindQuota
from extender.framework.session import FitStage
from extender.framework.status import summarize
from tests.core.scenarios import (
    GPU,
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
