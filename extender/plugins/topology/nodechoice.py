"""Rule 3 of gang planning (``gangplan``): which nodes of a gang's share take its quotas, and how
many each. Pure functions: no session, no I/O.

* **Distinct nodes by default** (:func:`choose_ranked`): one quota per node while the share has
  enough nodes with room that hold none of the gang — best QN score first (:func:`rank_key`; ties:
  lower index). Consecutive ranks share a node only when needed, i.e. when there are fewer such
  nodes than the share: then, as with ``pack``, on the fewest nodes that hold it.
* **Packed** (``pack=True``, and the default when ranks must share): the gang's bound siblings'
  nodes first, as they cost no node more, then the fewest nodes that hold the rest, and among
  those the least capacity taken (best fit: 8 workers of 1 GPU on two empty nodes take one of
  them and leave the other whole for an 8-GPU worker; spreading them 4 + 4 would break both);
  ties: fewer of the roomiest nodes (:func:`_fewest_best_fit`).
* **Continuity** (the seed's other algorithm, :func:`continuity_block`, :func:`fill_run`): the
  shortest run of consecutive node indices that holds the gang, every node of it one quota, the
  ranks that must share on the fewest nodes of the run.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "Candidate",
    "choose_nodes",
    "choose_ranked",
    "continuity_block",
    "fewest_to_reach",
    "fill_run",
    "rank_key",
    "shortest_run",
]

N = TypeVar("N")  # a node as a caller models it (shortest_run)


@dataclass(slots=True)  # not frozen: made for every node scored, and frozen ones cost twice as much to make
class Candidate:
    """A node that can take quotas of the gang (read-only: the memo's zone rankings share them)."""

    name: str
    index: int
    capacity: int  # slots (≥ 1)
    score: float = 0.0  # QN score: higher is better


def fewest_to_reach(capacities: Iterable[int], need: int) -> int | None:
    """How many of ``capacities``, the largest first, it takes to reach ``need`` — the fewest that
    can, since any k of them hold at most the k largest; None when all of them together do not."""
    covered = 0
    for k, c in enumerate(sorted(capacities, reverse=True), start=1):
        covered += c
        if covered >= need:
            return k
    return None


def rank_key(c: Candidate) -> tuple[float, int, str]:
    """Rule 3's order of a zone's nodes: best QN score first, ties lower index, then name."""
    return (-c.score, c.index, c.name)


def choose_nodes(candidates: Sequence[Candidate], need: int, *, pack: bool = False) -> list[tuple[Candidate, int]]:
    """Which nodes of one zone take ``need`` slots and how many each (rule 3).

    ``candidates`` (any order) must hold at least ``need`` slots together. Returned in node-index
    order.
    """
    return choose_ranked(sorted(candidates, key=rank_key), need, pack=pack)


def choose_ranked(
    ranked: Sequence[Candidate], need: int, *, pack: bool = False, held: Mapping[str, int] | None = None
) -> list[tuple[Candidate, int]]:
    """:func:`choose_nodes` of candidates already in :func:`rank_key` order (the planner's memo
    keeps each zone's candidates so: a bind re-ranks only the nodes it changed). ``held``: node →
    the gang's bound siblings there. A node that holds a sibling is no distinct node: by default
    one quota per node free of the gang while there are ``need`` of them; else ranks must share,
    and take what ``pack`` takes: the siblings' nodes first, as they cost no node more, then the
    fewest nodes that hold the rest, best fit (:func:`_fewest_best_fit`)."""
    if need <= 0:
        return []
    mine = [c for c in ranked if c.name in held] if held else []
    if not pack and len(ranked) - len(mine) >= need:  # distinct nodes: the zone has enough of them
        order = [c for c in ranked if c.name not in held] if mine and held else ranked
        return sorted(((c, 1) for c in order[:need]), key=lambda cn: (cn[0].index, cn[0].name))
    room = sum(c.capacity for c in mine)  # ranks share nodes: the fewest that hold them, best fit
    if not mine:
        counts = _fewest_best_fit(ranked, need)
    elif room >= need:
        counts = _fewest_best_fit(mine, need)
    else:
        counts = {c.name: c.capacity for c in mine}
        counts.update(_fewest_best_fit([c for c in ranked if c.name not in counts], need - room))
    return sorted(((c, counts[c.name]) for c in ranked if counts.get(c.name)), key=lambda cn: (cn[0].index, cn[0].name))


def _fewest_best_fit(by_score: Sequence[Candidate], need: int) -> dict[str, int]:
    """Rule 3 with ``pack``: the fewest nodes that hold ``need`` slots; among those, the least
    capacity taken (best fit: nodes with more room stay whole for wider workers); within one
    capacity, best score first; ties of capacity taken: fewer of the largest nodes (they stay
    whole). Each chosen node, the largest first, takes as many as it can.

    Exact: a search over how many nodes of each capacity to take, largest capacity first, keeping
    only partial choices from which the largest remaining nodes still reach ``need``. Since fewer
    nodes cannot hold the gang, the chosen capacity exceeds ``need`` by less than one node's
    room, so each count of nodes taken keeps fewer partial sums than the largest capacity."""
    groups: dict[int, list[Candidate]] = {}
    for c in by_score:
        groups.setdefault(c.capacity, []).append(c)
    caps = sorted(groups, reverse=True)
    sizes = [cap for cap in caps for _ in groups[cap]]  # every node's capacity, largest first
    fewest = fewest_to_reach(sizes, need)
    if fewest is None:
        raise ValueError(f"candidates hold fewer than {need} slots")
    prefix = list(itertools.accumulate(sizes, initial=0))
    starts = list(itertools.accumulate((len(groups[cap]) for cap in caps), initial=0))

    def reach(group: int, count: int) -> int:  # the most ``count`` nodes of later groups add
        first = starts[group]
        return prefix[min(len(sizes), first + count)] - prefix[first]

    # (nodes taken, capacity taken) → nodes taken per capacity so far
    partial: dict[tuple[int, int], tuple[int, ...]] = {(0, 0): ()}
    for g, cap in enumerate(caps):
        grown: dict[tuple[int, int], tuple[int, ...]] = {}
        for (taken, total), picks in partial.items():
            for j in range(min(len(groups[cap]), fewest - taken) + 1):
                state, more = (taken + j, total + j * cap), (*picks, j)
                if state[1] + reach(g + 1, fewest - state[0]) < need:
                    continue  # even the largest nodes left cannot reach ``need`` from here
                if state not in grown or more < grown[state]:
                    grown[state] = more
        partial = grown
    _, picks = min((total, picks) for (taken, total), picks in partial.items() if taken == fewest)
    counts: dict[str, int] = {}
    left = need
    for cap, j in zip(caps, picks, strict=True):
        for c in groups[cap][:j]:
            counts[c.name] = min(cap, left)
            left -= counts[c.name]
    return counts


def continuity_block(
    candidates: Sequence[Candidate],
    indices: Sequence[int],
    need: int,
    cost: Callable[[Sequence[Candidate]], tuple[int, ...]] | None = None,
) -> list[Candidate] | None:
    """The seed's *continuity* algorithm: among runs of consecutive node indices whose nodes all
    take quotas of the gang, the shortest run that holds ``need`` slots (ties: the least ``cost``,
    then the lowest index).

    ``indices`` are all node indices of the spec, ascending: a node missing from ``candidates``
    breaks a run."""
    by_index = {c.index: c for c in candidates}
    return shortest_run(by_index, indices, lambda run: sum(c.capacity for c in run) >= need, cost)


def fill_run(run: Sequence[Candidate], need: int) -> list[tuple[Candidate, int]]:
    """How many of ``need`` slots each node of a continuity run takes by default (``pack``: the
    run's nodes by :func:`choose_nodes` instead): every node one, so the gang's nodes stay
    consecutive — a shortest run has no node the gang can skip without a gap —, and the ranks that
    must share a node, beyond one a node, on the fewest nodes of the run's spare room, best fit
    (rule 3 on what is left). In node-index order; ``run`` must hold ``need`` slots."""
    if need <= len(run):
        return choose_nodes(run, need)
    spare = [Candidate(c.name, c.index, c.capacity - 1, c.score) for c in sorted(run, key=rank_key) if c.capacity > 1]
    more = _fewest_best_fit(spare, need - len(run))
    return [(c, 1 + more.get(c.name, 0)) for c in sorted(run, key=lambda c: (c.index, c.name))]


def shortest_run(
    by_index: Mapping[int, N],
    indices: Sequence[int],
    holds: Callable[[Sequence[N]], bool],
    cost: Callable[[Sequence[N]], tuple[int, ...]] | None = None,
) -> list[N] | None:
    """The shortest run of consecutive ``indices`` whose every index names a node of ``by_index``
    that ``holds`` the gang (ties: the least ``cost`` — the planner's is the tiers' rule, the
    fewest leaves, then NVLink domains, the run spans — then the lowest index); ``holds`` must stay
    true as a run grows. ``indices``: every node index of the spec, ascending (an index missing
    from ``by_index``, or a gap between two, breaks a run)."""
    best: list[N] | None = None
    best_cost: tuple[int, ...] = ()
    run: list[N] = []
    prev: int | None = None
    for i in indices:
        node = by_index.get(i)
        if node is None or (prev is not None and i != prev + 1):
            run = []
        if node is not None:
            run.append(node)
            while len(run) > 1 and holds(run[1:]):  # shrink from the left: the shortest ending here
                run.pop(0)
            if (best is None or len(run) <= len(best)) and holds(run):
                mine = cost(run) if cost is not None else ()
                if best is None or len(run) < len(best) or mine < best_cost:
                    best, best_cost = list(run), mine
        prev = i
    return best
