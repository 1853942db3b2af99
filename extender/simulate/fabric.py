"""The fabric of a scenario above its leaves: spines, cores, and what the real sources write for
them — the NodeTopology our agents publish (``spec.tiers``), the GPU operator's NVLink clique label,
NVIDIA Topograph's node labels."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from extender import wellknown
from extender.model.topology import generated_zone_key, sorted_switches

__all__ = ["CLIQUE_LABEL", "TOPOGRAPH_LABELS", "Core", "Spine", "check_tree", "topology_object"]


class _Tier(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Spine(_Tier):
    """A spine (tier 2) over some leaves; a leaf is under at most one."""

    name: str
    leaves: list[str] = Field(min_length=1)


class Core(_Tier):
    """A core (tier 3) over some spines; a spine is under at most one."""

    name: str
    spines: list[str] = Field(min_length=1)


CLIQUE_LABEL = "nvidia.com/gpu.clique"
TOPOGRAPH_LABELS = {
    0: "network.topology.nvidia.com/accelerator",
    1: "network.topology.nvidia.com/leaf",
    2: "network.topology.nvidia.com/spine",
    3: "network.topology.nvidia.com/core",
}


def check_tree(kind: str, field: str, parents: list[tuple[str, list[str]]], known: set[str]) -> None:
    """Every child a ``kind`` lists exists and is under one ``kind`` only; names are unique."""
    if len({name for name, _ in parents}) != len(parents):
        raise ValueError(f"two {kind}s have the same name")
    owner: dict[str, str] = {}
    for name, children in parents:
        for child in children:
            if child not in known:
                raise ValueError(f"{kind} {name}: {field} lists {child!r}, which is not declared")
            if child in owner:
                raise ValueError(f"{child} is under two {kind}s ({owner[child]} and {name})")
            owner[child] = name


def topology_object(
    node: str, switches: list[str], fabric: str = "roce", *, tiers: dict[int, str] | None = None
) -> dict[str, Any]:
    """A NodeTopology as the agents write it: the NICs' switches, ``spec.zone`` (the generated
    zone key) and ``spec.tiers`` — level 1 the zone's leaves, then ``tiers`` above the leaf
    (level → name) — so ``kubectl get nodetopologies`` shows ZONE, LEAF and SPINE as on a cluster."""
    if fabric == "ib":
        nics: list[dict[str, Any]] = [{"name": f"mlx5_{i}", "port": 1, "switchName": s} for i, s in enumerate(switches)]
    else:
        nics = [{"name": f"eth{i}", "switchName": s, "rdmaDevice": f"mlx5_{i}"} for i, s in enumerate(switches)]
    spec: dict[str, Any] = {"net": {fabric: nics}}
    zone = generated_zone_key(fabric, switches)
    if zone is not None:
        spec["zone"] = zone
        upper = sorted((level, name) for level, name in (tiers or {}).items() if level > 1)
        leaves = [(1, ",".join(sorted_switches(switches)))]
        spec["tiers"] = [{"level": level, "name": name} for level, name in leaves + upper]
    elif tiers and max(tiers) > 1:
        spec["tiers"] = [{"level": level, "name": name} for level, name in sorted(tiers.items())]
    return {
        "apiVersion": wellknown.API_VERSION,
        "kind": wellknown.KIND_NODETOPOLOGY,
        "metadata": {"name": node},
        "spec": spec,
    }
