"""The pure rules of ``extender/plugins/topology/mixedplan.py`` against the brute-force packer of
``test_mixed_gang_property`` (no session: random rooms, requests and predicates):

* a set of nodes holds the gang by its frontier iff some placement exists;
* ``next_fit`` says yes iff some placement in rank order exists (its exactness claim);
* ``place`` answers a valid placement whenever one exists: each node's quotas fit its room and
  pass its predicates, ranks ascend whenever an ordered placement exists, and always within a kind.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from extender.plugins.topology.mixedplan import Kind, MixedNode, frontier_of, next_fit, place
from tests.core.props import PROPERTY
from tests.core.test_mixed_gang_property import packs
from tests.core.topo_cluster import NODE_ROOM, Need


@dataclass
class Case:
    kinds: list[Kind]
    order: list[int]  # kind of each quota, task order
    nodes: list[MixedNode]
    pack: bool


@st.composite
def cases(draw: st.DrawFn) -> Case:
    requests = draw(
        st.lists(
            st.fixed_dictionaries(
                {"gpu": st.sampled_from([0, 1, 2, 4, 8]), "hca": st.just(1), "cpu": st.sampled_from([1, 8, 32, 48])}
            ),
            min_size=1,
            max_size=3,
            unique_by=lambda r: (r["gpu"], r["cpu"]),
        )
    )
    order = draw(st.lists(st.integers(0, len(requests) - 1), min_size=1, max_size=6))
    used = sorted(set(order))
    order = [used.index(t) for t in order]  # every kind has a quota
    kinds = [Kind(requests[t], order.count(i)) for i, t in enumerate(used)]
    nodes = []
    for i in range(draw(st.integers(1, 5))):
        room = {k: draw(st.integers(0, cap)) for k, cap in NODE_ROOM.items()}
        eligible = tuple(draw(st.integers(0, 5)) > 0 for _ in kinds)
        nodes.append(MixedNode(f"n{i}", i, ("A100", "s1"), room, eligible))
    return Case(kinds, order, nodes, draw(st.booleans()))


def brute(c: Case, *, ordered: bool) -> bool:
    """Whether some placement exists (``ordered``: with node indices that never descend), each
    quota on a node whose predicates take its kind: plain depth-first search."""
    return _brute(c, [dict(n.room) for n in c.nodes], 0, 0, ordered=ordered)


def _brute(c: Case, left: list[Need], i: int, lo: int, *, ordered: bool) -> bool:
    if i == len(c.order):
        return True
    t = c.order[i]
    request = c.kinds[t].request
    for j in range(lo if ordered else 0, len(c.nodes)):
        if c.nodes[j].eligible[t] and all(left[j].get(k, 0) >= v for k, v in request.items()):
            for k, v in request.items():
                left[j][k] -= v
            if _brute(c, left, i + 1, j, ordered=ordered):
                return True
            for k, v in request.items():
                left[j][k] += v
    return False


@PROPERTY
@given(cases())
def test_frontiers_next_fit_and_place_agree_with_brute_force(c: Case) -> None:
    need = tuple(k.count for k in c.kinds)
    anywhere = brute(c, ordered=False)
    in_order = brute(c, ordered=True)
    assert (need in frontier_of(c.nodes, c.kinds)) == anywhere
    assert next_fit(c.nodes, c.kinds, c.order) == in_order
    placed = place(c.nodes, c.kinds, c.order, pack=c.pack)
    assert (placed is not None) == anywhere
    if placed is None:
        return
    by_name = {n.name: n for n in c.nodes}
    held: dict[str, dict[str, int]] = {n.name: {} for n in c.nodes}
    for name, t in zip(placed, c.order, strict=True):
        assert by_name[name].eligible[t], f"kind {t} on {name}, which refuses it"
        for k, v in c.kinds[t].request.items():
            held[name][k] = held[name].get(k, 0) + v
    for name, h in held.items():
        assert all(v <= by_name[name].room.get(k, 0) for k, v in h.items()), f"{name} over its room: {h}"
    indices = [by_name[n].index for n in placed]
    if in_order:
        assert indices == sorted(indices), f"rank order broken while it was possible: {indices}"
    for t in range(len(c.kinds)):
        same = [i for i, k in zip(indices, c.order, strict=True) if k == t]
        assert same == sorted(same), f"kind {t} out of order: {indices}"


def test_packs_agrees_on_a_plain_case() -> None:
    """The brute force of the cluster property and this one's agree where both apply."""
    rooms = [{"gpu": 8, "hca": 8, "cpu": 96}, {"gpu": 8, "hca": 8, "cpu": 96}, {"gpu": 1, "hca": 8, "cpu": 96}]
    needs = [{"gpu": 1, "hca": 1, "cpu": 2}, {"gpu": 8, "hca": 1, "cpu": 8}, {"gpu": 8, "hca": 1, "cpu": 8}]
    assert packs(needs, rooms, ordered=False)
    assert not packs(needs, rooms, ordered=True)
