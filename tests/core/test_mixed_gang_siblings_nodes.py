"""The rest of a partly bound gang whose quotas differ in size (a launcher beside its workers)
takes, by default, nodes free of the gang first: a node holding a bound sibling is no distinct
node (``docs/placement.md`` "Which nodes"), as for a gang of one size and as the whole gang
planned at once would. Before, the mixed path ranked every node of its zones by score, and
binpack scores a sibling's node first: worker 0 bound on n0 of four empty nodes, the launcher
and a 4-GPU worker took n0 (beside the sibling) and n1, where the whole gang takes three nodes.

Against an exhaustive oracle over small clusters (``test_mixed_gang_property``'s, one whole gang
with some quotas bound, its rest of any sizes — one size too, held to the same rule): whenever
the nodes of the gang's zones free of it take its rest one quota a node in the best rank order
those zones allow (inside the fences of its bound siblings, else among its own quotas, else
any), the rest takes none of its siblings' nodes. The helpers here serve ``test_mixed_gang_nvlink_fewest.py`` too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from hypothesis import example, given
from hypothesis import strategies as st

from extender.cache.cache import ClusterCache
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.mixed_gangs import PACKING, POLICY, MixedCluster, MixedGang, draw_bound, members
from tests.core.mixed_oracle import charge, fits
from tests.core.props import PROPERTY
from tests.core.test_mixed_gang_nvlink_hard import HALF, LAUNCHER, WORKER, _leaf, domain_mixed
from tests.core.topo_cluster import NOW, Need, NodeSpec, check_ledgers, free_room


def placed(c: MixedCluster) -> list[str]:
    """The gang's nodes after one cycle ("" for a quota left unbound)."""
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, c.objects())
    result = Scheduler(PACKING if c.pack else POLICY).run_once(cache.snapshot(NOW))
    check_ledgers(result.session)
    return [result.session.quota(q).node_name or "" for q in c.gangs[0].quotas]  # type: ignore[union-attr]


def _launcher_beside_a_bound_worker() -> MixedCluster:
    """Four empty nodes naming no domain; worker 0 bound on n0, then a launcher and a 4-GPU worker.
    The whole gang planned at once takes three nodes; the rest takes n1, n2, not n0 (binpack's best
    score) beside its sibling."""
    gang = MixedGang("g0", [WORKER, LAUNCHER, HALF], bound={0: "n0"})
    return MixedCluster(_leaf("----"), [gang])


def test_the_rest_of_a_partly_bound_mixed_gang_takes_nodes_free_of_the_gang() -> None:
    assert placed(_launcher_beside_a_bound_worker()) == ["n0", "n1", "n2"]


def _fits_in_order(
    g: MixedGang,
    nodes: Sequence[NodeSpec],
    room: Mapping[str, Need],
    bound: Mapping[int, int] | None,
    *,
    distinct: bool = False,
) -> bool:
    """Whether the unbound quotas of ``g`` fit ``nodes`` with node indices never descending as task
    indices ascend, given ``bound`` (task → its bound quota's node index) each inside its fence:
    at or above the largest bound for a smaller task, at or below the least bound for a larger one
    (``siblings.rank_ranges``, the seed's ``[preNode, lastNode]``); None: in any order.
    ``distinct``: one quota a node. Exhaustive."""
    left = {n.name: dict(room[n.name]) for n in nodes}
    top = max((n.index for n in nodes), default=0)
    fences = [
        (
            max((x for j, x in (bound or {}).items() if j < i), default=-1),
            min((x for j, x in (bound or {}).items() if j > i), default=top),
        )
        for i in g.unbound
    ]
    taken: set[str] = set()

    def go(at: int, low: int) -> bool:
        if at == len(g.unbound):
            return True
        need = g.members[g.unbound[at]].need()
        lo, hi = fences[at] if bound is not None else (-1, top)
        for n in nodes:
            if n.name in taken or not (max(low, lo) <= n.index <= hi and fits(need, left[n.name])):
                continue
            charge(left[n.name], need, 1)
            taken.update([n.name] if distinct else [])
            found = go(at + 1, n.index if bound is not None else -1)
            taken.discard(n.name)
            charge(left[n.name], need, -1)
            if found:
                return True
        return False

    return go(0, -1)


def in_best_order(
    g: MixedGang, nodes: Sequence[NodeSpec], room: Mapping[str, Need], *, distinct: bool = False
) -> Callable[[Sequence[NodeSpec]], bool]:
    """Whether some nodes hold the unbound quotas of ``g`` (``distinct``: one a node) in the best
    order ``nodes`` allow: in rank order inside the fences its bound quotas leave, else in rank
    order among its own, else any (``mixedorder.order_kept``)."""
    index = {n.name: n.index for n in nodes}
    levels: list[Mapping[int, int] | None] = [{i: index[n] for i, n in g.bound.items()}, {}, None]
    kept = next((b for b in levels if _fits_in_order(g, nodes, room, b)), None)
    return lambda ns: _fits_in_order(g, ns, room, kept, distinct=distinct)


@st.composite
def with_domains(draw: st.DrawFn) -> MixedCluster:
    """:func:`domain_mixed`'s clusters, more often with a few nodes in one domain."""
    c = draw(domain_mixed())
    for n in c.nodes:
        if draw(st.booleans()):
            n.domain = f"{n.leaf}a"
    return c


@st.composite
def partly_bound(draw: st.DrawFn) -> MixedCluster:
    """:func:`with_domains`' clusters whose gang of two quotas or more has some bound, by default."""
    c = draw(with_domains())
    g = c.gangs[0]
    g.members += [draw(members)] * (len(g.members) < 2)
    if not g.bound:
        draw_bound(draw, g, c.nodes, {n.name: n.load() for n in c.nodes})
    c.pack = False
    return c


@PROPERTY
@given(partly_bound())
@example(c=_launcher_beside_a_bound_worker())
def test_the_rest_of_a_mixed_gang_takes_no_bound_siblings_node_while_free_ones_hold_it(c: MixedCluster) -> None:
    """By default a node holding a bound quota of the gang is no distinct node: when the nodes of
    the gang's zones free of it hold the rest (in the best order those zones allow), the rest
    takes none of its bound siblings' nodes."""
    g = c.gangs[0]
    where = placed(c)
    if not all(where):
        return
    spec = {n.name: n for n in c.nodes}
    room = free_room(c.nodes, c.start())
    held = set(g.bound.values())
    zones = {spec[n].zone for n in where}
    nodes = sorted((n for n in c.nodes if n.zone in zones and n.name in room), key=lambda n: n.index)
    needs = [g.members[i].need() for i in g.unbound]
    free = [n for n in nodes if n.name not in held and any(fits(m, room[n.name]) for m in needs)]
    if not in_best_order(g, nodes, room, distinct=True)(free):
        return  # its free nodes take no quota each
    new = {where[i] for i in g.unbound}
    assert not new & held, f"{g.name} puts its rest beside its bound siblings while free nodes hold it: {where}"
