"""Gangs whose quotas differ in size whose ranks must share a node (``mixedplan`` rule 3, as
``gangplan`` rule 3 for gangs of one size; ``docs/placement.md``): distinct nodes while the
gang's zones have a node with room, free of the gang, per quota; else the bound siblings' nodes
first, then the fewest nodes that hold the rest, best fit — not every node of the zones. The
property itself is part of ``test_mixed_gang_property`` (``mixed_oracle.check_shares``); these
are the cases that show it, each run through every check of that property."""

from __future__ import annotations

from tests.core.mixed_gangs import Member, MixedCluster, MixedGang
from tests.core.mixed_gangs import node as _node
from tests.core.test_mixed_gang_property import run, where


def test_a_launcher_and_workers_that_one_node_holds_share_that_node_not_both() -> None:
    """A 1-GPU launcher and six 1-GPU workers on two empty 8-GPU nodes: seven quotas, two nodes,
    so ranks share; n0 holds them all and n1 stays whole for an 8-GPU worker. Spread over both
    (4 + 3, the rule before) both nodes were broken."""
    members = [Member(1, 2), *[Member(1, 8)] * 6]
    c = MixedCluster([_node(0, 1), _node(1, 1)], [MixedGang("g0", members)])
    assert set(where(c, run(c, alone=True)).values()) == {"n0"}


def test_a_gang_that_must_share_takes_its_bound_siblings_node_first() -> None:
    """Rank 0 (2 GPUs) is bound on n0, which has 2 GPUs left; n1 and n2 are empty. Three more
    ranks (2, 2 and 1 GPUs) and only two nodes free of the gang: they share, n0 first (it costs
    the gang no node more), then n1 for the other two; n2 stays whole. Spread (the rule before)
    the gang took all three nodes."""
    gang = MixedGang("g0", [Member(2, 8), Member(2, 8), Member(2, 8), Member(1, 8)], bound={0: "n0"})
    c = MixedCluster([_node(0, 1, busy=4, cpu=8), _node(1, 1), _node(2, 1)], [gang])
    placed = where(c, run(c, alone=True))
    assert placed == {"q-g0-0": "n0", "q-g0-1": "n0", "q-g0-2": "n1", "q-g0-3": "n1"}
