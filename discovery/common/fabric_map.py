"""The fabric map: the tiers above the leaves of a fabric LLDP cannot see (``discover roce
--fabric-map FILE``; a file or a ConfigMap mounted as one).

LLDP tells a RoCE node only the leaf switch each NIC is cabled to. The map gives, for each leaf
(its LLDP system name, as in ``spec.net.roce[].switchName``), the units above it from the leaf
outwards: level 2 (spine or spine group), level 3 (core), and so on. YAML (JSON is valid YAML),
one mapping of leaf to a list of names, or to one name when there is only a spine::

    leaf-a: [spine-1, core-1]
    leaf-b: [spine-1, core-1]
    leaf-c: [spine-2, core-1]
    leaf-d: spine-3            # no core known above spine-3

The map must describe a tree: a unit has one parent, so two leaves under the same spine name the
same core (``spine-1`` under ``core-1`` for one leaf and ``core-2`` for another is refused), and a
leaf whose list stops at ``spine-1`` gets the core another leaf gives ``spine-1``. A leaf
not in the map has no tiers above it. A node's tier of a level is the distinct names of that level
of its leaves, sorted and joined by ``,`` (the rule of the InfiniBand collector).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from discovery.common.mapping_file import load_mapping
from discovery.common.model import Tier

__all__ = ["FabricMap", "FabricMapError", "load_fabric_map", "map_tiers", "parse_fabric_map"]

FabricMap = Mapping[str, tuple[str, ...]]
"""leaf name → names of its units at levels 2, 3, … (index 0 is level 2)."""


class FabricMapError(ValueError):
    """A fabric map that cannot be used; the message names the file and the entry."""


def parse_fabric_map(text: str, source: str = "fabric map") -> dict[str, tuple[str, ...]]:
    """The map in ``text``; :class:`FabricMapError` for anything but the documented shape or for
    a map that is not a tree."""
    doc = load_mapping(text, source, FabricMapError, "expected a mapping of leaf switch name to its spine, core…")
    out: dict[str, tuple[str, ...]] = {}
    parent: dict[tuple[int, str], tuple[str, str]] = {}  # (level, unit) → (its parent, a leaf that says so)
    for leaf, raw in doc.items():
        chain = [raw] if isinstance(raw, str) else raw
        if not isinstance(chain, list) or not chain or not all(isinstance(n, str) and n.strip() for n in chain):
            raise FabricMapError(f"{source}: leaf {leaf!r}: expected a name or a list of names (spine, core, …)")
        names = tuple(n.strip() for n in chain)
        for i in range(len(names) - 1):
            key, up = (i + 2, names[i]), names[i + 1]
            seen = parent.setdefault(key, (up, leaf))
            if seen[0] != up:
                raise FabricMapError(
                    f"{source}: {names[i]!r} (level {i + 2}) is under {seen[0]!r} for leaf {seen[1]!r} "
                    f"but under {up!r} for leaf {leaf!r}: a unit has one parent"
                )
        out[str(leaf).strip()] = names
    for leaf, names in out.items():  # a shorter chain is completed from what other leaves say
        chain = list(names)
        while (len(chain) + 1, chain[-1]) in parent:
            chain.append(parent[(len(chain) + 1, chain[-1])][0])
        out[leaf] = tuple(chain)
    return out


def load_fabric_map(path: Path) -> dict[str, tuple[str, ...]]:
    """:func:`parse_fabric_map` of a file; :class:`FabricMapError` when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise FabricMapError(f"cannot read fabric map {path}: {e}") from None
    return parse_fabric_map(text, str(path))


def map_tiers(fabric: FabricMap, leaves: Iterable[str]) -> list[Tier]:
    """(level, name) of a node's tiers above its leaves (level ≥ 2) by the map."""
    chains = [fabric[leaf] for leaf in sorted({leaf for leaf in leaves if leaf}) if leaf in fabric]
    depth = max((len(c) for c in chains), default=0)
    out: list[Tier] = []
    for i in range(depth):
        found = sorted({c[i] for c in chains if len(c) > i})
        out.append((i + 2, ",".join(found)))
    return out
