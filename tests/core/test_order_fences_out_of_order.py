"""Rank order around bound siblings that are themselves out of order (issue 16 item 1,
docs/placement.md "Ranks are then given in ascending node index"): each new quota keeps inside
the range its bound siblings leave it, the seed's closed ``[preNode, lastNode]`` (the largest
node index bound below it in rank, the smallest above), for gangs of one size and mixed gangs
alike, by default and with ``pack_workers``. Full rank order is impossible then; the range still
keeps every order relation the new quota takes part in: 4 × 2-GPU, tasks 1–3 bound on n2, n3,
n2 (n2 full), task 0 takes n0 (node indices 0, 2, 3, 2: the siblings' one descent), not n3 beside
task 2 (3, 2, 3, 2: one more) — even with ``pack_workers``, where n0 is a node more: order
before fewest nodes, as around siblings in order. A gang without strict order keeps to its
siblings' zones first: when the range's only room is in another leaf, task 0 stays in theirs.

Pins behaviour both paths already agreed on (``siblings.rank_ranges`` / ``rankorder`` and
``mixedorder``'s fences, ``test_mixed_gang_property._bound_out_of_order``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.core.mixed_gangs import Member, MixedCluster, MixedGang, node
from tests.core.scenarios import policy_with_topology, quota_node
from tests.core.test_mixed_gang_property import run as run_mixed
from tests.core.topo_cluster import NodeSpec
from tests.core.topo_gangs import POLICY, Cluster, Gang, run

PACKED = policy_with_topology({"pack_workers": True})
BOUND = {1: "n2", 2: "n3", 3: "n2"}
BUSY = [0, 8, 4, 0]  # n1 full, n2 full with two siblings, n3 room for three more 2-GPU ranks
Plan = Callable[[list[int], bool], list[str]]


def one_size(leaves: list[int], pack: bool) -> list[str]:
    spots = enumerate(zip(leaves, BUSY, strict=True))
    nodes = [NodeSpec(f"n{i}", i, leaf, "A100", True, False, b) for i, (leaf, b) in spots]
    c = Cluster(nodes, [Gang("g0", 4, 2, False, bound=dict(BOUND))])
    result = run(c, liveness=True, zone_rules=False, policy=PACKED if pack else POLICY)
    return [quota_node(result.session, q) or "" for q in c.gangs[0].quotas]


def mixed(leaves: list[int], pack: bool) -> list[str]:
    """The same with a 1-GPU rank 0 (a launcher): the mixed planner."""
    g = MixedGang("g0", [Member(1, 1)] + [Member(2, 1)] * 3, bound=dict(BOUND))
    spots = enumerate(zip(leaves, BUSY, strict=True))
    c = MixedCluster([node(i, leaf, busy=b) for i, (leaf, b) in spots], [g], pack=pack)
    session = run_mixed(c, alone=True).session
    return [quota_node(session, q) or "" for q in g.quotas]


@pytest.mark.parametrize("pack", [False, True])
@pytest.mark.parametrize("plan", [one_size, mixed])
def test_a_new_quota_keeps_inside_its_range_around_siblings_out_of_order(plan: Plan, pack: bool) -> None:
    assert plan([1, 1, 1, 1], pack) == ["n0", "n2", "n3", "n2"]


@pytest.mark.parametrize("pack", [False, True])
@pytest.mark.parametrize("plan", [one_size, mixed])
def test_the_range_costs_no_locality(plan: Plan, pack: bool) -> None:
    assert plan([1, 1, 2, 2], pack) == ["n3", "n2", "n3", "n2"]
