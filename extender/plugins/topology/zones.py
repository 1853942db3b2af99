"""Pure placement algorithms of the topology plugin (seed 三 3.4–3.5). No session, no I/O.

* **namedzone** — a zone is a set of nodes wired to the same RDMA switches *and* carrying the same
  GPU model (the identical-spec wrapper). For a gang that needs ``need`` more nodes:
  the zones that can hold the whole gang are preferred, smallest first (fewest nodes, then least
  free room: best fit keeps big zones whole for big gangs); when no zone can, the fewest zones,
  taking the zones with the most room first. Jobs sharing a ``topology-affinity-key`` prefer the
  zones where that key already has the most quotas. Score of a node: ``1 / zone size``.
* **continuity** — nodes in index order; the free ones (that can take the next quota) form
  contiguous blocks; the smallest block that holds the gang wins. Score of a node by its free
  neighbours: none → 1, one → 0.5, two → 0 (fill holes, do not split blocks).
* **rank order** — within the chosen nodes a quota of task index *i* goes to the smallest node
  index strictly between the nodes of the job's tasks *i−1* and *i+1* (``select_best_node_for_quota``),
  so the RDMA ranks follow the physical order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["ZoneView", "best_in_range", "continuity_block", "continuity_score", "plan_zones"]

ZoneId = tuple[str, str]  # (GPU spec, zone key)


@dataclass(slots=True)
class ZoneView:  # not frozen: made once per zone and gang, and frozen dataclasses construct slowly
    id: ZoneId
    size: int  # nodes in the zone
    capacity: int  # how many of the gang's quotas it can take now (one per node)
    room: int  # free units of the requested resources (best-fit tie-break)
    first_index: int  # smallest node index (deterministic tie-break)
    affinity: int = 0  # quotas of the same topology-affinity-key already in the zone
    # the order of zones that hold a whole gang, within a GPU spec: made with the view (a zone's
    # view is kept until a bind or release in it, and read for every gang of its class)
    fit_key: tuple[int, int, int, int, ZoneId] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.fit_key = (-self.affinity, self.size, self.room, self.first_index, self.id)


def plan_zones(zones: Sequence[ZoneView], need: int) -> list[ZoneView] | None:
    """Choose the zones for ``need`` quotas (all of one GPU spec), or None if they cannot fit.

    ``zones`` must already be restricted to one spec by the caller (see :func:`plan_by_spec`).
    """
    if need <= 0:
        return []
    usable = [z for z in zones if z.capacity > 0]
    best: ZoneView | None = None
    for z in usable:
        if z.capacity >= need and (best is None or z.fit_key < best.fit_key):
            best = z
    if best is not None:
        return [best]
    if sum(z.capacity for z in usable) < need:
        return None
    chosen: list[ZoneView] = []
    left = need
    for z in sorted(usable, key=lambda z: (-z.affinity, -z.capacity, z.room, z.first_index, z.id)):
        chosen.append(z)
        left -= z.capacity
        if left <= 0:
            break
    return chosen


def plan_by_spec(zones: Iterable[ZoneView], need: int) -> list[ZoneView] | None:
    """Plan within each GPU spec separately and keep the best plan: fewest zones, then best fit.

    A gang never mixes GPU models, so the zones of one plan always share a spec.
    """
    zones = list(zones)
    if need > 0:
        # The common case in one pass: some zone holds the whole gang. A one-zone plan beats any
        # plan of several zones, so the answer is the best spec's best such zone (plan_zones'
        # order within a spec, the order below across specs).
        best: dict[str, ZoneView] = {}
        for z in zones:
            if z.capacity >= need:
                spec = z.id[0]
                held = best.get(spec)
                if held is None or z.fit_key < held.fit_key:
                    best[spec] = z
        if best:
            return [min(best.values(), key=lambda z: (-z.affinity, z.size, z.first_index, z.id[0]))]
    return _plan_by_spec(zones, need)


def _plan_by_spec(zones: Iterable[ZoneView], need: int) -> list[ZoneView] | None:
    by_spec: dict[str, list[ZoneView]] = {}
    for z in zones:
        by_spec.setdefault(z.id[0], []).append(z)
    best: tuple[tuple[int, int, int, int, str], list[ZoneView]] | None = None
    for spec, group in by_spec.items():
        plan = plan_zones(group, need)
        if plan is None:
            continue
        key = (
            len(plan),
            -max(z.affinity for z in plan) if plan else 0,
            sum(z.size for z in plan),
            min(z.first_index for z in plan) if plan else 0,
            spec,
        )
        if best is None or key < best[0]:
            best = (key, plan)
    return None if best is None else best[1]


def continuity_block(fits: Sequence[tuple[str, int, bool]], need: int) -> list[str] | None:
    """The smallest contiguous block of nodes that can each take a quota, holding ``need``.

    ``fits`` lists (node, index, can take a quota) in index order; indices that are not
    consecutive break a block. Ties go to the lowest index. None when no block is big enough.
    """
    if need <= 0:
        return []
    blocks: list[list[str]] = []
    current: list[str] = []
    prev_index: int | None = None
    for name, index, ok in fits:
        if ok and (prev_index is None or index == prev_index + 1 or not current):
            current.append(name)
        elif ok:
            blocks.append(current)
            current = [name]
        else:
            if current:
                blocks.append(current)
            current = []
        prev_index = index
    if current:
        blocks.append(current)
    big = [b for b in blocks if len(b) >= need]
    if not big:
        return None
    return min(big, key=len)


def continuity_score(left_free: bool, right_free: bool) -> float:
    """1 with no free neighbour, 0.5 with one, 0 with two (anti-fragmentation)."""
    free = int(left_free) + int(right_free)
    return (1.0, 0.5, 0.0)[free]


def best_in_range(indexed: Sequence[tuple[int, str]], low: int | None, high: int | None) -> str | None:
    """``select_best_node_for_quota``: the smallest (index, name) with low < index < high.

    Falls back to the smallest index overall when nothing is in range (the commit gate rejects
    out-of-order placements of strict-order jobs).
    """
    if not indexed:
        return None
    in_range = [(i, n) for i, n in indexed if (low is None or i > low) and (high is None or i < high)]
    pool = in_range or list(indexed)
    return min(pool)[1]
