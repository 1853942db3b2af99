"""Scenarios: static binding (spec.staticBindNode) and quota affinity and anti-affinity."""

from __future__ import annotations

from typing import Any

import pytest

from extender.framework.intents import BindQuota, ReleaseQuota
from extender.framework.pipeline import place
from extender.framework.session import Session
from extender.framework.status import Reason
from tests import builders as b
from tests.core.scenarios import (
    GPU,
    NOW,
    POLICY,
    QUEUE_ANNO,
    binds,
    cycle,
    make_cache,
    node_of,
    uid_of,
    write_back,
)


def test_a_quota_with_static_bind_node_is_pinned_there() -> None:
    cache = make_cache([*b.seed_cluster(), b.quota("pinned", gpu=8, hca=None, static_bind_node="n5")])
    result = cycle(cache)
    assert result.intents == [BindQuota("pinned", "n5")]
    assert node_of(result, "n5").quota_idle.get(GPU) == 0
    # a static quota is never released as idle, even with no claimant
    write_back(cache, result)
    again = cycle(cache, now=NOW + 100)
    assert not [i for i in again.intents if isinstance(i, ReleaseQuota)]


def with_node(objs: list[dict[str, Any]], replacement: dict[str, Any]) -> list[dict[str, Any]]:
    """``objs`` with the Node of the same name replaced."""
    name = replacement["metadata"]["name"]
    return [replacement if o["kind"] == "Node" and o["metadata"]["name"] == name else o for o in objs]


def test_a_static_bind_node_that_is_not_ready_is_not_used() -> None:
    objs = with_node(b.seed_cluster(), b.node("n5", ready=False))
    cache = make_cache([*objs, b.quota("pinned", gpu=1, hca=None, static_bind_node="n5")])
    assert not cache.nodes["n5"].ready
    result = cycle(cache)
    assert binds(result) == {}


def test_the_tq_pipeline_prefers_a_statically_bound_quota_over_a_free_one() -> None:
    cache = make_cache(
        [
            *b.seed_cluster(),
            b.quota("free", gpu=1, hca=None),
            b.quota("pinned", gpu=1, hca=None, static_bind_node="n5"),
            b.pod("p", gpu=1, hca=None, annotations=QUEUE_ANNO),
        ]
    )
    ssn = Session(cache.snapshot(NOW), POLICY)
    task = ssn.task(uid_of(cache, "p"))
    result = place(ssn.tq, task, list(ssn.quotas_of_queue("research")))
    assert result.choice is not None and result.choice.name == "pinned"


def anti_pair(anti_on: str) -> list[dict[str, Any]]:
    a_aff = {"quotaAntiAffinity": [{"quotaNames": ["qb"]}]} if anti_on == "qa" else None
    b_aff = {"quotaAntiAffinity": [{"quotaNames": ["qa"]}]} if anti_on == "qb" else None
    return [
        b.quota("qa", gpu=1, hca=None, affinity=a_aff),
        b.quota("qb", gpu=1, hca=None, affinity=b_aff),
        b.pod("pa", quota="qa", gpu=1, hca=None, annotations=QUEUE_ANNO),
        b.pod("pb", quota="qb", gpu=1, hca=None, annotations=QUEUE_ANNO),
    ]


def test_without_anti_affinity_binpack_puts_two_small_quotas_together() -> None:
    """The control for the next test: the default policy packs both quotas onto one node."""
    objs = b.seed_cluster(leaves=1, per_leaf=2) + anti_pair("none")
    placed = binds(cycle(make_cache(objs)))
    assert len(set(placed.values())) == 1


@pytest.mark.parametrize("anti_on", ["qa", "qb"])
def test_quota_anti_affinity_keeps_two_quotas_apart_whichever_declares_it(anti_on: str) -> None:
    objs = b.seed_cluster(leaves=1, per_leaf=2) + anti_pair(anti_on)
    placed = binds(cycle(make_cache(objs)))
    assert set(placed) == {"qa", "qb"}
    assert placed["qa"] != placed["qb"]


def test_quota_anti_affinity_with_one_node_leaves_the_second_unbound_and_says_why() -> None:
    objs = b.seed_cluster(leaves=1, per_leaf=1) + anti_pair("qb")
    result = cycle(make_cache(objs))
    assert binds(result) == {"qa": "n0"}
    verdict = result.verdicts["default/pb"]
    assert verdict.quota == "qb"
    assert verdict.per_node is not None
    assert verdict.per_node["n0"].reason is Reason.QUOTA_ANTI_AFFINITY


def test_quota_affinity_by_label_follows_the_bound_quota() -> None:
    objs = [
        *b.seed_cluster(leaves=1, per_leaf=4),
        b.quota("leader", gpu=1, hca=None, labels={"team": "x"}, status={"phase": "QuotaBound", "nodeName": "n2"}),
        b.pod("lead", quota="leader", gpu=1, hca=None, node="n2", phase="Running", annotations=QUEUE_ANNO),
        b.quota(
            "follower", gpu=1, hca=None, affinity={"quotaAffinity": [{"labelSelector": {"matchLabels": {"team": "x"}}}]}
        ),
        b.pod("follow", quota="follower", gpu=1, hca=None, annotations=QUEUE_ANNO),
    ]
    assert binds(cycle(make_cache(objs))) == {"follower": "n2"}
