"""The session memo of a zone's members for gangs of mixed sizes (``mixedmembers.py``) is what a
fresh reading of the zone gives, at every moment a gang asks for it.

A cycle places gangs one after another and keeps each zone's members (their room, the kinds they
may take, their QN score) between them; a zone a gang changed is brought up to date node by node
(only the nodes that changed are read again). On the random clusters of
``test_mixed_gang_property`` (1–3 RDMA gangs of mixed sizes, existing load, NotReady and tainted
nodes, bound siblings), every list the memo answers with equals the zone read again from the
session at that moment.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given

from extender.cache.cache import ClusterCache
from extender.plugins.topology.gangparts import Mix
from extender.plugins.topology.gangplan import ZoneId
from extender.plugins.topology.mixedmembers import MixedMembers
from extender.scheduler import Scheduler
from tests import builders as b
from tests.core.mixed_gangs import PACKING, POLICY, Member, MixedCluster, MixedGang, mixed_clusters, node
from tests.core.props import PROPERTY
from tests.core.topo_cluster import NOW


@PROPERTY
@given(mixed_clusters())
def test_kept_members_are_the_zone_read_again(c: MixedCluster) -> None:
    _cycle_checking_members(c)


def test_a_zone_a_gang_changed_is_updated_and_still_read_right() -> None:
    """Three MPIJob-like gangs (a 1-GPU launcher and two 4-GPU workers) on one leaf of six nodes,
    two of them busy: the second and third gangs find the zone changed by the one before, and the
    memo's update of it is what reading it again gives."""
    members = [Member(1, 2), Member(4, 8), Member(4, 8)]
    nodes = [node(0, 1, busy=8), node(1, 1, busy=4), *(node(i, 1) for i in range(2, 6))]
    gangs = [MixedGang(f"g{k}", list(members)) for k in range(3)]
    assert _cycle_checking_members(MixedCluster(nodes, gangs)) >= 2


def _cycle_checking_members(c: MixedCluster) -> int:
    """One cycle on ``c``; each answer of the memo is checked against a fresh scan. Returns how
    many answers the memo updated after a change of the zone."""
    kept = MixedMembers._kept
    updated = 0

    def checked(self: MixedMembers, mix: Mix, zids: Iterable[ZoneId]) -> Any:
        nonlocal updated
        zids = list(zids)
        memo = self.p.memo
        versions = {zid: memo.mixed_members.get(k) for zid in zids for k in memo.mixed_members if k[0] == zid}
        out = kept(self, mix, zids)
        shaped = [[(rep, memo.shape_of(rep)) for rep in reps] for reps in mix.reps]
        head_sid = memo.shape_of(mix.head)
        for zid, got in out.items():
            fresh = self._scan(mix, zid, shaped, head_sid)
            assert got.nodes == fresh, f"zone {zid}: kept {got.nodes}, read again {fresh}"
            before = versions.get(zid)
            updated += before is not None and before[0] != got.version
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(MixedMembers, "_kept", checked)
        cache = ClusterCache(clock=lambda: NOW)
        b.feed(cache, c.objects())
        Scheduler(PACKING if c.pack else POLICY).run_once(cache.snapshot(NOW))
    return updated
