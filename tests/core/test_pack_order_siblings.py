"""``pack_workers`` in rank order around bound siblings (``rankorder.assign_in_order``) against
an exhaustive oracle: the siblings' nodes cost no node more, so whenever every unbound quota can
sit on them in rank order (each inside the node-index range its bound siblings leave it, ranks
ascending), the packed placement takes no other node.

Before, the packed order tried the node beside the previous quota, then the lowest index: rank 0
of a gang whose rank 1 sits on n1 took a new n0 rather than n1.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from extender.plugins.topology.nodechoice import Candidate
from extender.plugins.topology.rankorder import assign_in_order, packed_in_order
from tests.core.props import PROPERTY

Range = tuple[int | None, int | None]


@st.composite
def gangs(draw: st.DrawFn) -> tuple[list[Candidate], list[Range], set[str]]:
    """Up to 4 nodes with 1–3 slots left; a gang of up to 6 quotas, 1–3 of them bound on
    ascending node indices (their nodes: ``held``); the unbound ones' ranges, in task order."""
    k = draw(st.integers(1, 4))
    nodes = [Candidate(f"n{i}", i, draw(st.integers(1, 3))) for i in range(k)]
    total = draw(st.integers(2, 6))
    bound_at = sorted(draw(st.sets(st.integers(0, total - 1), min_size=1, max_size=min(3, total - 1))))
    on = sorted(draw(st.lists(st.integers(0, k - 1), min_size=len(bound_at), max_size=len(bound_at))))
    bound = dict(zip(bound_at, on, strict=True))
    ranges: list[Range] = []
    for t in range(total):
        if t not in bound:
            lo = max((i for p, i in bound.items() if p < t), default=None)
            hi = min((i for p, i in bound.items() if p > t), default=None)
            ranges.append((lo, hi))
    return nodes, ranges, {f"n{i}" for i in on}


def _placements_in_order(nodes: list[Candidate], ranges: list[Range]) -> Iterator[tuple[Candidate, ...]]:
    """Every placement of ``ranges`` (task order) on ``nodes`` that keeps rank order and each
    node's capacity (brute force)."""
    for combo in itertools.product(nodes, repeat=len(ranges)):
        left = {c.name: c.capacity for c in nodes}
        last = -1
        for (lo, hi), c in zip(ranges, combo, strict=True):
            if c.index < last or (lo is not None and c.index < lo) or (hi is not None and c.index > hi):
                break
            if left[c.name] == 0:
                break
            left[c.name] -= 1
            last = c.index
        else:
            yield combo


def _in_order_on(nodes: list[Candidate], ranges: list[Range]) -> bool:
    """Whether some placement of ``ranges`` (task order) on ``nodes`` keeps rank order."""
    return next(_placements_in_order(nodes, ranges), None) is not None


@PROPERTY
@given(gangs())
def test_packed_ranks_stay_on_siblings_nodes_when_they_hold_them_in_order(
    g: tuple[list[Candidate], list[Range], set[str]],
) -> None:
    nodes, ranges, held = g
    placed = assign_in_order(nodes, ranges, pack=True, held=held)
    if _in_order_on([c for c in nodes if c.name in held], ranges):
        assert placed is not None
        assert {s.node for s in placed} <= held, (placed, held)


def _least_cost(
    nodes: list[Candidate], ranges: list[Range], held: set[str], outside: set[str]
) -> tuple[int, int, int] | None:
    """The least (quotas on ``outside`` nodes, nodes free of ``held``, their room) of any
    placement of ``ranges`` on ``nodes`` in rank order (brute force)."""
    best: tuple[int, int, int] | None = None
    for combo in _placements_in_order(nodes, ranges):
        new = {c.name: c.capacity for c in combo if c.name not in held}
        cost = (sum(c.name in outside for c in combo), len(new), sum(new.values()))
        best = cost if best is None else min(best, cost)
    return best


@PROPERTY
@given(gangs(), st.sets(st.integers(0, 3)))
def test_packed_in_order_is_what_brute_force_finds(
    g: tuple[list[Candidate], list[Range], set[str]], far: set[int]
) -> None:
    """The fewest quotas outside the siblings' zones, then the fewest nodes free of the siblings,
    then the least room: exact, not the lowest index first."""
    nodes, ranges, held = g
    outside = {f"n{i}" for i in far}
    placed = packed_in_order(nodes, ranges, held=held, outside=outside)
    least = _least_cost(nodes, ranges, held, outside)
    assert (placed is None) == (least is None)
    if placed is not None:
        caps = {c.name: c.capacity for c in nodes}
        new = {s.node for s in placed} - held
        got = (sum(s.node in outside for s in placed), len(new), sum(caps[n] for n in new))
        assert got == least, placed
        assert all(x.index <= y.index for x, y in itertools.pairwise(placed)), placed
        assert all(
            (lo is None or s.index >= lo) and (hi is None or s.index <= hi)
            for s, (lo, hi) in zip(placed, ranges, strict=True)
        )


def test_rank_0_goes_beside_its_sibling_on_n1() -> None:
    """Rank 1 on n1, rank 2 on n2 (n2 the fuller): rank 0 may take any index ≤ 1 — n1."""
    nodes = [Candidate("n0", 0, 8), Candidate("n1", 1, 7), Candidate("n2", 2, 3)]
    placed = assign_in_order(nodes, [(None, 1)], pack=True, held={"n1", "n2"})
    assert placed is not None and [s.node for s in placed] == ["n1"]
