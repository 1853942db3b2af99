"""A job's bound quotas as the topology plugin reads them for every quota it places.

For each quota of a job the plugin needs (seed 三 3.5, ``select_best_node_for_quota``):

* the node index of the nearest bound sibling below it in rank — the *largest* node index among
  bound quotas of a smaller task index — and the smallest node index among those of a larger one;
* the nodes the job already takes (one quota per node).

Read naively, both cost a pass over the job's bound quotas, for every quota: quadratic in the gang
size, which training gangs of hundreds of workers feel. :class:`BoundSiblings` keeps the taken
nodes as binds come, and once more than :data:`SMALL` quotas are bound answers the neighbours in
O(log n) from two Fenwick trees (below that, a pass is cheaper). It covers the fixed set of
quotas it was built for (a claim change makes the plugin build a new one). Unbinding is rare (a
discarded gang, a release): it is left to the caller to rebuild.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence

from extender.model.node import NodeInfo
from extender.model.quota import QuotaInfo
from extender.plugins.topology.gangplan import Range

__all__ = ["SMALL", "BoundSiblings", "rank_ranges"]


SMALL = 16  # up to this many bound quotas a plain pass is quicker than the trees
_ABSENT = object()


class BoundSiblings:
    """Bound quotas of one job: quota → (quota index, node index, node name). Past :data:`SMALL`
    bound quotas, prefix-max and suffix-min trees over the job's quota indices answer
    :meth:`neighbours`; below, a pass over the bound quotas does (cheaper for small gangs)."""

    __slots__ = ("_high", "_low", "_ranks", "members", "quotas", "taken")

    def __init__(self, members: Iterable[tuple[str, int | None]]) -> None:
        """``members``: every quota of the job, bound or not, with its quota index."""
        self.members: dict[str, int | None] = dict(members)
        self.quotas: dict[str, tuple[int | None, int, str]] = {}
        self.taken: dict[str, int] = {}  # node name → how many of the job's quotas are bound there
        self._ranks: list[int] = []  # the job's distinct quota indices, ascending (with the trees)
        # Fenwick trees (1-based), built once more than SMALL quotas are bound: _low[i] covers a
        # prefix of _ranks with the largest node index bound there; _high the same over _ranks
        # reversed, with the smallest.
        self._low: list[int | None] | None = None
        self._high: list[int | None] = []

    def add(self, name: str, index: int | None, node_index: int, node: str) -> bool:
        """The quota ``name`` is now bound to ``node``. False (nothing changed) when that cannot be
        accounted here — not one of the members, already counted, or another quota index than
        the one it was built with: the caller builds a new one."""
        quotas = self.quotas
        if name in quotas or self.members.get(name, _ABSENT) != index:
            return False
        quotas[name] = (index, node_index, node)
        taken = self.taken
        taken[node] = taken.get(node, 0) + 1
        if self._low is not None:
            if index is not None:
                self._raise(index, node_index)
        elif len(self.quotas) > SMALL:
            self._ranks = sorted({idx for idx in self.members.values() if idx is not None})
            self._low = [None] * (len(self._ranks) + 1)
            self._high = [None] * (len(self._ranks) + 1)
            for idx, ni, _ in self.quotas.values():
                if idx is not None:
                    self._raise(idx, ni)
        return True

    def _raise(self, index: int, node_index: int) -> None:
        low, high = self._low, self._high
        assert low is not None
        n = len(self._ranks)
        pos = bisect.bisect_left(self._ranks, index)
        i = pos + 1
        while i <= n:
            v = low[i]
            if v is None or v < node_index:
                low[i] = node_index
            i += i & -i
        i = n - pos
        while i <= n:
            v = high[i]
            if v is None or v > node_index:
                high[i] = node_index
            i += i & -i

    def neighbours(self, index: int) -> tuple[int | None, int | None]:
        """(largest node index bound for a smaller quota index, smallest for a larger one)."""
        low: int | None = None
        high: int | None = None
        tree = self._low
        if tree is None:
            for idx, ni, _ in self.quotas.values():
                if idx is None:
                    continue
                if idx < index:
                    if low is None or ni > low:
                        low = ni
                elif idx > index and (high is None or ni < high):
                    high = ni
            return low, high
        ranks = self._ranks
        i = bisect.bisect_left(ranks, index)  # ranks[:i] are smaller
        while i > 0:
            v = tree[i]
            if v is not None and (low is None or v > low):
                low = v
            i -= i & -i
        i = len(ranks) - bisect.bisect_right(ranks, index)  # the last i are larger
        while i > 0:
            v = self._high[i]
            if v is not None and (high is None or v < high):
                high = v
            i -= i & -i
        return low, high


def rank_ranges(
    quotas: Sequence[QuotaInfo], unbound: Sequence[QuotaInfo], node: Callable[[str], NodeInfo | None]
) -> list[Range]:
    """Each of ``unbound``'s closed node-index range between the bound ones of ``quotas`` (a job's
    quotas; ``node``: a node by name): the seed's ``[preNode, lastNode]`` — also where the bound
    ones are out of order themselves (ranks 1–3 on n2, n3, n2: rank 0's is ``[open, 2]``), as
    ``mixedorder``'s fences: a new quota keeps the order with its neighbours the siblings left."""
    if len(unbound) == len(quotas) or not any(q.node_name for q in quotas):  # none bound
        return [(None, None)] * len(unbound)
    info = BoundSiblings((q.name, q.rank) for q in quotas)
    for q in quotas:
        at = node(q.node_name) if q.node_name else None
        if at is not None:
            info.add(q.name, q.rank, at.index, at.name)
    return [(None, None) if q.rank is None else info.neighbours(q.rank) for q in unbound]
