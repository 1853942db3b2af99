"""RDMA zone keys and GPU spec codes (seed 三 3.3, 六 6.3) — shared by the scheduler and discovery.

A node's *zone key* says which RDMA switch domain it is in. Precedence:

1. the node annotation ``scheduling.infini-ai.com/rdma-topology-key`` (operator override), else
   ``scheduling.infini-ai.com/tier-1`` (the same override, spelled as a tier);
2. the node label ``zone`` (written by the discovery agents: md5 of the sorted switch names);
3. a key generated from the node's NodeTopology: ``ib#S1,S2`` when it has InfiniBand ports with
   known switches, else ``roce#S1,S2`` from its RoCE NICs (switch names sorted, duplicates once);
4. the first of the configured tier-1 node labels it has (Topograph's
   ``network.topology.nvidia.com/leaf`` …): a cluster running Topograph needs no agent of ours.

Nodes wired to the same set of switches share a zone. A node without any of these has no zone.

A node's *tiers* (:func:`node_tiers`) name the unit it is in at each level of the fabric:
0 NVLink / accelerator domain, 1 leaf (always the zone key), 2 spine, 3 core, and on outwards.
Per level, the first source that names it wins: the node annotation
``scheduling.infini-ai.com/tier-N``, then the NodeTopology ``spec.tiers`` our agents write, then the
configured node labels of that level in their order (:data:`extender.wellknown.DEFAULT_TIER_LABELS`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence

from extender import wellknown

__all__ = [
    "TIER_NAMES",
    "TierLabels",
    "describe_tier",
    "format_tier_labels",
    "generated_zone_key",
    "gpu_spec_code",
    "node_tiers",
    "node_zone_key",
    "parse_tier",
    "parse_tier_labels",
    "sorted_switches",
    "spanned_tier",
    "tier_annotation",
    "tier_of_label",
    "zone_label_value",
]

TierLabels = Sequence[tuple[int, str]]
"""(tier, node label key) pairs; within a tier, the earlier key wins."""

MAX_TIER = 16
"""Highest tier number accepted in annotations and settings (a fat tree has 4 or 5)."""


TIER_NAMES: Mapping[str, int] = {"nvlink": 0, "accelerator": 0, "leaf": 1, "spine": 2, "core": 3}
"""Names accepted for a tier wherever a job names one (``highestTierAllowed``): NVIDIA Topograph's
level names, with ``nvlink`` for the accelerator (NVLink) domain."""

_TIER_WORDS = ("nvlink", "leaf", "spine", "core")


def describe_tier(level: int) -> str:
    """A tier's name in messages and metric labels: ``nvlink``, ``leaf``, ``spine``, ``core``, then
    ``tier-4`` … for the levels above the core."""
    return _TIER_WORDS[level] if 0 <= level < len(_TIER_WORDS) else f"tier-{level}"


def parse_tier(value: object) -> int:
    """A tier given as a number (``2``, ``"2"``) or a name of :data:`TIER_NAMES` (any case).

    ValueError, saying what is accepted, for anything else, a negative number, or one above
    :data:`MAX_TIER`.
    """
    level: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        level = value
    elif isinstance(value, str):
        text = value.strip().lower()
        if text.isdigit():
            level = int(text)
        else:
            level = TIER_NAMES.get(text)
    if level is None or not 0 <= level <= MAX_TIER:
        names = ", ".join(f"{n}={lv}" for n, lv in TIER_NAMES.items())
        raise ValueError(f"tier {value!r}: expected a number 0..{MAX_TIER} or one of {names}")
    return level


def tier_of_label(key: str, tier_labels: TierLabels) -> int | None:
    """The tier a topology node label key stands for (Kueue / KAI name tiers by label key): its
    entry in ``tier_labels`` (``--topology-labels``), ``zone`` (our agents' leaf label) → 1; None
    for a key that names no tier."""
    for level, label in tier_labels:
        if label == key:
            return level
    return 1 if key == wellknown.LABEL_ZONE else None


def spanned_tier(node_tiers: Iterable[Sequence[str]]) -> int | None:
    """The highest tier a set of nodes spans: the lowest level at which every node names the same
    unit (0: one NVLink domain, 1: one leaf, …). None when no level is shared (the gang spans the
    whole cluster, or a node names no tiers); also None for no nodes."""
    rows = list(node_tiers)
    if not rows:
        return None
    for level in range(max(len(r) for r in rows)):
        first = rows[0][level] if level < len(rows[0]) else ""
        if first and all(level < len(r) and r[level] == first for r in rows):
            return level
    return None


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


def tier_annotation(level: int) -> str:
    """``scheduling.infini-ai.com/tier-<level>``."""
    return f"{wellknown.ANNO_TIER_PREFIX}{level}"


def _labelled(labels: Mapping[str, str], tier_labels: TierLabels, level: int) -> str:
    for lv, key in tier_labels:
        if lv == level:
            value = labels.get(key)
            if value:
                return value
    return ""


def node_zone_key(
    annotations: Mapping[str, str],
    labels: Mapping[str, str],
    roce_switches: Sequence[str] = (),
    ib_switches: Sequence[str] = (),
    tier_labels: TierLabels = (),
) -> str | None:
    """The node's zone key by the precedence in the module docstring."""
    override = annotations.get(wellknown.ANNO_RDMA_TOPOLOGY_KEY) or annotations.get(tier_annotation(1))
    if override:
        return override
    label = labels.get(wellknown.LABEL_ZONE)
    if label:
        return label
    generated = generated_zone_key("ib", ib_switches) or generated_zone_key("roce", roce_switches)
    return generated or _labelled(labels, tier_labels, 1) or None


def node_tiers(
    annotations: Mapping[str, str],
    labels: Mapping[str, str],
    zone: str,
    agent_tiers: Mapping[int, str],
    tier_labels: TierLabels,
) -> tuple[str, ...]:
    """The node's tiers: index i names its level-i unit, ``""`` when unknown; index 1 is ``zone``.

    ``agent_tiers``: level → name from its NodeTopology ``spec.tiers``. The tuple ends at the
    highest level some source names (empty when none does and there is no zone).
    """
    levels = {lv for lv, _ in tier_labels} | set(agent_tiers) | {1}
    for key in annotations:
        if key.startswith(wellknown.ANNO_TIER_PREFIX):
            rest = key[len(wellknown.ANNO_TIER_PREFIX) :]
            if rest.isdigit() and int(rest) <= MAX_TIER:
                levels.add(int(rest))
    out = [""] * (max(levels) + 1)
    for level in levels:
        if level == 1:
            out[1] = zone
            continue
        out[level] = (
            annotations.get(tier_annotation(level)) or agent_tiers.get(level) or _labelled(labels, tier_labels, level)
        )
    while out and not out[-1]:
        out.pop()
    return tuple(out)


_TIER_ENTRY = re.compile(r"^(\d+)=(\S+)$")


def parse_tier_labels(text: str) -> tuple[tuple[int, str], ...]:
    """``0=nvidia.com/gpu.clique,1=network.topology.nvidia.com/leaf,…`` → pairs (order kept).

    ValueError, naming the entry, for one that is not ``TIER=KEY`` or whose tier is above
    :data:`MAX_TIER`. Empty text: no labels.
    """
    out: list[tuple[int, str]] = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        m = _TIER_ENTRY.match(entry)
        if m is None or int(m.group(1)) > MAX_TIER:
            raise ValueError(
                f"topology label entry {entry!r}: expected TIER=LABEL-KEY with TIER 0..{MAX_TIER} "
                "(e.g. 1=network.topology.nvidia.com/leaf)"
            )
        pair = (int(m.group(1)), m.group(2))
        if pair not in out:
            out.append(pair)
    return tuple(out)


def format_tier_labels(pairs: TierLabels) -> str:
    """The inverse of :func:`parse_tier_labels`."""
    return ",".join(f"{level}={key}" for level, key in pairs)


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
