"""A job's topology tier limit (``highestTierAllowed`` + ``mode``) from the spellings users write.

Accepted, all meaning "keep the gang inside one unit of tier N" (0 NVLink domain, 1 leaf, 2 spine,
3 core, … — :func:`extender.model.topology.parse_tier` reads numbers and names):

* PodGroup ``spec.topology.{highestTierAllowed, mode}`` — ours;
* PodGroup ``spec.networkTopology.{highestTierAllowed, mode}`` — Volcano's field, accepted as an
  alias (its numbers are read as our tiers);
* pod annotations ``scheduling.infini-ai.com/highest-tier-allowed`` and ``…/topology-mode``;
* pod annotations ``kueue.x-k8s.io/podset-required-topology`` (hard) /
  ``…/podset-preferred-topology`` (soft) and KAI's ``kai.scheduler/topology-required-placement`` /
  ``…-preferred-placement``: a node label key, mapped to its tier by the configured topology labels
  (``--topology-labels``).

``mode`` is ``hard`` (never place above the tier: the job waits) or ``soft`` (the default: prefer
it, fall back upward). Rules:

* a ``hard`` mode without a tier is an error (hard of what?); a ``soft`` mode alone is no limit;
* several spellings on one object must agree, or the object is rejected (never a silent pick);
* the job's limit is its PodGroup's when that names one, else the tightest its pods name (the
  lowest tier; hard when any pod naming that tier says hard).

Every parser raises ValueError with a message naming the field; the caller adds the object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from extender import wellknown
from extender.model.topology import TierLabels, describe_tier, parse_tier, tier_of_label

__all__ = ["TIER_MODES", "TierLimit", "job_tier_limit", "pod_tier_limit", "podgroup_tier_limit"]

TIER_MODES = ("soft", "hard")


@dataclass(frozen=True, slots=True)
class TierLimit:
    level: int
    mode: str = "soft"

    def __str__(self) -> str:
        return f"{describe_tier(self.level)} ({self.level}), {self.mode}"


def _mode(value: object, where: str) -> str:
    if value is None or value == "":
        return "soft"
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text not in TIER_MODES:
        raise ValueError(f"{where}: mode {value!r}: expected hard or soft")
    return text


def _limit(tier: object, mode: object, where: str) -> TierLimit | None:
    """``(highestTierAllowed, mode)`` as written in one place; None when no tier is named."""
    m = _mode(mode, where)
    if tier is None or tier == "":
        if m == "hard":
            raise ValueError(f"{where}: mode hard needs highestTierAllowed (the tier the job must stay in)")
        return None
    try:
        return TierLimit(parse_tier(tier), m)
    except ValueError as exc:
        raise ValueError(f"{where}: highestTierAllowed: {exc}") from None


def _agreed(found: list[tuple[str, TierLimit]]) -> TierLimit | None:
    if not found:
        return None
    first_where, first = found[0]
    for where, other in found[1:]:
        if other != first:
            raise ValueError(f"{first_where} ({first}) and {where} ({other}) disagree: give one")
    return first


def podgroup_tier_limit(spec: Mapping[str, Any]) -> TierLimit | None:
    """The limit a PodGroup ``spec`` names in ``topology`` or Volcano's ``networkTopology``."""
    found: list[tuple[str, TierLimit]] = []
    for field in ("topology", "networkTopology"):
        raw = spec.get(field)
        if raw is None:
            continue
        if not isinstance(raw, Mapping):
            raise ValueError(f"spec.{field} must be an object")
        limit = _limit(raw.get("highestTierAllowed"), raw.get("mode"), f"spec.{field}")
        if limit is not None:
            found.append((f"spec.{field}", limit))
    return _agreed(found)


_LABEL_KEYED = (
    (wellknown.ANNO_KUEUE_REQUIRED_TOPOLOGY, "hard"),
    (wellknown.ANNO_KUEUE_PREFERRED_TOPOLOGY, "soft"),
    (wellknown.ANNO_KAI_REQUIRED_PLACEMENT, "hard"),
    (wellknown.ANNO_KAI_PREFERRED_PLACEMENT, "soft"),
)


def pod_tier_limit(annotations: Mapping[str, str], tier_labels: TierLabels) -> TierLimit | None:
    """The limit a pod's annotations name (module docstring), None when they name none."""
    found: list[tuple[str, TierLimit]] = []
    ours = _limit(
        annotations.get(wellknown.ANNO_HIGHEST_TIER_ALLOWED),
        annotations.get(wellknown.ANNO_TOPOLOGY_MODE),
        f"annotations {wellknown.ANNO_HIGHEST_TIER_ALLOWED} / {wellknown.ANNO_TOPOLOGY_MODE}",
    )
    if ours is not None:
        found.append((f"annotation {wellknown.ANNO_HIGHEST_TIER_ALLOWED}", ours))
    for key, mode in _LABEL_KEYED:
        label = annotations.get(key)
        if label is None:
            continue
        level = tier_of_label(label.strip(), tier_labels)
        if level is None:
            known = ", ".join(sorted({k for _, k in tier_labels} | {wellknown.LABEL_ZONE}))
            raise ValueError(
                f"annotation {key}: {label!r} is not a topology label of this scheduler (--topology-labels: {known})"
            )
        found.append((f"annotation {key}", TierLimit(level, mode)))
    return _agreed(found)


def job_tier_limit(podgroup: TierLimit | None, pods: Iterable[TierLimit | None]) -> TierLimit | None:
    """The job's limit: the PodGroup's, else the tightest of its pods' (module docstring)."""
    if podgroup is not None:
        return podgroup
    named = [p for p in pods if p is not None]
    if not named:
        return None
    level = min(p.level for p in named)
    hard = any(p.mode == "hard" for p in named if p.level == level)
    return TierLimit(level, "hard" if hard else "soft")
