"""The seed's *continuity* algorithm for a gang whose quotas differ in size (``mixedplan.py``;
``nodechoice.continuity_block`` is the same for a gang of one size): the shortest run of
consecutive node indices that holds the gang, then rules 3–4 of ``mixedplan`` on it. Pure
functions: no session, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from extender.plugins.topology.mixedfrontier import combined, node_fronts
from extender.plugins.topology.mixedorder import MixedNode, next_fit
from extender.plugins.topology.mixedplan import MixedGang, nodes_and_ranks
from extender.plugins.topology.nodechoice import shortest_run

__all__ = ["continuity_run", "plan_run"]


def plan_run(
    gang: MixedGang,
    nodes: Sequence[MixedNode],
    indices: Sequence[int],
    spanned: Callable[[Iterable[str]], tuple[int, ...]] | None = None,
) -> tuple[list[MixedNode], list[str]] | None:
    """:func:`continuity_run`, then rules 3–4 on it: the run, and each quota's node."""
    run = continuity_run(gang, nodes, indices, spanned)
    placed = nodes_and_ranks(gang, run, run=True) if run is not None else None
    return None if run is None or placed is None else (run, placed)


def continuity_run(
    gang: MixedGang,
    nodes: Sequence[MixedNode],
    indices: Sequence[int],
    spanned: Callable[[Iterable[str]], tuple[int, ...]] | None = None,
) -> list[MixedNode] | None:
    """The seed's *continuity* algorithm (as :func:`nodechoice.continuity_block` for a gang of one
    kind): among runs of consecutive node indices whose nodes all take some quota of the gang,
    the shortest that holds it — by its frontier, or in rank order inside the fences for a
    strict-order gang — ties: the least ``spanned`` of their node names (the planner's: the
    fewest leaves, then NVLink domains), then the lowest index. ``nodes``: the usable nodes (index order);
    ``indices``: every node index of the spec, ascending (a node missing from ``nodes``, or one
    that takes none of the gang, breaks a run)."""
    kinds, order, fences = gang.kinds, gang.order, gang.fences
    need = tuple(k.count for k in kinds)
    fronts = node_fronts(nodes, kinds)
    by_index = {n.index: n for n in nodes if any(any(v) for v in fronts[n.name])}

    def holds(run: Sequence[MixedNode]) -> bool:
        if gang.strict:
            return next_fit(run, kinds, order, fences)
        return need in combined((fronts[n.name] for n in run), need)

    cost = None if spanned is None else lambda run: spanned(n.name for n in run)
    return shortest_run(by_index, indices, holds, cost)
