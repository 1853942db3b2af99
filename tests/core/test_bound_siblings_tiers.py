"""The rest of a partly bound gang and the tiers above the leaf (docs/placement.md: "fills its
siblings' zones first, then the fewest further zones under the siblings' spine, then anywhere";
docs/api.md: a hard ``highestTierAllowed`` never places the gang above it).

Two leaves under spine A (s1: n0, n1; s3: n3, n4) and one under spine B (s2: n2); rank 0 is bound
on n1. Found by an adversarial review with an exhaustive oracle: a strict-order gang repairing its
rank order took further zones past its hard limit and with no regard for its siblings' spine, and
a gang of several sizes chose its further zones with no regard for that spine either (refused
outright under a hard spine limit), and its ranks that must share a node packed outside their
siblings' leaf where the leaf had room for them.
"""

from __future__ import annotations

from typing import Any

import pytest

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.conf import default_policy
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.scenarios import policy_with_topology

NOW = 1_800_000_000.0
SPINE = "network.topology.nvidia.com/spine"
STRICT = {wellknown.ANNO_ENABLE_TOPOLOGY: "true"}
LEAVES = (("n0", "s1", "A"), ("n1", "s1", "A"), ("n2", "s2", "B"), ("n3", "s3", "A"), ("n4", "s3", "A"))
Member = tuple[int | None, str]  # a rank's GPUs (None: a launcher without) and CPUs


def _busy(node: str, gpu: int) -> list[dict[str, Any]]:
    quota = b.quota(f"busy-{node}", gpu=gpu, hca=None, status={"phase": "QuotaBound", "nodeName": node})
    pod = b.pod(
        f"busy-{node}",
        quota=f"busy-{node}",
        gpu=gpu,
        hca=None,
        node=node,
        phase="Running",
        annotations={wellknown.ANNO_QUEUE_NAME: "research"},
    )
    return [quota, pod]


def _place(
    members: list[Member], busy: dict[str, int], *, strict: bool = False, limit: str | None = None, spines: bool = True
) -> tuple[list[str], str | None]:
    """Rank 0 of gang g0 bound on n1; the cycle places the rest: (each rank's node, the verdict)."""
    objs: list[dict[str, Any]] = [b.queue("research")]
    for name, leaf, spine in LEAVES if spines else LEAVES[:3]:
        objs += [b.node(name, labels={SPINE: spine} if spines else None), b.topology(name, [leaf])]
    for node, taken in busy.items():
        objs += _busy(node, taken)
    topology = {"highestTierAllowed": limit, "mode": "hard"} if limit else None
    objs.append(b.podgroup("g0", min_member=len(members), topology=topology))
    for i, (gpu, cpu) in enumerate(members):
        status = {"phase": "QuotaBound", "nodeName": "n1"} if i == 0 else None
        objs.append(b.quota(f"q-g0-{i}", gpu=gpu, hca=1, request={"cpu": cpu}, status=status))
        pod = b.pod(f"g0-{i}", group="g0", quota=f"q-g0-{i}", gpu=gpu, hca=1, cpu=cpu, index=i)
        pod["metadata"]["annotations"].update(STRICT if strict else {})
        objs.append(pod)
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    assert not cache.conversion_errors
    result = Scheduler(default_policy()).run_once(cache.snapshot(NOW))
    nodes = []
    for i in range(len(members)):
        q = result.session.quota(f"q-g0-{i}")
        nodes.append(q.node_name if q is not None else "")
    verdict = result.verdicts.get("default/g0")
    return nodes, verdict.status.message() if verdict is not None else None


@pytest.mark.parametrize("members", [[(4, "8"), (4, "8")], [(None, "2"), (4, "8")]], ids=["one-size", "launcher"])
def test_a_strict_gang_held_hard_to_its_leaf_waits_rather_than_leave_it(members: list[Member]) -> None:
    """n1 is full after rank 0, and n0 lies below it: leaf s1 cannot keep rank order; leaf s2
    could, but is above the hard leaf limit. The gang waits."""
    nodes, why = _place(members, {"n1": 8 - (members[0][0] or 0)}, strict=True, limit="leaf", spines=False)
    assert nodes == ["n1", ""], why
    assert why is not None and why.startswith("TopologyOrder"), why


def test_a_strict_gang_keeps_rank_order_under_its_siblings_spine_first() -> None:
    """Rank order forces rank 1 out of leaf s1 (n0 is below n1, n1 is full): leaf s3 under the
    siblings' spine A keeps the order as well as leaf s2 under spine B does, and comes first."""
    nodes, why = _place([(4, "8"), (4, "8")], {"n1": 4}, strict=True)
    assert nodes[0] == "n1" and nodes[1] in ("n3", "n4"), (nodes, why)


@pytest.mark.parametrize("limit", [None, "spine"])
def test_the_rest_of_a_gang_of_several_sizes_goes_under_its_siblings_spine(limit: str | None) -> None:
    """Leaf s1 is full; a launcher and a 4-GPU worker remain. Leaf s2 (spine B) or leaf s3
    (spine A) would each hold them: s3, the siblings' spine — also, not refused, when the gang is
    held hard to one spine."""
    nodes, why = _place([(1, "2"), (None, "2"), (4, "8")], {"n0": 8, "n1": 7}, limit=limit)
    assert nodes[0] == "n1" and {nodes[1], nodes[2]} <= {"n3", "n4"}, (nodes, why)


@pytest.mark.parametrize("pack", [False, True])
@pytest.mark.parametrize("strict", [True, False])
def test_ranks_that_must_share_fill_their_siblings_zone_first(pack: bool, strict: bool) -> None:
    """Ranks of 1, 2, 2 and 4 GPUs; rank 2 bound on n3 (leaf s2, 6 GPUs left); n0 (leaf s1) empty.
    Ranks must share a node (two nodes free of the gang at most, three quotas): n0, n3, n3, n3 keeps
    rank order with one quota outside the siblings' leaf, not n0, n0, n3, n3 with two (docs:
    "the fewest quotas outside the siblings' zones"), by default and with ``pack_workers``."""
    objs: list[dict[str, Any]] = [b.queue("research")]
    for name, leaf in (("n0", "s1"), ("n3", "s2")):
        objs += [b.node(name), b.topology(name, [leaf])]
    objs.append(b.podgroup("g0", min_member=4))
    for i, gpu in enumerate((1, 2, 2, 4)):
        status = {"phase": "QuotaBound", "nodeName": "n3"} if i == 2 else None
        objs.append(b.quota(f"q-g0-{i}", gpu=gpu, hca=1, status=status))
        pod = b.pod(f"g0-{i}", group="g0", quota=f"q-g0-{i}", gpu=gpu, hca=1, index=i)
        pod["metadata"]["annotations"].update(STRICT if strict else {})
        objs.append(pod)
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    policy = policy_with_topology({"pack_workers": True}) if pack else default_policy()
    result = Scheduler(policy).run_once(cache.snapshot(NOW))
    nodes = [q.node_name if (q := result.session.quota(f"q-g0-{i}")) is not None else "" for i in range(4)]
    assert nodes == ["n0", "n3", "n3", "n3"]
