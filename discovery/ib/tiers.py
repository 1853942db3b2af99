"""Upper tiers of an InfiniBand fabric from its switch-to-switch links (pure, no I/O).

Levels, from the hosts outwards:

* **level 1 — leaves**: the switches with at least one channel adapter (``Ca``) cabled to them;
* **level k+1**: the switches not yet placed that are linked to a level-k switch *and* join at
  least two different level-k units. A switch linked to one unit only adds no locality (an
  unused leaf hanging off the spines, a core wired to a single pod) and is left out, with
  everything that hangs only off it.

A **unit** of level k is what a gang spanning that tier is placed in:

* at level 1, a unit is one leaf;
* at level k+1, a unit is a connected component of the graph whose vertices are the level-k units
  and the level-(k+1) switches, with an edge wherever a level-(k+1) switch is cabled to a member
  of a level-k unit (links inside one level are ignored). So a leaf wired to several spines gets
  the spine *group* those spines form together: in a two-level fat tree where every leaf reaches
  every spine, all the spines are one group; in a three-tier fat tree, each pod's spines are one
  group and the cores above them join the pods into one core group.

A unit is named by its level-k member switch with the smallest name, followed by ``+N`` when it
has N more (``spine-a1+3``); a unit of one switch has that switch's name. Names are unique per
level (units are disjoint and switch names are unique).

A node's tier of level k (``spec.tiers``) is the sorted, distinct names of the level-k units of
its leaves joined by ``,`` (one name for a node on one leaf, or for a dual-rail node whose leaves
meet at that level), like the zone key joins the node's leaf names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from discovery.ib.parse import Fabric

__all__ = ["MAX_LEVELS", "FabricTiers", "fabric_tiers", "node_tiers"]

MAX_LEVELS = 8
"""Deepest level worked out (a fat tree has 2 to 4; a bound against pathological link graphs)."""


@dataclass(slots=True)
class FabricTiers:
    """``level[guid]``: the level of each placed switch; ``unit[k][leaf guid]``: the name of the
    level-k unit (k ≥ 2) a leaf is in, for the leaves that have one."""

    level: dict[str, int] = field(default_factory=dict)
    unit: dict[int, dict[str, str]] = field(default_factory=dict)

    @property
    def depth(self) -> int:
        """The highest level found (1: leaves only; 0: no leaf)."""
        return max(self.level.values(), default=0)


class _Components:
    """Union–find over string ids."""

    def __init__(self) -> None:
        self._parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self._parent.setdefault(x, x)
        root = x
        while self._parent[root] != root:
            root = self._parent[root]
        while self._parent[x] != root:
            self._parent[x], x = root, self._parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self._parent[max(ra, rb)] = min(ra, rb)


def _adjacency(fabric: Fabric) -> dict[str, set[str]]:
    adj: dict[str, set[str]] = {}
    for a, _pa, b, _pb in fabric.switch_links():
        if a != b:
            adj.setdefault(a, set()).add(b)
            adj.setdefault(b, set()).add(a)
    return adj


def _unit_name(members: Iterable[str]) -> str:
    ordered = sorted(members)
    return ordered[0] + (f"+{len(ordered) - 1}" if len(ordered) > 1 else "")


def fabric_tiers(fabric: Fabric, names: Mapping[str, str]) -> FabricTiers:
    """The levels and units of the fabric by the rule in the module docstring; ``names`` are the
    switches' unique names (:func:`discovery.ib.parse.switch_names`)."""
    adj = _adjacency(fabric)
    leaves = fabric.leaf_guids()
    out = FabricTiers(level=dict.fromkeys(leaves, 1))

    def name(guid: str) -> str:
        return names.get(guid) or "S-" + guid[2:]

    unit_of: dict[str, str] = {g: g for g in leaves}  # level-k switch → id of its level-k unit
    leaf_unit: dict[str, str] = {g: g for g in leaves}  # leaf → id of its level-k unit
    seen = set(leaves)
    for level in range(2, MAX_LEVELS + 1):
        candidates = sorted({n for g in unit_of for n in adj.get(g, ()) if n not in seen})
        seen.update(candidates)
        upper = [c for c in candidates if len({unit_of[n] for n in adj[c] if n in unit_of}) >= 2]
        if not upper:
            break
        comps = _Components()
        for sw in upper:
            for n in adj[sw]:
                if n in unit_of:
                    comps.union("s:" + sw, "u:" + unit_of[n])
        members: dict[str, list[str]] = {}
        for sw in upper:
            members.setdefault(comps.find("s:" + sw), []).append(name(sw))
        unit_names = {root: _unit_name(m) for root, m in members.items()}
        units: dict[str, str] = {}
        next_leaf_unit: dict[str, str] = {}
        for leaf, lower in leaf_unit.items():
            root = comps.find("u:" + lower)
            if root in unit_names:
                units[leaf] = unit_names[root]
                next_leaf_unit[leaf] = root
        for sw in upper:
            out.level[sw] = level
        out.unit[level] = units
        unit_of = {sw: comps.find("s:" + sw) for sw in upper}
        leaf_unit = next_leaf_unit
    return out


def node_tiers(tiers: FabricTiers, leaf_guids: Iterable[str]) -> list[tuple[int, str]]:
    """(level, name) of a node's tiers above the leaf (level ≥ 2), from the GUIDs of its leaves:
    at each level, the distinct unit names of its leaves, sorted and joined by ``,``; a level
    none of its leaves has is left out."""
    leaves = sorted(set(leaf_guids))
    out: list[tuple[int, str]] = []
    for level in sorted(tiers.unit):
        found = sorted({tiers.unit[level][g] for g in leaves if g in tiers.unit[level]})
        if found:
            out.append((level, ",".join(found)))
    return out
