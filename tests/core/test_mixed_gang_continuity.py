"""Gangs whose quotas differ in size under the continuity algorithm (``continuity_weight`` above
``namedzone_weight``: the shortest run of consecutive node indices that holds the gang, else the
zone rules), against the exhaustive oracle of ``test_mixed_gang_property`` (issue 16 item 2: a
gang that can be placed under the rules is never refused).

On that property's clusters and gangs, one cycle keeps every check of it but the zone choice
(continuity picks runs of nodes, not rule 1's zones): valid placements (capacity on every
resource, one GPU model, usable nodes, minMember, strict rank order), and a gang that fits is
placed — the most of it that fits, when its ``minMember`` is below its size.
"""

from __future__ import annotations

from hypothesis import example, given

from extender.framework.policy import Policy
from tests.core.mixed_gangs import Member, MixedCluster, MixedGang, mixed_clusters
from tests.core.mixed_gangs import node as _node
from tests.core.props import PROPERTY
from tests.core.scenarios import policy_with_topology
from tests.core.test_mixed_gang_property import run, where
from tests.core.topo_cluster import NodeSpec

CONTINUITY: dict[bool, Policy] = {
    pack: policy_with_topology({"continuity_weight": 200, "pack_workers": pack}) for pack in (False, True)
}


def _cpu_heavy_launcher() -> MixedCluster:
    """A 4-GPU worker (10 CPUs) and a 1-GPU launcher of 90 CPUs on three empty nodes (8 GPUs, 96
    CPUs each): counted as two 4-GPU workers, n0 alone would hold them, yet their 100 CPUs do
    not fit one node. The shortest runs that hold them are n0–n1 and n1–n2; n1–n2 is one leaf."""
    return MixedCluster([_node(0, 1), _node(1, 2), _node(2, 2)], [MixedGang("g0", [Member(4, 10), Member(1, 90)])])


def _no_run_holds_it() -> MixedCluster:
    """Two 4-GPU workers and a 1-GPU launcher; n0 has 2 GPUs free, n4 and n6 are empty, n1–n3 and
    n5 unusable (NotReady, tainted). No run of consecutive usable nodes holds the gang, so the zone
    rules place it: leaves 1 and 3 (n6, n6, n0), where rank order cannot be kept — no failure of
    order, though n4 and n6 would keep it were n0–n6 one run (found by hypothesis)."""
    down = [NodeSpec(f"n{i}", i, 2 if i < 5 else 3, "A100", False, True, 0, 0) for i in (1, 2, 3, 5)]
    nodes = [_node(0, 1, busy=6), *down, _node(4, 2), _node(6, 3)]
    gang = MixedGang("g0", [Member(4, 1), Member(4, 1), Member(1, 1)])
    return MixedCluster(sorted(nodes, key=lambda n: n.index), [gang])


@PROPERTY
@given(mixed_clusters())
@example(c=_cpu_heavy_launcher())
@example(c=_no_run_holds_it())
def test_mixed_gangs_under_continuity_are_placed_valid_whenever_they_fit(c: MixedCluster) -> None:
    run(c, alone=len(c.gangs) == 1, policy=CONTINUITY[c.pack])


def test_a_launcher_heavier_in_cpu_than_its_worker_takes_the_shortest_run_that_holds_both() -> None:
    c = _cpu_heavy_launcher()
    assert where(c, run(c, alone=True, policy=CONTINUITY[False])) == {"q-g0-0": "n1", "q-g0-1": "n2"}


def _run_with_a_half_node() -> MixedCluster:
    """A 1-GPU launcher and three 4-GPU workers (13 GPUs) on n0 (empty), n1 (half used), n2
    (empty) in one leaf: the shortest run is n0–n2 and ranks must share. n0 and n2 alone hold the
    gang, but skipping n1 leaves a gap in the run the continuity algorithm chose."""
    gang = MixedGang("g0", [Member(1, 1), Member(4, 1), Member(4, 1), Member(4, 1)])
    return MixedCluster([_node(0, 1), _node(1, 1, busy=4), _node(2, 1)], [gang])


def test_under_continuity_a_mixed_gang_takes_every_node_of_its_run() -> None:
    c = _run_with_a_half_node()
    placed = where(c, run(c, alone=True, policy=CONTINUITY[False]))
    assert set(placed.values()) == {"n0", "n1", "n2"}, placed
