"""A gang whose quotas attract one another (``quotaAffinity`` between its own quotas: a quota must
share a node with the one it names), against an exhaustive oracle (issue 16 item 2: a gang that
the rules allow is never refused).

The quotas are bound in rank order, so a quota naming an earlier one goes to that one's node
(the ``quotaaffinity`` predicate, once the earlier one is bound), and under strict rank order every
quota between them goes there too (node indices never descend). A quota naming a later one is
free (nothing it names is bound when it is). The planner plans such quotas as one
(``gangparts.glue``).

The clusters of ``test_topology_property`` with one gang, none of it bound yet, all of it needed;
each quota after the first names, or not, one quota before it; one cycle. Then: the gang is placed
iff its **units** (the quotas that must share a node, joined) fit the usable nodes of one GPU model
(for a strict gang, in rank order); and, when placed, every naming quota is on the node of the
one it names, on usable nodes of one model, in rank order for a strict gang.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from extender.cache.cache import ClusterCache
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.props import PROPERTY
from tests.core.scenarios import quota_node
from tests.core.test_gang_anti_affinity_property import POLICIES
from tests.core.topo_cluster import NOW, NodeSpec, check_ledgers
from tests.core.topo_gangs import Cluster, clusters, room


def units(names: dict[int, int], workers: int, strict: bool) -> list[list[int]]:
    """The quotas that must share a node (task indices, rank order), joined; ``names``: quota →
    the earlier quota it names."""
    parent = list(range(workers))

    def root(p: int) -> int:
        while parent[p] != p:
            p = parent[p]
        return p

    for i, j in names.items():
        for a, c in [(k, k + 1) for k in range(j, i)] if strict else [(j, i)]:
            parent[max(root(a), root(c))] = min(root(a), root(c))
    out: dict[int, list[int]] = {}
    for p in range(workers):
        out.setdefault(root(p), []).append(p)
    return sorted(out.values())


def fits(sizes: list[int], nodes: list[NodeSpec], slots: dict[str, int], *, ordered: bool) -> bool:
    """Whether units of ``sizes`` quotas (rank order) fit the nodes' ``slots``, one node a unit
    (``ordered``: node indices never descend) — exhaustive."""
    left = {n.name: slots.get(n.name, 0) for n in nodes}
    ranked = sorted(nodes, key=lambda n: n.index)

    def go(u: int, low: int) -> bool:
        if u == len(sizes):
            return True
        for n in ranked:
            if (not ordered or n.index >= low) and left[n.name] >= sizes[u]:
                left[n.name] -= sizes[u]
                ok = go(u + 1, n.index)
                left[n.name] += sizes[u]
                if ok:
                    return True
        return False

    return go(0, -1)


@PROPERTY
@given(clusters(max_gangs=1), st.booleans(), st.data())
def test_a_gang_of_attracting_quotas_runs_whenever_its_units_fit(c: Cluster, pack: bool, data: st.DataObject) -> None:
    (g,) = c.gangs
    g = replace(g, bound={}, min_member=0, key="")
    c = Cluster(c.nodes, [g])
    names = {
        i: j for i in range(1, g.workers) if (j := data.draw(st.integers(-1, i - 1), label=f"quota {i} names")) >= 0
    }
    objs = c.objects()
    for obj in objs:
        name = obj["metadata"]["name"]
        if obj["kind"] == "Quota" and name in g.quotas and g.quotas.index(name) in names:
            named = g.quotas[names[g.quotas.index(name)]]
            obj["spec"]["affinity"] = {"quotaAffinity": [{"quotaNames": [named]}]}
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, objs)
    assert not cache.conversion_errors
    result = Scheduler(POLICIES[pack]).run_once(cache.snapshot(NOW))
    ssn = result.session
    check_ledgers(ssn)
    placed = [quota_node(ssn, q) for q in g.quotas]
    slots = room(c, {n.name: n.busy for n in c.nodes}, g.gpu)
    sizes = [len(u) for u in units(names, g.workers, g.strict)]
    models = sorted({n.model for n in c.nodes})
    fit = any(fits(sizes, [n for n in c.nodes if n.model == m], slots, ordered=g.strict) for m in models)
    if not fit:
        assert not any(placed), f"placed on {placed} though its units {sizes} fit no model"
        return
    assert all(placed), f"its units {sizes} fit but it was refused: {result.verdicts}"
    spec = {n.name: n for n in c.nodes}
    assert all(spec[n].usable for n in placed) and len({spec[n].model for n in placed}) == 1, placed
    for i, j in names.items():
        assert placed[i] == placed[j], f"quota {i} names quota {j} but is on {placed[i]}, not {placed[j]}"
    if g.strict:
        indices = [spec[n].index for n in placed]
        assert indices == sorted(indices), f"{g.name} breaks rank order: {placed}"
