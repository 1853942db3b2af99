"""A zone's nodes as a gang whose quotas differ in size sees them (``mixedplanner.py``): which of
them some kind of the gang may use, their room and QN score, and what they hold of the gang (the
zone's frontier, ``mixedfrontier``).

Both depend only on the zone's nodes and on the gang's shapes (its kinds, for the frontier), so
they are kept in the session's memo (``FitMemo.mixed_members``, ``FitMemo.mixed_fronts``) until
a node of the zone changes (:meth:`FitMemo.zone_version`), and shared by every gang of those
shapes. A cycle binds gangs zone by zone, so a gang finds every zone but the last one bound into
as the previous gang of its kinds left it. Holds are applied after: a node held for another
gang is left out of the nodes, and a zone that loses one is measured for this gang alone.

Benchmark (``bench/binder_cycle.py --launchers --nodes 1000 --jobs 400``, 400 MPIJob gangs of a
launcher and eight workers): the cycle went from 2.37 s to 0.68 s when frontiers were kept.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple, TypeVar, cast

from extender.model.job import JobInfo
from extender.model.quota import QuotaInfo
from extender.plugins.topology.fitmemo import KindsKey, MembersKey
from extender.plugins.topology.gangparts import Mix
from extender.plugins.topology.gangplan import ZoneId
from extender.plugins.topology.mixedfrontier import Frontier, frontier_of, may_hold
from extender.plugins.topology.mixedorder import Kind, MixedNode

if TYPE_CHECKING:
    from extender.plugins.topology.planner import GangPlanner

__all__ = ["MixedMembers", "kinds_key"]

K = TypeVar("K")
V = TypeVar("V")
Shaped = list[list[tuple[QuotaInfo, int | None]]]  # per kind: each representative and its shape id


class _Kept(NamedTuple):
    nodes: list[MixedNode]
    key: MembersKey | None  # None: scanned for this gang alone (a quota of no shape)
    version: int


def kinds_key(kinds: Sequence[Kind]) -> KindsKey:
    """The gang's kinds as a key: two gangs of equal keys hold the same of every node."""
    return tuple((tuple(k.request.items()), k.count, k.apart) for k in kinds)


def _at_version(kept: dict[K, tuple[int, V]], key: K, version: int, compute: Callable[[], V]) -> V:
    """What ``kept`` holds under ``key`` if it was kept at ``version``, else ``compute()``, kept."""
    found = kept.get(key)
    if found is None or found[0] != version:
        found = kept[key] = (version, compute())
    return found[1]


