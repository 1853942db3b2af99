"""The floor of a binder cycle (issue 16 item 8): the least work a correct hop ② must do for the
same input — a minimal per-gang greedy on the same snapshot the scheduler reads.

Rules (the placement rules of DESIGN §1, capacity only):

* gangs are the snapshot's pending jobs with unbound, claimed quotas, in creation order; a gang is
  placed whole or not at all;
* a node holds ``min over resources of quota_idle // request`` more quotas of the gang's shape (the
  elementwise largest request among its unbound quotas); no other predicate is checked;
* one zone (GPU spec × RDMA leaf, ``snapshot.zones``) if any holds the gang: the one with the least
  room that still holds it (ties: fewer nodes, then zone order); else the fewest zones of one spec,
  largest room first; the gang does not fit: skipped;
* inside a zone, ranks in ascending node index, one quota per node per pass (distinct nodes while
  the zone has enough), so task *i* sits on a node index ≥ that of task *i−1* within a zone.

What it must do and no more: read every node's room once per request shape, every pending gang's
quotas, the zone aggregates per gang, and the nodes it assigns; it keeps per-shape room counts per
node and per zone, updated only for the nodes a gang takes. It writes nothing to the snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from extender.framework.session import Snapshot
from extender.model.node import NodeInfo

__all__ = ["Shape", "greedy_floor"]

Shape = tuple[tuple[str, int], ...]  # (resource, units) with units > 0, sorted


class _Room:
    """Per request shape: how many more quotas each node and each zone can take."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.zones: list[tuple[str, str]] = list(snap.zones)
        self.zone_of: dict[str, int] = {n: z for z, key in enumerate(self.zones) for n in snap.zones[key]}
        self.free: dict[str, dict[str, int]] = {}  # node → its quota_idle, copied when first changed
        self.fits: dict[Shape, dict[str, int]] = {}
        self.zone_fits: dict[Shape, list[int]] = {}

    def _idle(self, node: str) -> Mapping[str, int]:
        own = self.free.get(node)
        if own is not None:
            return own
        info: NodeInfo = self.snap.nodes[node]
        return info.quota_idle.q

    def _count(self, node: str, shape: Shape) -> int:
        idle = self._idle(node)
        return min(idle.get(r, 0) // v for r, v in shape)

    def of(self, shape: Shape) -> tuple[dict[str, int], list[int]]:
        if shape not in self.fits:
            fits = {n: self._count(n, shape) for n in self.zone_of}
            per_zone = [0] * len(self.zones)
            for n, k in fits.items():
                per_zone[self.zone_of[n]] += k
            self.fits[shape] = fits
            self.zone_fits[shape] = per_zone
        return self.fits[shape], self.zone_fits[shape]

    def take(self, node: str, shape: Shape, count: int) -> None:
        own = self.free.get(node)
        if own is None:
            own = self.free[node] = dict(self.snap.nodes[node].quota_idle.q)
        for r, v in shape:
            own[r] = own.get(r, 0) - v * count
        z = self.zone_of[node]
        for s, fits in self.fits.items():
            k = self._count(node, s)
            self.zone_fits[s][z] += k - fits[node]
            fits[node] = k


def _choose_zones(room: _Room, per_zone: Sequence[int], workers: int) -> list[int]:
    """One zone (best fit) if any holds the gang, else the fewest zones of one spec."""
    zones = room.zones
    snap = room.snap
    whole = [z for z, k in enumerate(per_zone) if k >= workers]
    if whole:
        return [min(whole, key=lambda z: (per_zone[z], len(snap.zones[zones[z]]), z))]
    best: list[int] = []
    by_spec: dict[str, list[int]] = {}
    for z, (spec, _) in enumerate(zones):
        by_spec.setdefault(spec, []).append(z)
    for members in by_spec.values():
        chosen, total = [], 0
        for z in sorted(members, key=lambda z: (-per_zone[z], z)):
            if total >= workers or per_zone[z] == 0:
                break
            chosen.append(z)
            total += per_zone[z]
        if total >= workers and (not best or len(chosen) < len(best)):
            best = chosen
    return best


def _assign(room: _Room, zone: int, fits: Mapping[str, int], workers: int) -> list[tuple[str, int]]:
    """(node, quotas) in ascending node index, one per node per pass."""
    nodes = room.snap.zones[room.zones[zone]]
    taken: dict[str, int] = {}
    left = workers
    while left:
        moved = False
        for n in nodes:
            if left and fits[n] > taken.get(n, 0):
                taken[n] = taken.get(n, 0) + 1
                left -= 1
                moved = True
        if not moved:
            break
    return [(n, taken[n]) for n in nodes if n in taken]


def greedy_floor(snap: Snapshot) -> dict[str, str]:
    """quota → node for every gang the rules above place."""
    room = _Room(snap)
    out: dict[str, str] = {}
    pending = snap.pending_jobs if snap.pending_jobs is not None else snap.jobs
    jobs = sorted((snap.jobs[k] for k in pending if k in snap.jobs), key=lambda j: (j.created, j.key))
    for job in jobs:
        unbound = []
        for t in job.tasks.values():
            q = snap.quotas.get(t.quota) if t.quota else None
            if q is not None and not q.node_name:
                unbound.append((t.index if t.index is not None else 0, q.name, q.request.q))
        if not unbound or len(unbound) < job.min_member:
            continue
        unbound.sort()
        need: dict[str, int] = {}
        for _, _, req in unbound:
            for r, v in req.items():
                if v > need.get(r, 0):
                    need[r] = v
        shape: Shape = tuple(sorted(need.items()))
        if not shape:
            continue
        fits, per_zone = room.of(shape)
        zones = _choose_zones(room, per_zone, len(unbound))
        if not zones:
            continue
        plan: list[tuple[str, int]] = []
        left = len(unbound)
        for z in zones:
            part = _assign(room, z, fits, min(left, per_zone[z]))
            plan += part
            left -= sum(k for _, k in part)
        ranks = iter(unbound)
        for node, k in plan:
            for _ in range(k):
                out[next(ranks)[1]] = node
        for node, k in plan:
            room.take(node, shape, k)
    return out
