"""A gang whose quotas differ in size (a launcher beside its workers) that no one NVLink domain
holds takes, inside its chosen leaves, the fewest NVLink domains that hold it — its bound siblings'
domains first — as a gang of one size does (``gangplan.domain_parts``, ``docs/placement.md``
"Which nodes").

Against an exhaustive oracle over small clusters (``test_mixed_gang_property``'s, nodes in NVLink
domains of their leaf, one whole gang, some quotas of it bound, the rest of several sizes): the
gang spans no more domains,
its siblings' included, than the fewest whose usable nodes of its leaves hold its unbound quotas
— by default each on a node of its own free of the gang (when its leaves have a free node per
quota; else ranks share and domains do not choose, as for a gang of one size), with
``pack_workers`` however they share — in the rank order its leaves allow (around its bound
siblings, else among its own quotas, else any). Before, the mixed path took nodes by score and
index whatever their domain.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hypothesis import example, given
from hypothesis import strategies as st

from tests.core.mixed_gangs import Member, MixedCluster, MixedGang, draw_bound
from tests.core.mixed_oracle import fits
from tests.core.props import PROPERTY
from tests.core.test_mixed_gang_nvlink_hard import LAUNCHER, WORKER, _leaf
from tests.core.test_mixed_gang_siblings_nodes import in_best_order, placed, with_domains
from tests.core.topo_cluster import NodeSpec, free_room


def unit(n: NodeSpec) -> str:
    """The NVLink domain ``n`` counts in (a node naming none: a domain of its own)."""
    return n.domain or f"node#{n.name}"


def _interleaved(pack: bool = False) -> MixedCluster:
    """Domains a, b, c, a, b by index; a launcher and two whole-node workers. No domain has three
    nodes; a + c (n0, n3; n2) hold them, leaving b whole — not n0, n1, n2 over three domains."""
    return MixedCluster(_leaf("abcab"), [MixedGang("g0", [LAUNCHER, WORKER, WORKER])], pack)


def _four_over_interleaved() -> MixedCluster:
    """Domains a, b, c, a, b; a launcher and three whole-node workers: a + b, not n0–n3 (a, b, c)."""
    return MixedCluster(_leaf("abcab"), [MixedGang("g0", [LAUNCHER, WORKER, WORKER, WORKER])])


def _siblings_in_a(pack: bool = False) -> MixedCluster:
    """Domains a, b, a, b, a, a by index; worker 0 bound on n0 (a), then a launcher and two
    whole-node workers. a has three free nodes: the rest goes there (n2, n4, n5; with
    ``pack_workers`` the launcher beside its sibling, n0, n2, n4), not to n1, n2 (a + b)."""
    gang = MixedGang("g0", [WORKER, LAUNCHER, WORKER, WORKER], bound={0: "n0"})
    return MixedCluster(_leaf("ababaa"), [gang], pack)


def test_a_mixed_gang_fills_one_domain_before_another() -> None:
    assert placed(_interleaved()) == ["n0", "n2", "n3"]
    assert placed(_four_over_interleaved()) == ["n0", "n1", "n3", "n4"]


def test_the_rest_of_a_partly_bound_mixed_gang_fills_its_siblings_domain_first() -> None:
    assert placed(_siblings_in_a()) == ["n0", "n2", "n4", "n5"]
    assert placed(_siblings_in_a(pack=True)) == ["n0", "n0", "n2", "n4"]


def fewest_domains(c: MixedCluster, zones: set[tuple[str, int]]) -> int | None:
    """The oracle: the fewest domains (the bound siblings' counted, and free) whose usable nodes of
    ``zones`` hold the gang's unbound quotas as the module docstring says — by default its nodes
    free of the gang, one quota a node — in the best order the zones allow (with sharing, as
    ``mixedorder.order_kept`` judges it); None: domains do not choose (by default, its free
    nodes are fewer than its quotas or do not take it one a node)."""
    g = c.gangs[0]
    room = free_room(c.nodes, c.start())
    nodes = sorted((n for n in c.nodes if n.zone in zones and n.name in room), key=lambda n: n.index)
    needs = [g.members[i].need() for i in g.unbound]
    held = set(g.bound.values())

    def free(ns: Sequence[NodeSpec]) -> int:
        return sum(1 for n in ns if n.name not in held and any(fits(m, room[n.name]) for m in needs))

    if not c.pack and free(nodes) < len(needs):
        return None
    holds = in_best_order(g, nodes, room, distinct=not c.pack)
    spec = {n.name: n for n in c.nodes}
    home = {unit(spec[n]) for n in held}
    units = sorted({unit(n) for n in nodes} - home)
    for k in range(len(units) + 1):
        for combo in itertools.combinations(units, k):
            ns = [n for n in nodes if unit(n) in home or unit(n) in combo]
            if holds(ns if c.pack else [n for n in ns if n.name not in held]):
                return len(home) + k
    return None  # by default: its free nodes do not hold it, it takes a sibling's node (no choice)


@st.composite
def interleaved(draw: st.DrawFn) -> MixedCluster:
    """One or two leaves of 3–6 nodes each in domains a, b, c (or none), interleaved by index, some
    GPUs busy; a gang of a small quota (a launcher, a master) and 1–4 workers of one size, some of
    it bound (:func:`test_mixed_gang_property.draw_bound`), strict or not, packed or not."""
    nodes: list[NodeSpec] = []
    for leaf in range(1, draw(st.integers(1, 2)) + 1):
        for _ in range(draw(st.integers(3, 6))):
            d = draw(st.sampled_from(["", "a", "b", "c"]))
            busy = draw(st.sampled_from([0, 0, 0, 4, 8]))
            nodes.append(
                NodeSpec(f"n{len(nodes)}", len(nodes), leaf, "A100", True, False, busy, domain=d and f"{leaf}{d}")
            )
    small = Member(draw(st.sampled_from([0, 1])), draw(st.sampled_from([1, 2])))
    worker = Member(draw(st.sampled_from([2, 4, 8])), 8)
    workers = [worker] * draw(st.integers(1, 4))
    at = draw(st.integers(0, len(workers)))
    g = MixedGang("g0", [*workers[:at], small, *workers[at:]], draw(st.booleans()))
    if draw(st.booleans()):
        draw_bound(draw, g, nodes, {n.name: n.load() for n in nodes})
    return MixedCluster(nodes, [g], draw(st.booleans()))


@PROPERTY
@given(st.one_of(with_domains(), interleaved()))
@example(c=_interleaved())
@example(c=_interleaved(pack=True))
@example(c=_four_over_interleaved())
@example(c=_siblings_in_a())
@example(c=_siblings_in_a(pack=True))
def test_a_mixed_gang_spans_the_fewest_nvlink_domains_of_its_leaves(c: MixedCluster) -> None:
    g = c.gangs[0]
    where = placed(c)
    if not all(where) or len({g.members[i] for i in g.unbound}) < 2:
        return  # not placed, or a rest of one size (GangPlanner's path: test_nvlink_domains_property)
    spec = {n.name: n for n in c.nodes}
    best = fewest_domains(c, {spec[n].zone for n in where})
    got = len({unit(spec[n]) for n in where})
    assert best is None or got <= best, f"{g.name} spans {got} NVLink domains, {best} hold it: {where}"
