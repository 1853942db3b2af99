"""A zone's candidate nodes for one quota shape, kept in rule 3's order (``nodechoice.rank_key``:
best QN score first, ties lower index, then name) as binds and releases change single nodes.

Planning a gang reads the zone's candidates best first; a bind or release then changes the
capacity and the score of the few nodes it touched. Re-ranking only those nodes (a binary
search out and one back in) instead of the whole zone keeps the cost of the next gang in the same
zone proportional to what changed, not to the zone's size.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable

from extender.plugins.topology.nodechoice import Candidate, rank_key

__all__ = ["ZoneRanking"]


class ZoneRanking:
    """The candidates of one zone for one shape, best first; nodes marked stale are looked at
    again (and placed back in order, or left out when they have no room) on the next read."""

    __slots__ = ("_by_name", "_keys", "_ranked", "_stale")

    def __init__(self, candidates: Iterable[Candidate]) -> None:
        self._ranked = sorted(candidates, key=rank_key)
        self._keys = [rank_key(c) for c in self._ranked]  # searched without a key function
        self._by_name = {c.name: c for c in self._ranked}
        self._stale: set[str] = set()

    def mark_stale(self, name: str) -> None:
        """``name``'s room or score changed: take it out of the order until it is looked at again."""
        known = self._by_name.pop(name, None)
        if known is not None:
            at = bisect.bisect_left(self._keys, rank_key(known))
            del self._keys[at], self._ranked[at]
        self._stale.add(name)

    def ranked(self, look: Callable[[str], Candidate | None]) -> list[Candidate]:
        """The zone's candidates best first; ``look(name)`` gives a stale node's candidate now
        (None: no room, or gone)."""
        for name in self._stale:
            cand = look(name)
            if cand is not None:
                key = rank_key(cand)
                at = bisect.bisect_left(self._keys, key)
                self._keys.insert(at, key)
                self._ranked.insert(at, cand)
                self._by_name[name] = cand
        self._stale.clear()
        return list(self._ranked)
