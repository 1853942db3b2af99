"""``pack_workers`` for the rest of a strict-order gang whose quotas differ in size, around bound
siblings (``mixedplan.nodes_and_ranks``), against an exhaustive oracle: the siblings' nodes cost
no node more, so the packed placement takes no more nodes free of the gang than the fewest any
placement in rank order takes (each quota inside the node-index range its bound siblings leave
it, ranks ascending) — none when the siblings' nodes hold the rest so.

The analogue of ``test_pack_order_siblings.py`` for a gang of one size: there the packed order
(``rankorder.assign_in_order``) must try the siblings' nodes itself; here :func:`mixedplan.packed`
has chosen the nodes before :func:`mixedorder.place_ordered` orders the quotas on them (the
siblings' nodes first, and only those when they hold the rest), so a quota never lands on a node
the gang could do without.
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from extender.plugins.topology.gangplan import Range
from extender.plugins.topology.mixedorder import Kind, MixedNode, next_fit
from extender.plugins.topology.mixedplan import MixedGang, nodes_and_ranks
from tests.core.props import PROPERTY

Case = tuple[list[MixedNode], list[Kind], list[int], list[Range], frozenset[str]]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """2–4 nodes of 1–5 GPUs left; a gang of 2–6 quotas of two sizes (a launcher of 1–3 GPUs, or
    a worker of 1), 1–3 of them bound on ascending node indices (their nodes: ``held``); the
    unbound ones' kinds and fences, in task order."""
    k = draw(st.integers(2, 4))
    nodes = [
        MixedNode(f"n{i}", i, ("s", "z"), {"gpu": draw(st.integers(1, 5))}, (True, True), draw(st.floats(0, 1)))
        for i in range(k)
    ]
    total = draw(st.integers(2, 6))
    sizes = [draw(st.integers(1, 3)), 1]
    kinds_of = [draw(st.integers(0, 1)) for _ in range(total)]
    at = sorted(draw(st.sets(st.integers(0, total - 1), min_size=1, max_size=min(3, total - 1))))
    on = sorted(draw(st.lists(st.integers(0, k - 1), min_size=len(at), max_size=len(at))))
    bound = dict(zip(at, on, strict=True))
    order: list[int] = []
    fences: list[Range] = []
    for t in range(total):
        if t not in bound:
            order.append(kinds_of[t])
            lo = max((i for p, i in bound.items() if p < t), default=None)
            hi = min((i for p, i in bound.items() if p > t), default=None)
            fences.append((lo, hi))
    kinds = [Kind({"gpu": sizes[t]}, order.count(t)) for t in range(2)]
    return nodes, kinds, order, fences, frozenset(f"n{i}" for i in on)


def fewest_free(
    nodes: list[MixedNode], kinds: list[Kind], order: list[int], fences: list[Range], held: frozenset[str]
) -> int | None:
    """The fewest nodes outside ``held`` any rank-ordered placement inside the fences takes (brute force)."""
    best: int | None = None
    for combo in itertools.product(nodes, repeat=len(order)):
        used: dict[str, int] = {}
        last = -1
        for t, (lo, hi), n in zip(order, fences, combo, strict=True):
            used[n.name] = used.get(n.name, 0) + kinds[t].request["gpu"]
            if n.index < last or (lo is not None and n.index < lo) or (hi is not None and n.index > hi):
                break
            if used[n.name] > n.room["gpu"]:
                break
            last = n.index
        else:
            taken = len({n.name for n in combo} - held)
            best = taken if best is None else min(best, taken)
    return best


@PROPERTY
@given(cases())
def test_packed_rest_takes_the_fewest_nodes_free_of_the_gang(case: Case) -> None:
    nodes, kinds, order, fences, held = case
    if not next_fit(nodes, kinds, order, fences):
        return
    gang = MixedGang(kinds, order, strict=True, pack=True, fences=fences, held=held)
    placed = nodes_and_ranks(gang, nodes)
    assert placed is not None
    assert len(set(placed) - held) == fewest_free(nodes, kinds, order, fences, held), placed


def test_rank_0_goes_beside_its_sibling_on_n1() -> None:
    """A launcher (rank 0) and two workers, worker 1 bound on n1 and worker 2 on n2 (the fuller):
    the launcher may take any index ≤ 1 — n1, beside its sibling, not a new n0."""
    nodes = [MixedNode(f"n{i}", i, ("s", "z"), {"gpu": g}, (True, True)) for i, g in enumerate((8, 7, 3))]
    kinds = [Kind({"gpu": 2}, 1), Kind({"gpu": 1}, 0)]
    gang = MixedGang(kinds, [0], strict=True, pack=True, fences=[(None, 1)], held=frozenset({"n1", "n2"}))
    assert nodes_and_ranks(gang, nodes) == ["n1"]
