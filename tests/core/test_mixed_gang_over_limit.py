"""Gangs whose quotas differ in size beyond ``mixedfrontier.STATE_LIMIT`` count vectors, against an
exhaustive oracle (issue 16 items 2, 3, 6).

Such a gang (many kinds of many quotas each) is not planned over all its kinds: kinds are merged
until few enough count vectors are left (``gangparts.coarsen``), a merged kind asking for the
most of every resource any of its quotas asks for. Real gangs that large do not fit the oracle's
small clusters, so the limit is lowered here, to 0 (every gang of several kinds of
``test_mixed_gang_property``'s clusters is merged into one kind, its **envelope**: per resource,
the most any of its quotas asks for) or to a few count vectors (some kinds are merged, each
asking for no more than the envelope). Its gangs are whole (no ``minMember`` below the size,
nothing bound before). Then:

* **valid**: invariants 1 and 3, no node over its allocatable on any resource (never an
  over-promise: a quota that asks for more CPU than the gang's largest by GPUs still fits where
  it goes), one GPU model, usable nodes, strict rank order when asked;
* **whole, as its envelope**: a gang is placed whenever its size in copies of its envelope fits
  one GPU model (against the start of the cycle when it is alone, else the end); at limit 0
  exactly then, and in exactly the fewest zones that hold those copies when it was placed.
"""

from __future__ import annotations

from unittest import mock

from hypothesis import example, given
from hypothesis import strategies as st

from extender.cache.cache import ClusterCache
from extender.plugins.topology import gangparts
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.mixed_gangs import PACKING, POLICY, Member, MixedCluster, MixedGang, mixed_clusters
from tests.core.mixed_gangs import node as _node
from tests.core.mixed_oracle import fewest_zones
from tests.core.props import PROPERTY
from tests.core.topo_cluster import NODE_ROOM, NOW, check_ledgers, free_room, used_before_each_gang


def whole(c: MixedCluster) -> MixedCluster:
    """``c`` with its gangs whole and unbound."""
    for g in c.gangs:
        g.bound, g.min_member = {}, 0
    return c


def _cpu_heavy_launcher() -> MixedCluster:
    """A 4-GPU worker (10 CPUs) and a 1-GPU launcher of 90 CPUs: counted as two 4-GPU workers,
    leaf 1's one node (8 GPUs, 96 CPUs) would hold the gang, and best fit would send it there,
    where the two quotas' 100 CPUs do not fit; leaf 2's two nodes hold it, one quota each."""
    return MixedCluster([_node(0, 1), _node(1, 2), _node(2, 2)], [MixedGang("g0", [Member(4, 10), Member(1, 90)])])


@PROPERTY
@given(mixed_clusters(), st.sampled_from([0, 0, 2, 5, 12]))
@example(c=_cpu_heavy_launcher(), limit=0)
def test_a_mixed_gang_beyond_the_state_limit_runs_as_copies_of_its_envelope_in_the_fewest_zones(
    c: MixedCluster, limit: int
) -> None:
    c = whole(c)
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, c.objects())
    with mock.patch.object(gangparts, "STATE_LIMIT", limit):
        result = Scheduler(PACKING if c.pack else POLICY).run_once(cache.snapshot(NOW))
    ssn = result.session
    check_ledgers(ssn)
    need_of = {q: m.need() for g in c.gangs for q, m in zip(g.quotas, g.members, strict=True)}
    gang_of = {q: g.name for g in c.gangs for q in g.quotas}
    start = c.start()
    before, end = used_before_each_gang(result, start, need_of, gang_of)
    for name, held in end.items():
        assert all(held[k] <= cap for k, cap in NODE_ROOM.items()), f"{name} over its allocatable: {held}"
    spec = {n.name: n for n in c.nodes}
    for g in c.gangs:
        nodes = [ssn.quota(q).node_name for q in g.quotas]  # type: ignore[union-attr]
        envelope = {k: max(m.need()[k] for m in g.members) for k in NODE_ROOM}
        copies = [envelope] * len(g.members)
        if not any(nodes):
            state = start if len(c.gangs) == 1 else end
            fewest = fewest_zones(c.nodes, free_room(c.nodes, state), copies, ordered=False)
            assert fewest is None, f"{g.name} fits as {len(copies)} of its envelope but was not placed"
            continue
        assert all(nodes), f"{g.name} is placed in part: {nodes}"
        placed = [spec[n] for n in nodes]
        assert len({n.model for n in placed}) == 1, f"{g.name} mixes GPU models: {nodes}"
        assert all(n.usable for n in placed), f"{g.name} on an unusable node: {nodes}"
        if g.strict:
            indices = [n.index for n in placed]
            assert indices == sorted(indices), f"{g.name} breaks strict rank order: {indices}"
        if limit:
            continue  # merged in part: no fewer zones than its merged kinds need are promised
        fewest = fewest_zones(c.nodes, free_room(c.nodes, before[g.name]), copies, ordered=False)
        zones = {n.zone for n in placed}
        assert len(zones) == fewest, f"{g.name} uses {len(zones)} zones, {fewest} hold it as its envelope: {nodes}"
