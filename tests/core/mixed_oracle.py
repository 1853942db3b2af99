"""The exhaustive oracle of the mixed-gang property (``test_mixed_gang_property.py``): depth-first
bin-packing of quotas of any sizes over small clusters, the fewest zones that hold them, and rule
1's costs of a set of zones (``docs/placement.md``), to check the planner's choice among them.

Rooms and needs are plain dicts (``topo_cluster.Need``); a zone is (GPU model, leaf).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Mapping, Sequence

from tests.core.topo_cluster import NODE_ROOM, Need, NodeSpec

Zone = tuple[str, int]


def fits(need: Need, room: Need) -> bool:
    return all(room[k] >= v for k, v in need.items())


def charge(room: Need, need: Need, sign: int) -> None:
    for k, v in need.items():
        room[k] -= sign * v


def packs(needs: Sequence[Need], rooms: Sequence[Need], *, ordered: bool) -> bool:
    """Whether the quotas ``needs`` (task-index order) fit the nodes ``rooms`` (node-index order),
    each node's room holding the sum of the quotas put there; ``ordered``: only placements whose
    node index never descends as the task index ascends. Exhaustive depth-first search."""
    left = [dict(r) for r in rooms]
    if any(sum(n[k] for n in needs) > sum(r[k] for r in left) for k in NODE_ROOM):
        return False
    if ordered:
        return _ordered(list(needs), left, 0, 0)
    todo = sorted(needs, key=lambda n: (-n["gpu"], -n["cpu"]))
    return _unordered(todo, left, 0, 0)


def _ordered(needs: list[Need], left: list[Need], i: int, lo: int) -> bool:
    if i == len(needs):
        return True
    for j in range(lo, len(left)):
        if fits(needs[i], left[j]):
            charge(left[j], needs[i], 1)
            if _ordered(needs, left, i + 1, j):
                return True
            charge(left[j], needs[i], -1)
    return False


def _unordered(needs: list[Need], left: list[Need], i: int, lo: int) -> bool:
    if i == len(needs):
        return True
    tried: set[tuple[int, ...]] = set()
    for j in range(lo, len(left)):
        key = tuple(left[j].values())
        if key in tried or not fits(needs[i], left[j]):
            continue
        tried.add(key)
        charge(left[j], needs[i], 1)
        nxt = i + 1
        if _unordered(needs, left, nxt, j if nxt < len(needs) and needs[nxt] == needs[i] else 0):
            return True
        charge(left[j], needs[i], -1)
    return False


def fewest_zones(
    nodes: Sequence[NodeSpec], room: Mapping[str, Need], needs: Sequence[Need], *, ordered: bool
) -> int | None:
    """The fewest (model, leaf) zones of ONE model whose usable nodes (``room``) hold every quota of
    ``needs``, trying every set of zones smallest first; None if no set does."""
    zones: dict[tuple[str, int], list[NodeSpec]] = {}
    for n in nodes:
        if n.name in room:
            zones.setdefault(n.zone, []).append(n)
    best: int | None = None
    for model in sorted({m for m, _ in zones}):
        mine = [z for z in zones if z[0] == model]
        for k in range(1, min(len(mine), best or len(mine)) + 1):
            for combo in itertools.combinations(mine, k):
                members = sorted((n for z in combo for n in zones[z]), key=lambda n: n.index)
                if packs(needs, [room[n.name] for n in members], ordered=ordered):
                    best = k
                    break
            if best == k:
                break
    return best


def zones_of(nodes: Sequence[NodeSpec], room: Mapping[str, Need]) -> dict[Zone, list[NodeSpec]]:
    """Each zone's usable nodes (those in ``room``), index order."""
    zones: dict[Zone, list[NodeSpec]] = {}
    for n in sorted(nodes, key=lambda n: n.index):
        if n.name in room:
            zones.setdefault(n.zone, []).append(n)
    return zones


