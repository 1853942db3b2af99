"""The pure rules of gang planning (extender/plugins/topology/gangplan.py and nodechoice.py), on
hand-checked cases and against brute force on random small inputs."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender.plugins.topology.gangplan import (
    Slot,
    ZoneOffer,
    best_single_zone,
    choose_zones,
    single_zone_key,
    split_slots,
)
from extender.plugins.topology.nodechoice import Candidate, choose_nodes, continuity_block
from extender.plugins.topology.rankorder import assign_ranks, ordered_in_zones
from tests.core.props import PROPERTY


def zone(name: str, capacity: int, *, size: int = 8, untouched: bool = False, first: int = 0) -> ZoneOffer:
    return ZoneOffer(("A100", name), size, capacity, untouched, first)


def names(zones: list[ZoneOffer] | None) -> list[str] | None:
    return None if zones is None else sorted(z.id[1] for z in zones)


def test_the_fullest_zone_that_holds_the_gang_wins_not_the_smallest() -> None:
    """Free nodes 5/8/1: a 5-gang takes the leaf with exactly 5 (the 8 stays whole)."""
    zones = [zone("a", 5, first=0), zone("b", 8, first=8), zone("c", 1, first=16)]
    assert names(choose_zones(zones, 5)) == ["a"]
    assert names(choose_zones(zones, 4)) == ["a"]
    assert names(choose_zones(zones, 6)) == ["b"]


def test_ties_of_capacity_go_to_fewer_nodes_then_lower_index() -> None:
    zones = [zone("a", 4, size=8, first=0), zone("b", 4, size=4, first=8), zone("c", 4, size=4, first=12)]
    assert names(choose_zones(zones, 3)) == ["b"]


def test_a_gang_no_zone_holds_takes_the_fewest_zones() -> None:
    zones = [zone("a", 0), zone("b", 8, first=8), zone("c", 1, first=16)]
    assert names(choose_zones(zones, 9)) == ["b", "c"]
    assert choose_zones(zones, 10) is None


def test_an_exact_fit_of_touched_zones_beats_breaking_an_empty_one() -> None:
    """Greedy (largest first) would take the empty zone c; the plan keeps it whole."""
    zones = [zone("a", 5, first=0), zone("b", 5, first=8), zone("c", 8, untouched=True, first=16)]
    assert names(choose_zones(zones, 10)) == ["a", "b"]


def test_affinity_comes_before_best_fit() -> None:
    zones = [zone("a", 4), ZoneOffer(("A100", "b"), 8, 8, False, 8, affinity=3)]
    assert names(choose_zones(zones, 4)) == ["b"]


offers = st.lists(st.tuples(st.integers(0, 12), st.booleans(), st.integers(1, 8)), min_size=1, max_size=5).map(
    lambda rows: [zone(f"z{i}", c, untouched=u, size=s, first=10 * i) for i, (c, u, s) in enumerate(rows)]
)


@PROPERTY
@given(offers, st.integers(1, 30))
def test_the_zone_plan_is_what_brute_force_finds(zones: list[ZoneOffer], need: int) -> None:
    """Fewest zones, then least untouched capacity broken, then least capacity, nodes, indices."""
    usable = [z for z in zones if z.capacity > 0]
    best: tuple[object, ...] | None = None
    for k in range(1, len(usable) + 1):
        for combo in itertools.combinations(usable, k):
            if sum(z.capacity for z in combo) < need:
                continue
            if k == 1:
                key: tuple[object, ...] = (1, combo[0].capacity, combo[0].size, combo[0].first_index)
            else:
                key = (
                    k,
                    sum(z.capacity for z in combo if z.untouched),
                    sum(z.capacity for z in combo),
                    sum(z.size for z in combo),
                )
            if best is None or key < best:
                best = key
        if best is not None:
            break
    plan = choose_zones(zones, need)
    if best is None:
        assert plan is None
        return
    assert plan is not None and sum(z.capacity for z in plan) >= need
    k = len(plan)
    got = (
        (1, plan[0].capacity, plan[0].size, plan[0].first_index)
        if k == 1
        else (
            k,
            sum(z.capacity for z in plan if z.untouched),
            sum(z.capacity for z in plan),
            sum(z.size for z in plan),
        )
    )
    assert got == best


@PROPERTY
@given(
    st.lists(st.tuples(st.integers(0, 12), st.integers(1, 8), st.integers(0, 3)), max_size=6),
    st.integers(1, 12),
)
def test_the_best_single_zone_is_the_least_by_rule_1s_order(rows: list[tuple[int, int, int]], need: int) -> None:
    """Affinity first, then best fit (least capacity), fewer nodes, lower first index."""
    zones = [ZoneOffer(("A100", f"z{i}"), s, c, False, 10 * i, a) for i, (c, s, a) in enumerate(rows)]
    holding = [z for z in zones if z.capacity >= need]
    assert best_single_zone(zones, need) == (min(holding, key=single_zone_key) if holding else None)


def test_slots_fill_the_zone_with_most_room_first() -> None:
    split = split_slots([zone("a", 3), zone("b", 8, first=8)], 9)
    assert [(z.id[1], n) for z, n in split] == [("b", 8), ("a", 1)]


def cand(name: str, index: int, capacity: int, score: float = 0.0) -> Candidate:
    return Candidate(name, index, capacity, score)


def counts(chosen: list[tuple[Candidate, int]]) -> dict[str, int]:
    return {c.name: n for c, n in chosen}


def test_distinct_nodes_while_there_are_enough_best_score_first() -> None:
    nodes = [cand("n0", 0, 8, 1.0), cand("n1", 1, 8, 5.0), cand("n2", 2, 8, 5.0), cand("n3", 3, 8)]
    assert counts(choose_nodes(nodes, 2)) == {"n1": 1, "n2": 1}


def test_ranks_share_the_fewest_nodes_when_the_zone_has_too_few() -> None:
    """8 workers × 1 GPU on two empty 8-GPU nodes: not refused, and all on one node, so the other
    stays whole for an 8-GPU worker (spread 4 + 4, both would be broken); 5 workers over room 1 and
    8 take the 8."""
    assert counts(choose_nodes([cand("n0", 0, 8), cand("n1", 1, 8)], 8)) == {"n0": 8}
    assert counts(choose_nodes([cand("n0", 0, 1), cand("n1", 1, 8)], 5)) == {"n1": 5}


@PROPERTY
@given(st.lists(st.tuples(st.integers(1, 8), st.integers(0, 2)), min_size=1, max_size=7), st.integers(1, 30))
def test_default_nodes_are_distinct_while_enough_else_packed_best_fit(rows: list[tuple[int, int]], need: int) -> None:
    """Rule 3 by default, against brute force: while the zone has a node per quota, one quota per
    node, the best scored (ties: lower index); with fewer nodes than quotas ranks must share, and
    then on the fewest nodes that hold them, the least capacity taken (best fit, as ``pack``)."""
    nodes = [cand(f"n{i}", i, c, float(s)) for i, (c, s) in enumerate(rows)]
    if sum(c for c, _ in rows) < need:
        return
    chosen = choose_nodes(nodes, need)
    assert sum(n for _, n in chosen) == need
    assert all(0 < n <= c.capacity for c, n in chosen)
    if len(nodes) >= need:
        best = sorted(nodes, key=lambda c: (-c.score, c.index))[:need]
        assert counts(chosen) == {c.name: 1 for c in best}
        return
    least = min(
        (k, sum(c.capacity for c in combo))
        for k in range(1, len(nodes) + 1)
        for combo in itertools.combinations(nodes, k)
        if sum(c.capacity for c in combo) >= need
    )
    assert (len(chosen), sum(c.capacity for c, _ in chosen)) == least


def test_pack_workers_uses_the_fewest_nodes() -> None:
    """4 workers × 4 GPU on four empty nodes: two nodes when packing."""
    nodes = [cand(f"n{i}", i, 2) for i in range(4)]
    assert counts(choose_nodes(nodes, 4, pack=True)) == {"n0": 2, "n1": 2}
    assert counts(choose_nodes(nodes, 4)) == {f"n{i}": 1 for i in range(4)}
    # the node that holds all of them with the least room
    assert counts(choose_nodes([cand("a", 0, 8), cand("b", 1, 3)], 3, pack=True)) == {"b": 3}


def test_pack_workers_is_best_fit_among_the_fewest_nodes() -> None:
    """10 slots on nodes with room 8/8/4/1: two nodes either way, but 8 + 4 keeps an 8 whole for a
    wider worker, where the largest first (8 + 8) would break both."""
    nodes = [cand("a", 0, 8), cand("b", 1, 8), cand("c", 2, 4), cand("d", 3, 1)]
    assert counts(choose_nodes(nodes, 10, pack=True)) == {"a": 8, "c": 2}
    # 5 + 5 is an exact fit; 8 + the smallest node that holds the rest (5) would take 13
    nodes = [cand("a", 0, 8), cand("b", 1, 6), cand("c", 2, 5), cand("d", 3, 5)]
    assert counts(choose_nodes(nodes, 10, pack=True)) == {"c": 5, "d": 5}
    # 8 + 4 and 6 + 6 take as much room; the 8 stays whole
    nodes = [cand("a", 0, 8), cand("b", 1, 6), cand("c", 2, 6), cand("d", 3, 4)]
    assert counts(choose_nodes(nodes, 12, pack=True)) == {"b": 6, "c": 6}


@PROPERTY
@given(st.lists(st.integers(1, 8), min_size=1, max_size=7), st.integers(1, 30))
def test_packed_nodes_are_what_brute_force_finds(capacities: list[int], need: int) -> None:
    """With ``pack``: the fewest nodes that hold ``need``, then the least capacity taken, then the
    fewest of the largest nodes."""
    nodes = [cand(f"n{i}", i, c) for i, c in enumerate(capacities)]
    if sum(capacities) < need:
        return
    distinct = sorted(set(capacities), reverse=True)

    def key(combo: Sequence[Candidate]) -> tuple[int, int, list[int]]:
        taken = [c.capacity for c in combo]
        return (len(combo), sum(taken), [taken.count(cap) for cap in distinct])

    best = min(
        key(combo)
        for k in range(1, len(nodes) + 1)
        for combo in itertools.combinations(nodes, k)
        if sum(c.capacity for c in combo) >= need
    )
    chosen = choose_nodes(nodes, need, pack=True)
    assert sum(n for _, n in chosen) == need
    assert all(0 < n <= c.capacity for c, n in chosen)
    assert key([c for c, _ in chosen]) == best


def test_too_few_slots_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="fewer than 3"):
        choose_nodes([cand("n0", 0, 1)], 3)
    with pytest.raises(ValueError, match="fewer than 3"):
        choose_nodes([cand("n0", 0, 2)], 3, pack=True)


def test_ranks_ascend_with_node_index() -> None:
    slots = [Slot("n5", 5), Slot("n1", 1), Slot("n1", 1), Slot("n3", 3)]
    assert [s.node for s in assign_ranks(slots, [(None, None)] * 4)] == ["n1", "n1", "n3", "n5"]


def test_a_quota_between_bound_siblings_takes_a_slot_inside_their_range() -> None:
    slots = [Slot("n1", 1), Slot("n6", 6)]
    # rank 1 sits between siblings on nodes 4 and 7; rank 3 above 7
    assert [s.node for s in assign_ranks(slots, [(4, 7), (7, None)])] == ["n6", "n1"]


def test_continuity_takes_the_shortest_run_that_holds_the_gang() -> None:
    nodes = [cand("n0", 0, 1), cand("n1", 1, 1), cand("n3", 3, 4), cand("n4", 4, 1), cand("n6", 6, 1)]
    block = continuity_block(nodes, list(range(7)), 4)
    assert block is not None and [c.name for c in block] == ["n3"]
    block = continuity_block(nodes, list(range(7)), 5)
    assert block is not None and [c.name for c in block] == ["n3", "n4"]
    assert continuity_block(nodes, list(range(7)), 7) is None


def test_a_strict_gang_out_of_order_in_its_zones_takes_the_fewest_further_zones_that_keep_it() -> None:
    """Two quotas whose bound sibling (in zone h, full) leaves them node indices 0–3. The zones
    chosen by room (b: n0, x: n10) cannot keep that order; of the further zones, a (n2, n3) alone
    does — not b and a, the first pair in cost order, though the chosen zones numbered two."""
    cands = {
        "h": [],
        "b": [Candidate("n0", 0, 1)],
        "a": [Candidate("n2", 2, 1), Candidate("n3", 3, 1)],
        "x": [Candidate("n10", 10, 1)],
    }
    offers = [zone("b", 1, size=1, first=0), zone("a", 2, size=2, first=2), zone("x", 1, size=1, first=10)]
    got = ordered_in_zones(
        lambda z: cands[z[1]],
        [("A100", "h"), ("A100", "b"), ("A100", "x")],
        [(None, 3), (None, 3)],
        home=[("A100", "h")],
        further=offers,
    )
    assert got is not None
    slots, zones = got
    assert [s.node for s in slots] == ["n2", "n3"]
    assert zones == [("A100", "a")]
    # a gang without strict order keeps to its chosen zones: none keeps the order there
    assert (
        ordered_in_zones(lambda z: cands[z[1]], [("A100", "h"), ("A100", "b"), ("A100", "x")], [(None, 3)] * 2) is None
    )
