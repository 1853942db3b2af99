"""Gangs whose quotas differ in size beyond ``mixedplan.STATE_LIMIT`` count vectors, against an
exhaustive oracle (issue 16 items 2, 3, 6).

Such a gang (many kinds of many quotas each) is not planned exactly: every quota is counted as its
largest (``planner.py``). Real gangs that large do not fit the oracle's small clusters, so the
limit is lowered to 0 here: every gang of several kinds of ``test_mixed_gang_property``'s
clusters takes that path (gangs of one kind are planned as before). Its gangs are whole (no
``minMember`` below the size, nothing bound before), and their largest quota asks for the most
of every resource (were it not, counting every quota as it would be no bound at all). Then:

* **valid**: invariants 1 and 3, one GPU model, usable nodes, strict rank order when asked;
* **whole, as its largest**: a gang is placed exactly when its size in copies of its largest
  quota fits one GPU model (against the start of the cycle when it is alone, else the end), and
  then in exactly the fewest zones that hold those copies, when it was placed.
"""

from __future__ import annotations

from unittest import mock

from hypothesis import given

from extender.cache.cache import ClusterCache
from extender.plugins.topology import planner
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.mixed_oracle import fewest_zones
from tests.core.props import PROPERTY
from tests.core.test_mixed_gang_property import PACKING, POLICY, Member, MixedCluster, mixed_clusters
from tests.core.topo_cluster import NOW, check_ledgers, free_room, used_before_each_gang


def as_over_limit(c: MixedCluster) -> MixedCluster:
    """``c`` with its gangs whole, unbound, and led by a quota that asks the most of everything."""
    for g in c.gangs:
        g.bound, g.min_member = {}, 0
        top = max(range(len(g.members)), key=lambda i: (g.members[i].gpu, g.members[i].cpu))
        g.members[top] = Member(max(m.gpu for m in g.members), max(m.cpu for m in g.members))
    return c


@PROPERTY
@given(mixed_clusters())
def test_a_mixed_gang_beyond_the_state_limit_runs_as_its_largest_quota_in_the_fewest_zones(c: MixedCluster) -> None:
    c = as_over_limit(c)
    cache = ClusterCache(clock=lambda: NOW)
    b.feed(cache, c.objects())
    with mock.patch.object(planner, "STATE_LIMIT", 0):
        result = Scheduler(PACKING if c.pack else POLICY).run_once(cache.snapshot(NOW))
    ssn = result.session
    check_ledgers(ssn)
    need_of = {q: m.need() for g in c.gangs for q, m in zip(g.quotas, g.members, strict=True)}
    gang_of = {q: g.name for g in c.gangs for q in g.quotas}
    start = c.start()
    before, end = used_before_each_gang(result, start, need_of, gang_of)
    spec = {n.name: n for n in c.nodes}
    for g in c.gangs:
        nodes = [ssn.quota(q).node_name for q in g.quotas]  # type: ignore[union-attr]
        head = max(g.members, key=lambda m: (m.gpu, m.cpu)).need()
        copies = [head] * len(g.members)
        if not any(nodes):
            state = start if len(c.gangs) == 1 else end
            fewest = fewest_zones(c.nodes, free_room(c.nodes, state), copies, ordered=False)
            assert fewest is None, f"{g.name} fits as {len(copies)} of its largest but was not placed"
            continue
        assert all(nodes), f"{g.name} is placed in part: {nodes}"
        placed = [spec[n] for n in nodes]
        assert len({n.model for n in placed}) == 1, f"{g.name} mixes GPU models: {nodes}"
        assert all(n.usable for n in placed), f"{g.name} on an unusable node: {nodes}"
        if g.strict:
            indices = [n.index for n in placed]
            assert indices == sorted(indices), f"{g.name} breaks strict rank order: {indices}"
        fewest = fewest_zones(c.nodes, free_room(c.nodes, before[g.name]), copies, ordered=False)
        zones = {n.zone for n in placed}
        assert len(zones) == fewest, f"{g.name} uses {len(zones)} zones, {fewest} hold it as its largest: {nodes}"