def fewest_sets(
    nodes: Sequence[NodeSpec],
    room: Mapping[str, Need],
    holds: Callable[[list[NodeSpec]], bool],
    *,
    home: Collection[Zone] = (),
) -> list[tuple[Zone, ...]]:
    """Every set of zones of the fewest that, beside ``home`` (then of its GPU model; else of any
    one model), ``holds`` accepts (given their usable nodes in index order); [] when none does."""
    zones = zones_of(nodes, room)
    models = {m for m, _ in home} or {m for m, _ in zones}
    found: list[tuple[Zone, ...]] = []
    for model in sorted(models):
        mine = [z for z in zones if z[0] == model and z not in home]
        for k in range(len(mine) + 1):
            if found and k > len(found[0]):
                break
            hits = [
                combo
                for combo in itertools.combinations(mine, k)
                if (k or home) and holds(sorted((n for z in (*home, *combo) for n in zones.get(z, [])), key=_index))
            ]
            if hits:
                if found and k < len(found[0]):
                    found = []
                found += hits
                break
    return found


def _index(n: NodeSpec) -> int:
    return n.index


def capacity(need: Need, room: Need) -> int:
    """How many quotas of ``need`` fit ``room`` (the ledger's count)."""
    return min(room[k] // v for k, v in need.items() if v > 0)


def zone_cost(
    nodes: Sequence[NodeSpec], zones: Collection[Zone], room: Mapping[str, Need], used: Mapping[str, Need], head: Need
) -> tuple[int, ...]:
    """Rule 1's cost of ``zones`` (the least is best; capacity: how many quotas of ``head``, the
    gang's largest, the usable nodes take): one zone — less capacity, fewer nodes, lower first
    index; several — less capacity of untouched zones (no quota on any node), less capacity,
    fewer nodes."""
    cap = dict.fromkeys(zones, 0)
    size = dict.fromkeys(zones, 0)
    first = {z: len(nodes) for z in zones}
    untouched = dict.fromkeys(zones, True)
    for n in nodes:
        if n.zone in cap:
            cap[n.zone] += capacity(head, room[n.name]) if n.name in room else 0
            size[n.zone] += 1
            first[n.zone] = min(first[n.zone], n.index)
            untouched[n.zone] &= not any(used[n.name].values())
    if len(zones) == 1:
        (z,) = zones
        return (cap[z], size[z], first[z])
    return (sum(cap[z] for z in zones if untouched[z]), sum(cap.values()), sum(size.values()))


def fewest_nodes(needs: Sequence[Need], rooms: Mapping[str, Need], *, ordered: bool) -> tuple[int, int] | None:
    """Rule 3 when ranks must share (``docs/placement.md``): the fewest of the nodes ``rooms``
    (name → room, node-index order) that hold ``needs`` (task order; ``ordered``: in rank order),
    and among sets of that many the least capacity for the largest quota (best fit), as (nodes,
    capacity); None when all of them do not."""
    head = max(needs, key=lambda n: (n["gpu"], n["cpu"]))
    names = list(rooms)
    for k in range(1, len(names) + 1):
        caps = [
            sum(capacity(head, rooms[n]) for n in combo)
            for combo in itertools.combinations(names, k)
            if packs(needs, [rooms[n] for n in combo], ordered=ordered)
        ]
        if caps:
            return k, min(caps)
    return None


def check_shares(
    name: str,
    nodes: Sequence[NodeSpec],
    placed: Sequence[str],
    needs: Sequence[Need],
    room: Mapping[str, Need],
    strict: bool,
) -> None:
    """Rule 3 by default for a gang with nothing bound before, its quotas ``needs`` placed on
    ``placed`` (``room``: each usable node's room then): when its zones have fewer nodes with room
    for some quota of it than quotas (ranks must share), it takes the fewest nodes of those zones
    that hold it — in rank order when they allow it — and of those the least room (best fit), as
    a gang of one size does; not every node of its zones."""
    zones = {n.zone for n in nodes if n.name in placed}
    rooms = {n.name: room[n.name] for n in sorted(nodes, key=_index) if n.zone in zones and n.name in room}
    if sum(1 for r in rooms.values() if any(fits(m, r) for m in needs)) >= len(needs):
        return  # distinct nodes
    ordered = strict or packs(needs, list(rooms.values()), ordered=True)
    best = fewest_nodes(needs, rooms, ordered=ordered)
    head = max(needs, key=lambda n: (n["gpu"], n["cpu"]))
    got = (len(set(placed)), sum(capacity(head, rooms[n]) for n in set(placed)))
    assert got == best, f"{name} shares {sorted(set(placed))} ({got}: nodes, room) where {best} would do: {placed}"
