"""The floor of a binder cycle (issue 16 item 8): the least work a correct hop ② must do for the
same input — a minimal per-gang greedy on the same snapshot the scheduler reads.

Rules (the placement rules of DESIGN §1, capacity only):

* gangs are the snapshot's pending jobs with unbound, claimed quotas, in creation order; a gang is
  placed whole or not at all;
* a node holds ``min over resources of quota_idle // request`` more quotas of the gang's shape (the
  elementwise largest request among its unbound quotas: a gang of several sizes, a launcher beside
  its workers, is planned as if every quota were that large, which never over-fills a node); what
  a node gives away is each quota's own request; no other predicate is checked;
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

import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from extender import wellknown
from extender.framework.policy import Policy
from extender.framework.session import Session, Snapshot
from extender.framework.status import Code, Reason
from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo

__all__ = ["Shape", "greedy_floor", "policy_floor"]

_ROOM = frozenset({Reason.INSUFFICIENT_QUOTA_IDLE})

Shape = tuple[tuple[str, int], ...]  # (resource, units) with units > 0, sorted


class _Room:
    """Per request shape: how many more quotas each node and each zone can take."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.zones: list[tuple[str, str]] = list(snap.zones)
        self.zone_of: dict[str, int] = {n: z for z, key in enumerate(self.zones) for n in snap.zones[key]}
        self.free: dict[str, dict[str, int]] = {}  # node → its quota_idle, copied when first changed
        self.fits: dict[object, dict[str, int]] = {}  # shape (or shape and judge key) → node → room
        self.zone_fits: dict[object, list[int]] = {}
        self.shapes: dict[object, tuple[Shape, Mapping[str, bool] | None]] = {}

    def _idle(self, node: str) -> Mapping[str, int]:
        own = self.free.get(node)
        if own is not None:
            return own
        info: NodeInfo = self.snap.nodes[node]
        return info.quota_idle.q

    def _count(self, node: str, shape: Shape) -> int:
        idle = self._idle(node)
        return min(idle.get(r, 0) // v for r, v in shape)

    def of(
        self, shape: Shape, judged: tuple[object, Mapping[str, bool]] | None = None
    ) -> tuple[dict[str, int], list[int]]:
        """Per node and per zone, how many more quotas of ``shape`` fit; with ``judged`` = (key,
        node → eligible), only the eligible nodes count (the policy floor's shapes)."""
        key: object = shape if judged is None else (shape, judged[0])
        if key not in self.fits:
            ok = judged[1] if judged is not None else None
            fits = {n: self._count(n, shape) if ok is None or ok.get(n) else 0 for n in self.zone_of}
            per_zone = [0] * len(self.zones)
            for n, k in fits.items():
                per_zone[self.zone_of[n]] += k
            self.fits[key] = fits
            self.zone_fits[key] = per_zone
            self.shapes[key] = (shape, ok)
        return self.fits[key], self.zone_fits[key]

    def take(self, node: str, shape: Shape, count: int) -> None:
        own = self.free.get(node)
        if own is None:
            own = self.free[node] = dict(self.snap.nodes[node].quota_idle.q)
        for r, v in shape:
            own[r] = own.get(r, 0) - v * count
        z = self.zone_of[node]
        for key, fits in self.fits.items():
            s, ok = self.shapes[key]
            k = self._count(node, s) if ok is None or ok.get(node) else 0
            self.zone_fits[key][z] += k - fits[node]
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
        for _, _, req in unbound:
            if req != need:  # several sizes: each node gives away what its quotas ask
                given = Counter((out[name], own_shape(req, shape)) for _, name, req in unbound)
                for (node, own), k in given.items():
                    room.take(node, own, k)
                break
        else:  # one size: each is the shape
            for node, k in plan:
                room.take(node, shape, k)
    return out


def largest_shape(requests: Iterable[Mapping[str, int]]) -> Shape:
    """The elementwise largest of ``requests``: a quota of that shape holds any of them."""
    need: dict[str, int] = {}
    for req in requests:
        for r, v in req.items():
            if v > need.get(r, 0):
                need[r] = v
    return tuple(sorted(need.items()))


def own_shape(request: Mapping[str, int], largest: Shape) -> Shape:
    """``request`` as a shape (``largest`` itself when they are equal: a gang of one size)."""
    own = tuple(sorted((r, v) for r, v in request.items() if v > 0))
    return largest if own == largest else own


# --- the policy floor ------------------------------------------------------------------------


def policy_floor(snap: Snapshot, policy: Policy, parts: dict[str, float] | None = None) -> dict[str, str]:
    """The capacity floor plus what the *configured policy* obliges any implementation of the
    seed's design to do for the same input, and nothing more:

    * open a session of the policy on the snapshot (its plugins read the snapshot once);
    * per request shape (``Session.filter_key``) and node: the QN ``select`` and ``predicate``
      stages once (a refusal for want of ``quota_idle`` only leaves the node eligible; its room is
      arithmetic, as in the capacity floor);
    * per gang, the QN ``node_order`` score of each node with room in the chosen zones, once per
      node and shape until a bind changes the node; the gang takes the best-scored nodes (distinct
      while the zone has enough), ranks in ascending node index;
    * one Statement operation per quota and one commit per gang (the seed's transaction: the
      plugins' event handlers follow every bind).

    Zones and their order are the capacity floor's. Returns quota → node. ``parts``, when given,
    receives the seconds of each obligation: ``session``, ``judge`` (select and predicate),
    ``score`` (node_order), ``statement`` (the operations, their handlers, the commits); the rest
    of the run is the capacity floor's work."""
    spent = parts if parts is not None else {}
    clock = time.perf_counter
    t0 = clock()
    ssn = Session(snap, policy)
    spent["session"] = spent.get("session", 0.0) + clock() - t0
    room = _Room(snap)
    judged: dict[object, dict[str, bool]] = {}  # shape key → node → eligible
    scores: dict[object, dict[str, float]] = {}  # shape key → node → score (dropped on a bind)
    out: dict[str, str] = {}
    pending = snap.pending_jobs if snap.pending_jobs is not None else snap.jobs
    jobs = sorted((snap.jobs[k] for k in pending if k in snap.jobs), key=lambda j: (j.created, j.key))
    for job in jobs:
        unbound = [q for q in ssn.job_quotas(job) if not q.node_name]
        if not unbound or len(unbound) < job.min_member:
            continue
        rep = max(unbound, key=lambda q: (q.request.q.get(wellknown.RESOURCE_GPU, 0), sum(q.request.q.values())))
        key, ok = _judge(ssn, unbound, judged, spent)
        shape = largest_shape(q.request.q for q in unbound)
        fits, per_zone = room.of(shape, (key, ok))
        zones = _choose_zones(room, per_zone, len(unbound))
        if not zones:
            continue
        scored = scores.setdefault(key, {})
        workers = len(unbound)
        plan = _scored_plan(ssn, room, rep, zones, fit=(fits, per_zone), scored=scored, workers=workers, spent=spent)
        in_statement = 0.0
        t0 = clock()
        stmt = ssn.statement()
        ranks = iter(sorted(unbound, key=lambda q: (q.rank if q.rank is not None else 0, q.name)))
        one_size = all(q.request == rep.request for q in unbound)  # each quota is the shape
        for node_name, k in plan:
            placed = [next(ranks) for _ in range(k)]
            for q in placed:
                stmt.allocate_quota_to_node(q.name, node_name)
                out[q.name] = node_name
            in_statement += clock() - t0
            if one_size:
                room.take(node_name, shape, k)
            else:  # several sizes: the node gives away what its quotas ask
                for own, n in Counter(own_shape(q.request.q, shape) for q in placed).items():
                    room.take(node_name, own, n)
            for s in scores.values():
                s.pop(node_name, None)
            t0 = clock()
        stmt.commit()
        spent["statement"] = spent.get("statement", 0.0) + in_statement + clock() - t0
    return out


def _scored_plan(
    ssn: Session,
    room: _Room,
    rep: QuotaInfo,
    zones: Sequence[int],
    *,
    fit: tuple[Mapping[str, int], Sequence[int]],
    scored: dict[str, float],
    workers: int,
    spent: dict[str, float],
) -> list[tuple[str, int]]:
    """(node, quotas) in the chosen ``zones``: the best-scored nodes with room (distinct while the
    zone has enough), in index order; ``scored`` keeps each node's QN score until a bind."""
    fits, per_zone = fit
    plan: list[tuple[str, int]] = []
    left = workers
    for z in zones:
        members = room.snap.zones[room.zones[z]]
        nodes = [n for n in members if fits[n] > 0]  # index order
        t0 = time.perf_counter()
        for n in nodes:
            if n not in scored:
                node = ssn.node(n)
                assert node is not None
                scored[n] = ssn.qn.node_order(rep, node)
        spent["score"] = spent.get("score", 0.0) + time.perf_counter() - t0
        m = min(left, per_zone[z])
        if len(nodes) >= m:  # distinct nodes: the m best scored, in index order
            best = set(sorted(nodes, key=lambda n: -scored[n])[:m])
            part = [(n, 1) for n in nodes if n in best]
        else:
            part = _assign(room, z, fits, m)
        plan += part
        left -= m
    return plan


def _judge(
    ssn: Session, unbound: Sequence[QuotaInfo], judged: dict[object, dict[str, bool]], spent: dict[str, float]
) -> tuple[object, dict[str, bool]]:
    """(key, node → eligible) for the gang: the QN select and predicate stages once per node and
    request shape (``Session.filter_key``); a node is eligible for a gang of several shapes (a
    launcher beside its workers) when it is for each of them."""
    kinds = {ssn.filter_key(q): q for q in unbound}
    key: object = next(iter(kinds)) if len(kinds) == 1 else tuple(kinds)
    for k, q in kinds.items():
        if k not in judged:
            t0 = time.perf_counter()
            judged[k] = {n.name: _eligible(ssn, q, n) for n in ssn.nodes()}
            spent["judge"] = spent.get("judge", 0.0) + time.perf_counter() - t0
    if key not in judged:
        each = [judged[k] for k in kinds]
        judged[key] = {n: all(ok[n] for ok in each) for n in each[0]}
    return key, judged[key]


def _eligible(ssn: Session, quota: QuotaInfo, node: NodeInfo) -> bool:
    status = ssn.qn.select(quota, node)
    if status.ok:
        status = ssn.qn.predicate(quota, node)
    return status.ok or (status.code is Code.UNSCHEDULABLE and {f.reason for f in status.failures} <= _ROOM)