class MixedMembers:
    """The zones' members and frontiers for one :class:`GangPlanner` (its session, memo, holds)."""

    def __init__(self, planner: GangPlanner) -> None:
        self.p = planner

    def of(self, job: JobInfo, mix: Mix, zids: Iterable[ZoneId]) -> dict[ZoneId, list[MixedNode]]:
        """Each zone's nodes not held for another gang, with their room, which kinds they take and
        their QN score for the gang's largest kind."""
        return {zid: self._unheld(job, kept) for zid, kept in self._kept(mix, zids).items()}

    def with_fronts(
        self, job: JobInfo, mix: Mix, zids: Iterable[ZoneId]
    ) -> tuple[dict[ZoneId, list[MixedNode]], Callable[[ZoneId], Frontier], Callable[[ZoneId], bool]]:
        """:meth:`of`; what a zone's members hold of the gang (``mixedfrontier.frontier_of``),
        measured when asked: kept in the memo for the zones whose members are the memo's whole
        list (none held for another gang), measured for this gang alone for the others; and
        whether a zone may hold it alone: yes when its frontier is kept (it answers at once),
        else ``mixedfrontier.may_hold`` of its members, kept likewise (a full zone is read once
        until it changes, not by every gang)."""
        memo, kinds = self.p.memo, kinds_key(mix.kinds)
        members: dict[ZoneId, list[MixedNode]] = {}
        whole: dict[ZoneId, tuple[tuple[MembersKey, KindsKey], int, list[MixedNode]]] = {}
        for zid, kept in self._kept(mix, zids).items():
            members[zid] = nodes = self._unheld(job, kept)
            if kept.key is not None and len(nodes) == len(kept.nodes):
                whole[zid] = ((kept.key, kinds), kept.version, kept.nodes)

        def measure(zid: ZoneId) -> Frontier:
            if zid not in whole:
                return frontier_of(members[zid], mix.kinds)
            key, version, nodes = whole[zid]
            return _at_version(memo.mixed_fronts, key, version, lambda: frontier_of(nodes, mix.kinds))

        def may(zid: ZoneId) -> bool:
            if zid not in whole:
                return may_hold(members[zid], mix.kinds)
            key, version, nodes = whole[zid]
            front = memo.mixed_fronts.get(key)
            if front is not None and front[0] == version:
                return True
            return _at_version(memo.mixed_may, key, version, lambda: may_hold(nodes, mix.kinds))

        return members, measure, may

    def _unheld(self, job: JobInfo, kept: _Kept) -> list[MixedNode]:
        if self.p.holds.any():
            return [n for n in kept.nodes if not self.p.holds.held_for_other(n.name, job.key)]
        return list(kept.nodes)

    def _kept(self, mix: Mix, zids: Iterable[ZoneId]) -> dict[ZoneId, _Kept]:
        """Each zone's nodes some kind of the gang may use, holds aside, as the memo keeps them
        (``FitMemo.mixed_members``, by the zone, each kind's shape ids and the head's) when every
        quota of the gang has a shape; else scanned for this gang alone."""
        memo = self.p.memo
        shaped = [[(rep, memo.shape_of(rep)) for rep in reps] for reps in mix.reps]
        head_sid = memo.shape_of(mix.head)
        sids = tuple(tuple(sid for _, sid in kind) for kind in shaped)
        out: dict[ZoneId, _Kept] = {}
        if head_sid is None or any(sid is None for kind in sids for sid in kind):
            for zid in zids:
                out[zid] = _Kept(self._scan(mix, zid, shaped, head_sid), None, 0)
            return out
        for zid in zids:
            key = (zid, cast("tuple[tuple[int, ...], ...]", sids), head_sid)
            version = memo.zone_version(zid)
            kept = memo.mixed_members.get(key)
            if kept is None:
                kept = memo.mixed_members[key] = (version, self._scan(mix, zid, shaped, head_sid))
            elif kept[0] != version:
                changed = memo.changed_since(zid, kept[0])
                nodes = self._scan(mix, zid, shaped, head_sid, only=changed, was=kept[1])
                kept = memo.mixed_members[key] = (version, nodes)
            out[zid] = _Kept(kept[1], key, version)
        return out

    def _scan(
        self,
        mix: Mix,
        zid: ZoneId,
        shaped: Shaped,
        head_sid: int | None,
        *,
        only: Collection[str] | None = None,
        was: Sequence[MixedNode] = (),
    ) -> list[MixedNode]:
        """Every node of the zone that some kind of the gang may use, holds aside, in the zone's
        order. ``only``: just these nodes changed since the zone's list was ``was``; the others
        are taken from it as they were (a node's room, predicates and score change only when it
        or, for a score that reads them, a neighbour does: ``FitMemo.zone_version``)."""
        memo, out = self.p.memo, []
        before = {n.name: n for n in was}
        for name in memo.zone_nodes[zid]:
            if only is not None and name not in only:
                if (kept := before.get(name)) is not None:
                    out.append(kept)
                continue
            node = self.p.ssn.node(name)
            if node is None:
                continue
            eligible = tuple(all(memo.eligible(rep, sid, node) for rep, sid in kind) for kind in shaped)
            if any(eligible):
                score = memo.score(mix.head, head_sid, node)
                out.append(MixedNode(name, node.index, zid, node.quota_room().q, eligible, score))
        return out
