"""RDMA zone keys and GPU spec codes (seed 三 3.3, 六 6.3) — shared by the scheduler and discovery.

A node's *zone key* says which RDMA switch domain it is in. Precedence:

1. the node annotation ``scheduling.infini-ai.com/rdma-topology-key`` (operator override);
2. the node label ``zone`` (written by the discovery agents: md5 of the sorted switch names);
3. a key generated from the node's NodeTopology: ``ib#S1,S2`` when it has InfiniBand ports with
   known switches, else ``roce#S1,S2`` from its RoCE NICs (switch names sorted, duplicates once).

Nodes wired to the same set of switches share a zone. A node without any of these has no zone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

from extender import wellknown

__all__ = [
    "generated_zone_key",
    "gpu_spec_code",
    "node_zone_key",
    "sorted_switches",
    "zone_label_value",
]


def sorted_switches(switches: Iterable[str]) -> list[str]:
    """Distinct, non-empty switch names in sorted order."""
    return sorted({s for s in switches if s})


def generated_zone_key(kind: str, switches: Iterable[str]) -> str | None:
    """``roce#S1,S2`` / ``ib#S1`` from the switch names, or None if there are none."""
    names = sorted_switches(switches)
    if not names:
        return None
    prefix = wellknown.ZONE_PREFIX_IB if kind == "ib" else wellknown.ZONE_PREFIX_ROCE
    return prefix + ",".join(names)


def zone_label_value(switches: Iterable[str]) -> str | None:
    """Value of the node label ``zone``: md5 (hex) of the sorted switch names joined by ``,``.

    A label value is limited to 63 characters and a restricted alphabet, which switch names
    (``MF0;ib-leaf-1:MQM8700/U1``) do not respect; the hash does, and equal switch sets hash equal.
    """
    names = sorted_switches(switches)
    if not names:
        return None
    return hashlib.md5(",".join(names).encode(), usedforsecurity=False).hexdigest()


def node_zone_key(
    annotations: Mapping[str, str],
    labels: Mapping[str, str],
    roce_switches: Sequence[str] = (),
    ib_switches: Sequence[str] = (),
) -> str | None:
    """The node's zone key by the precedence in the module docstring."""
    override = annotations.get(wellknown.ANNO_RDMA_TOPOLOGY_KEY)
    if override:
        return override
    label = labels.get(wellknown.LABEL_ZONE)
    if label:
        return label
    return generated_zone_key("ib", ib_switches) or generated_zone_key("roce", roce_switches)


def gpu_spec_code(labels: Mapping[str, str], keys: Sequence[str] = wellknown.DEFAULT_GPU_SPEC_LABELS) -> str:
    """The GPU model ("spec code") of a node or a quota's nodeSelector, or ``""`` if none.

    Keys are tried longest first (seed ``GetResourceSpecFromNodeSelector``), so a specific key
    such as ``nvidia.com/gpu.product`` wins over a generic prefix key.
    """
    for key in sorted(keys, key=len, reverse=True):
        value = labels.get(key)
        if value:
            return value
    return ""
