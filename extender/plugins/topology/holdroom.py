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

"Empty" is empty of other jobs: what the gang's own bound quotas take on a node stays taken.
Pure functions of the session's memo (no I/O, clock or randomness).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from extender.model.quota import QuotaInfo
from extender.model.resources import Resource
from extender.plugins.topology.fitmemo import capacity_for
from extender.plugins.topology.gangparts import quota_size

if TYPE_CHECKING:
    from extender.plugins.topology.fitmemo import FitMemo

__all__ = ["Ask", "Left", "Row", "bound_room", "need_of", "take"]

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


def take(rows: Sequence[Row], need: Left) -> tuple[list[str], Left]:
    """The roomiest nodes (now) until their room when empty covers ``need``, and what is left; a
    node that would take none of what is left is passed over (of a gang of several kinds, a
    small node whose quotas the nodes before it took)."""
    out: list[str] = []
    for row in sorted(rows, key=lambda r: (-r[0], r[2], r[3])):
        if need.count <= 0:
            break
        after = need.after((row,))
        if after.count < need.count:
            out.append(row[3])
            need = after
    return out, need
