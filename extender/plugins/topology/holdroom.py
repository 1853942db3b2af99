"""What a hold makes room for (``holds.py``, rule "what it holds"): a waiting gang's unbound
quotas, counted in its own quotas, and the nodes that could take some of them.

* A gang of **one kind** counts copies of its quota: a node's room is how many it takes (now, and
  once empty of other jobs); a node too small for one even when empty is no candidate.
* A gang of **several kinds** (a launcher or master beside workers) gives each node the quotas
  that still fit it, largest first, each only where the QN stages let it (room aside): one 8-GPU
  and seven 1-GPU quotas take two 8-GPU nodes, not eight; nodes one GPU short of fifteen 1-GPU
  quotas and an 8-GPU one are closer to holding them than nodes with two 8-GPU nodes free and
  seven GPUs short. A node too small for its largest quota is a candidate when it would take a
  smaller one once empty (a 4-GPU node for its launcher): the hold covers the room the gang's
  own quotas can use, so small jobs do not keep taking the node its launcher waits for.
* Which nodes to hold (:func:`take`): of one kind, the roomiest now until covered; of several
  kinds, the fewest nodes that hold the gang once empty (exact, within stated limits), then the
  most of it a packing there places now, then the lowest indices (``holds.py`` says why).

"Empty" is empty of other jobs: what the gang's own bound quotas take on a node stays taken.
Pure functions of the session's memo (no I/O, clock or randomness).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from extender.model.quota import QuotaInfo
from extender.model.resources import Resource
from extender.plugins.topology.fitmemo import capacity_for
from extender.plugins.topology.gangparts import quota_size

if TYPE_CHECKING:
    from extender.plugins.topology.fitmemo import FitMemo

__all__ = ["MAX_NODES", "MAX_QUOTAS", "Ask", "Left", "Row", "bound_room", "need_of", "take"]

MAX_QUOTAS: Final = 8  # a mixed gang's hold is chosen exactly (``take``) up to this many quotas …
MAX_NODES: Final = 10  # … and this many candidate nodes in the zone; beyond, greedily
MAX_STEPS: Final = 2_000  # … and when the search ends within this many placements (else greedily)

Row = tuple[int, int, int, str]  # a node a hold may take: (room now, room when empty, index, name)
Ask = tuple[Resource, Callable[[str], bool]]  # a quota's request, and the nodes the QN stages let it on


def bound_room(quotas: Sequence[QuotaInfo]) -> dict[str, Resource]:
    """Node → what the gang's bound quotas take there (room that stays the gang's own)."""
    out: dict[str, Resource] = {}
    for q in quotas:
        if q.node_name:
            out[q.node_name] = out[q.node_name] + q.request if q.node_name in out else q.request
    return out


def need_of(memo: FitMemo, quotas: Sequence[QuotaInfo], kept: Mapping[str, Resource]) -> Left:
    """The gang's unbound quotas as a hold makes room for them (:class:`Left`): copies of its one
    kind, else each quota (largest first, by the planner's rule: ``gangparts.quota_size``), on
    the nodes the QN stages let it on, in the room a node has once empty of others (``kept``:
    what its own bound quotas take there) — or, for its room now, the room the node has now."""
    gpus = memo.ssn.gpu_resources
    unbound = sorted((q for q in quotas if not q.node_name), key=lambda q: quota_size(q, gpus), reverse=True)
    if len({q.request for q in unbound}) <= 1:
        return Left(len(unbound))
    lets: dict[object, Callable[[str], bool]] = {}
    asks: list[Ask] = []
    for q in unbound:
        sid = memo.shape_of(q)
        key = sid if sid is not None else q.name  # quotas of one shape are let on the same nodes
        if key not in lets:
            lets[key] = _lets_on(memo, q, sid)
        asks.append((q.request, lets[key]))

    def empty(name: str) -> Resource | None:
        node = memo.ssn.node(name)
        if node is None:
            return None
        own = kept.get(name)
        return node.allocatable - own if own is not None else node.allocatable

    def now(name: str) -> Resource | None:
        node = memo.ssn.node(name)
        return node.quota_room() if node is not None else None

    return Left(len(unbound), asks, empty, now)


def _lets_on(memo: FitMemo, quota: QuotaInfo, sid: int | None) -> Callable[[str], bool]:
    """Whether the QN stages let quotas like ``quota`` on a node (room aside), asked once a node."""
    seen: dict[str, bool] = {}

    def lets(name: str) -> bool:
        ok = seen.get(name)
        if ok is None:
            node = memo.ssn.node(name)
            ok = seen[name] = node is not None and memo.eligible(quota, sid, node)
        return ok

    return lets


class Left:
    """What of the gang a hold has yet to make room for, as nodes join it in turn: ``count`` of its
    unbound quotas. A gang of one kind counts copies, each node taking its room when empty (a
    ``Row``'s); a gang of several kinds (``asks``, largest first) gives each node, once empty
    (``empty``: its room then, None if unknown), those of the remaining quotas that still fit it
    and that the stages let on it. Its room *now* is counted the same way (:meth:`now`, ``now``:
    a node's room now), not in copies of its largest quota."""

    __slots__ = ("_empty", "_now", "asks", "count")

    def __init__(
        self,
        count: int,
        asks: Sequence[Ask] = (),
        empty: Callable[[str], Resource | None] | None = None,
        now: Callable[[str], Resource | None] | None = None,
    ) -> None:
        self.count, self.asks, self._empty, self._now = count, asks, empty, now

    @property
    def mixed(self) -> bool:
        """Its quotas differ in size: nodes are rowed by :meth:`row`, not by one shape's slots."""
        return self._empty is not None

    def after(self, rows: Iterable[Row]) -> Left:
        """What is left once the nodes of ``rows`` (in this order) join the hold."""
        if self._empty is None:
            return Left(self.count - sum(r[1] for r in rows))
        left = _unfitted(self.asks, ((row[3], self._empty(row[3])) for row in rows))
        return Left(len(left), left, self._empty, self._now)

    def now(self, rows: Iterable[Row]) -> int:
        """How many of the quotas the nodes of ``rows`` (in this order) take now: copies of its one
        kind (the rows' room now), else its quotas, largest first, each node taking those that
        still fit its room now."""
        if self._now is None:
            return sum(r[0] for r in rows)
        return self.count - len(_unfitted(self.asks, ((row[3], self._now(row[3])) for row in rows)))

    def fewest(self, rows: Sequence[Row]) -> tuple[Row, ...] | None:
        """Of a gang of several kinds: the fewest of ``rows`` that hold all of it once empty (an
        exact packing: each quota on one node, where the stages let it, in the room the node has
        when empty), then the set whose packings place the most quotas on room free now, then
        the lowest indices; None when no set holds it, or when the search would take more than
        :data:`MAX_STEPS` placements (then :func:`take` falls back to its greedy)."""
        assert self._empty is not None and self._now is not None
        packing = _Packing(self.asks, (r[3] for r in rows), self._empty, self._now)
        ordered = sorted(rows, key=lambda r: (r[2], r[3]))
        try:
            for size in range(1, min(len(ordered), self.count) + 1):
                best: tuple[int, tuple[Row, ...]] | None = None
                for rows_ in itertools.combinations(ordered, size):
                    names = [r[3] for r in rows_]
                    if best is not None and packing.at_most_now(names) <= best[0]:
                        continue  # cannot place more of it now than the best so far
                    now = packing.most_now(names)
                    if now >= 0 and (best is None or now > best[0]):
                        best = (now, rows_)
                if best is not None:
                    return best[1]
        except _TooLong:
            return None
        return None

    def row(self, name: str, index: int) -> Row | None:
        """A gang of several kinds: the node as a hold may take it — how many of the quotas it
        takes now and once empty (each alone) —, None when it takes none of them even empty."""
        probe: Row = (0, 0, index, name)
        empty = self.count - self.after((probe,)).count
        return (self.now((probe,)), empty, index, name) if empty > 0 else None


def _unfitted(asks: Sequence[Ask], rooms: Iterable[tuple[str, Resource | None]]) -> list[Ask]:
    """The ``asks`` (largest first) left once each node's room in turn (node, room) takes those
    the stages let on it that still fit."""
    left = list(asks)
    for name, given in rooms:
        room, rest = given, list[Ask]()
        for ask in left:
            request, lets = ask
            if room is not None and capacity_for(request, room) > 0 and lets(name):
                room = room - request
            else:
                rest.append(ask)
        left = rest
    return left


class _TooLong(Exception):
    """The search for an exact packing took more than :data:`MAX_STEPS` placements."""


class _Packing:
    """Exact packings of ``asks`` (largest first) on a set of nodes: each quota on one node that
    the stages let it on, within the node's room once empty (``empty``); some of them also within
    its room now (``now``), counted. Nodes alike in both rooms and in what the stages let on them
    are tried once per quota, and alike quotas in one order of nodes only; past
    :data:`MAX_STEPS` placements in all, :class:`_TooLong` is raised."""

    def __init__(
        self,
        asks: Sequence[Ask],
        names: Iterable[str],
        empty: Callable[[str], Resource | None],
        now: Callable[[str], Resource | None],
    ) -> None:
        self.asks, self.steps = asks, 0
        lets_ = list(dict.fromkeys(lets for _, lets in asks))  # the stages' distinct verdicts
        self._of = {n: (empty(n), now(n), tuple(lets(n) for lets in lets_)) for n in names}
        self._total = Resource.total(request for request, _ in asks)
        # per resource, the asks' amounts summed smallest first: what k of them take at least
        self._least = {
            name: list(itertools.accumulate(sorted(request.get(name) for request, _ in asks)))
            for name in self._total.names()
        }
        self._names: Sequence[str] = ()
        self._rooms: list[Resource | None] = []
        self._free: list[Resource | None] = []
        self._kinds: list[tuple[object, ...]] = []

    def at_most_now(self, names: Sequence[str]) -> int:
        """A bound on :meth:`most_now`: how many of the quotas the nodes' room now, summed, could
        take, per resource the smallest first."""
        free = Resource.total(f for n in names if (f := self._of[n][1]) is not None)
        return min((sum(1 for t in least if t <= free.get(name)) for name, least in self._least.items()), default=0)

    def most_now(self, names: Sequence[str]) -> int:
        """The most quotas a packing of all of them on ``names`` places on room free now; -1 when
        the nodes cannot hold them all once empty."""
        of = [self._of[n] for n in names]
        if not self._total.less_equal(Resource.total(e for e, _, _ in of if e is not None)):
            return -1  # too little room in all, once empty
        self._names, self._rooms, self._kinds = names, [e for e, _, _ in of], [k for _, _, k in of]
        self._free = [None] * len(names)
        if self._place(0, 0, False) < 0:  # cheaper: does any packing hold them all once empty?
            return -1
        self._free = [f for _, f, _ in of]
        return self._place(0, 0, False)

    def _place(self, i: int, first: int, later: bool) -> int:
        """The most of ``asks[i:]`` placed now, all placed once empty (-1: they cannot be). A
        quota like the one before it goes on node ``first`` or after (there, ``later``: only
        where the one before went later than now)."""
        if i == len(self.asks):
            return 0
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _TooLong
        request, lets = self.asks[i]
        alike = i + 1 < len(self.asks) and self.asks[i + 1] == self.asks[i]
        best, tried = -1, set[tuple[object, ...]]()
        for j in range(first, len(self._names)):
            room, free = self._rooms[j], self._free[j]
            if room is None or (room, free, self._kinds[j]) in tried or capacity_for(request, room) <= 0:
                continue
            if not lets(self._names[j]):
                continue
            tried.add((room, free, self._kinds[j]))
            self._rooms[j] = room - request
            if free is not None and not (later and j == first) and capacity_for(request, free) > 0:
                self._free[j] = free - request
                got = self._place(i + 1, j if alike else 0, False)
                best = max(best, got + 1 if got >= 0 else -1)
                self._free[j] = free
            if best < len(self.asks) - i:  # placing it later than now may let others in now
                best = max(best, self._place(i + 1, j if alike else 0, alike))
            self._rooms[j] = room
            if best == len(self.asks) - i or (best >= 0 and all(f is None for f in self._free)):
                break
        return best


def take(rows: Sequence[Row], need: Left) -> tuple[list[str], Left]:
    """The nodes of ``rows`` to hold for ``need``, and what is left.

    * A gang of **one kind**: the roomiest nodes (now) until their room when empty covers it.
    * A gang of **several kinds**: the fewest nodes that hold all of it once empty, then the
      most of its quotas a packing of it there places on room free now, then the lowest indices
      (:meth:`Left.fewest`, exact for at most :data:`MAX_QUOTAS` quotas on :data:`MAX_NODES`
      nodes); beyond that, or when no set holds all of it, the greedy of one kind, each node
      taking what still fits it, largest first — a node that would take none of what is left is
      passed over (a small node whose quotas the nodes before it took)."""
    if need.mixed and 0 < need.count <= MAX_QUOTAS and len(rows) <= MAX_NODES:
        found = need.fewest(rows)
        if found is not None:
            return [row[3] for row in found], need.after(found)
    out: list[str] = []
    for row in sorted(rows, key=lambda r: (-r[0], r[2], r[3])):
        if need.count <= 0:
            break
        after = need.after((row,))
        if after.count < need.count:
            out.append(row[3])
            need = after
    return out, need
