"""Why a gang gets no plan, worded as an operator reads it in ``/diagnose``, the extender's
reasons and the PodGroup condition. Pure: the planner gathers the figures, these say them.

* ``NodeHeldForGang`` — fewer zones would hold the gang were nothing held for another gang: it
  waits rather than spread (a hold may delay a gang, never scatter it);
* ``FitsOnlyAboveAllowedTier`` — the gang fits only across a tier above its hard
  ``highestTierAllowed``: which tier, and how many of its quotas the unit of the allowed one it
  must fit in holds (its bound siblings' unit; nothing bound: the roomiest) — or, when a bound
  sibling's node names no NVLink domain, that node; when its bound siblings already span more
  than one unit, those units (no unit can ever hold it with them);
* ``NoZoneFits`` — no zone (or set of zones) holds it: the roomiest zone and what it takes, or,
  when no node takes any of its quotas, why the nodes refuse them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from extender import wellknown
from extender.framework.status import Reason, Refused, Status, aggregate
from extender.model.quota import QuotaInfo
from extender.model.resources import format_quantity
from extender.model.topology import describe_tier
from extender.plugins.topology.gangplan import ZoneId

__all__ = ["GangWords", "describe_gang", "fits_only_above", "held_for_others", "no_zone_fits", "out_of_rank_order"]


@dataclass(frozen=True, slots=True)
class GangWords:
    """What a gang asks of a zone, as an operator says it (``4×1 GPU``, ``4 quotas``): its
    ``text``, and whether a verb after it is plural (``4 quotas fit``; ``1 quota fits``; one
    gang's measure, ``4×1 GPU fits``)."""

    text: str
    plural: bool = False

    def __str__(self) -> str:
        return self.text

    def fits(self) -> str:
        """``4 quotas fit``, ``4×1 GPU fits``: the words with the verb agreeing in number."""
        return f"{self.text} {'fit' if self.plural else 'fits'}"


def describe_gang(quotas: Sequence[QuotaInfo], gpus: Sequence[str] = wellknown.DEFAULT_GPU_RESOURCES) -> GangWords:
    """``4×1 GPU`` — what the gang asks of a zone, as an operator would say it (``gpus``: the
    resources that are GPUs, ``--gpu-resources``); ``4 quotas`` when they differ in size."""
    first = quotas[0].request
    if not all(q.request == first for q in quotas):
        count = len(quotas)
        return GangWords(f"{count} quota{'s' if count != 1 else ''}", plural=count != 1)
    name = next((g for g in gpus if first.get(g)), "")
    what = f"{format_quantity(name, first.get(name))} GPU" if name else str(first)
    return GangWords(f"{len(quotas)}×{what}")


def held_for_others(zones: int, what: GangWords, holders: Sequence[str]) -> Status:
    """``zones`` zones would hold the gang (``what``) but for the holds of ``holders``."""
    return Status.unschedulable(
        Reason.NODE_HELD_FOR_GANG,
        f"{zones} zone(s) would hold {what} but nodes there are held for " + ", ".join(holders),
    )


def fits_only_above(
    what: GangWords,
    need: int,
    *,
    span: int,
    levels: int,
    limit: int,
    room: Mapping[str, int],
    siblings: bool = False,
    homeless: Sequence[str] = (),
    spanned: Sequence[str] = (),
) -> Status:
    """The gang fits only across tier ``span`` (above ``levels``: the whole cluster) while its
    hard limit is tier ``limit``; ``room``: how many of its ``need`` quotas each unit of that tier
    it may use holds — with bound ``siblings``, only theirs (it may never use another, so another's
    room would mislead), else every unit, of which the roomiest is named. ``homeless``: the nodes
    of bound siblings that are in no unit of the tier (a node naming no NVLink domain): those are
    named instead, as no unit can ever hold the gang with them; so are the units its bound
    siblings already span when more than one (``spanned``, names in order): their room would
    read as if more of it let the gang run, which nothing but its siblings moving does."""
    above = describe_tier(span) if span <= levels else "cluster"
    allowed = describe_tier(limit)
    noun = "NVLink domain" if limit == 0 else allowed  # "the roomiest nvlink" names no thing
    head = f"{what.fits()} only across a {above} (tier {span}); highestTierAllowed is {allowed} (tier {limit})"
    if homeless:
        nodes = ", ".join(homeless)
        has = f"node {nodes} has" if len(homeless) == 1 else f"nodes {nodes} have"
        return Status.unschedulable(Reason.FITS_ONLY_ABOVE_ALLOWED_TIER, f"{head}, and its siblings' {has} no {noun}")
    if len(spanned) > 1:
        units = f"{len(spanned)} {_plural(noun)} ({', '.join(spanned)})"
        return Status.unschedulable(
            Reason.FITS_ONLY_ABOVE_ALLOWED_TIER,
            f"{head}, and its bound siblings already span {units}: no {noun} can hold it with them",
        )
    unit, most = max(room.items(), key=lambda kv: (kv[1], kv[0])) if room else ("-", 0)
    which = f"its siblings' {noun}" if siblings else f"the roomiest {noun}"
    return Status.unschedulable(
        Reason.FITS_ONLY_ABOVE_ALLOWED_TIER, f"{head}, and {which}, {unit}, takes {most} of {need}"
    )


def _plural(noun: str) -> str:
    """``NVLink domains``, ``leaves``, ``spines``: a tier unit's noun for more than one."""
    return "leaves" if noun == "leaf" else f"{noun}s"


def out_of_rank_order(unbound: Sequence[QuotaInfo], broken: tuple[int, str]) -> Status:
    """A strict-order gang that fits, but in no rank order (around its bound quotas): ``broken``
    is ``rankorder.order_break``'s answer for its unbound quotas' best placement out of order."""
    at, how = broken
    return Status.unschedulable(Reason.TOPOLOGY_ORDER, f"task {unbound[at].rank} would land on node index {how}")


def no_zone_fits(
    what: GangWords,
    need: int,
    room: Mapping[ZoneId, int],
    refusals: Mapping[str, Status],
    refused_room: Mapping[ZoneId, int] | None = None,
) -> Status:
    """No zone holds the gang: ``room`` is what each zone takes of it, ``refusals`` why nodes refuse
    its quotas (node → status) and ``refused_room`` what those nodes of each zone would take were
    they to accept. The nodes' reasons lead when they are what the gang waits for: no node takes any
    of it, or the zones of one GPU model would hold it with the refusing nodes (a gang waiting for a
    mount point on one node is told ``StorageNotReady``, then what the zones hold without it).
    Each refusing node keeps its own reason, the others the zones' (:class:`Refused`): the
    extender must not tell a Ready node ``NodeNotReady`` because another one is not."""
    if not any(room.values()):
        full = Status.unschedulable(Reason.NO_ZONE_FITS, f"no zone has room for any of {what}")
        return Refused.of(aggregate(refusals), refusals, full) if refusals else full
    zid, most = max(room.items(), key=lambda kv: (kv[1], kv[0]))
    short = Status.unschedulable(
        Reason.NO_ZONE_FITS, f"no zone holds {what}: the roomiest, {zid[1]}, takes {most} of {need}"
    )
    with_refused: dict[str, int] = {}
    for z, n in [*room.items(), *(refused_room or {}).items()]:
        with_refused[z[0]] = with_refused.get(z[0], 0) + n
    if refusals and max(with_refused.values()) >= need:
        return Refused.of(Status.merge([aggregate(refusals), short]), refusals, short)
    return Refused.of(short, refusals, short)
