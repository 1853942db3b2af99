"""Typed outcomes shared by plugins, the extender's failure maps, PodGroup conditions and /diagnose.

A :class:`Status` is what a filtering or gating stage returns. Its :class:`Code` maps one-to-one
onto the extender protocol: ``UNSCHEDULABLE`` → ``FailedNodes`` (preemption may help),
``UNSCHEDULABLE_AND_UNRESOLVABLE`` → ``FailedAndUnresolvableNodes``, ``ERROR`` → ``Error``.
Each failure carries a :class:`Reason` from one vocabulary, so the text an operator reads in
``kubectl describe pod``, in a PodGroup condition and in ``/diagnose`` is the same.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from extender.model.enums import Enum

__all__ = ["SKIP", "SUCCESS", "Code", "Failure", "Prefixed", "Reason", "Status", "aggregate", "summarize"]


class Code(enum.IntEnum):
    """Severity-ordered: merging statuses keeps the highest code."""

    SUCCESS = 0
    SKIP = 1  # the plugin abstains (not relevant here); counts as a pass
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    ERROR = 4


class Reason(Enum):
    """The one reason vocabulary (seed 六 6.4). Values are the CamelCase words users see."""

    # admission and quotas (hop ①)
    JOB_BLOCKED_BY_JOB_QUEUE = "JobBlockedByJobQueue"
    QUEUE_CLOSED = "QueueClosed"
    QUEUE_NOT_FOUND = "QueueNotFound"
    NO_QUOTA = "NoQuota"
    INSUFFICIENT_QUOTA = "InsufficientQuota"
    QUOTA_RESERVED = "QuotaReserved"
    POD_QUOTA_AFFINITY_NOT_MATCH = "PodQuotaAffinityNotMatch"
    QUOTA_QUEUE_MISMATCH = "QuotaQueueMismatch"
    QUOTA_SPEC_MISMATCH = "QuotaSpecMismatch"
    QUOTA_NOT_FOUND = "QuotaNotFound"
    WAITING_FOR_NAMED_QUOTA = "WaitingForNamedQuota"
    # gang
    WAITING_FOR_GANG = "WaitingForGang"
    GANG_NOT_READY = "GangNotReady"
    # quota → node (hop ②)
    QUOTA_NOT_BOUND = "QuotaNotBound"
    QUOTA_LARGER_THAN_ANY_NODE = "QuotaLargerThanAnyNode"
    QUOTA_BOUND_ELSEWHERE = "QuotaBoundElsewhere"
    NODE_NOT_READY = "NodeNotReady"
    NODE_UNSCHEDULABLE = "NodeUnschedulable"
    NODE_NOT_FOUND = "NodeNotFound"
    NODE_SELECTOR_MISMATCH = "NodeSelectorMismatch"
    NODE_AFFINITY_MISMATCH = "NodeAffinityMismatch"
    TAINT_NOT_TOLERATED = "TaintNotTolerated"
    INSUFFICIENT_QUOTA_IDLE = "InsufficientQuotaIdle"
    QUOTA_IDLE_AFTER_RELEASE = "QuotaIdleOnlyAfterRelease"
    QUOTA_AFFINITY_NOT_MATCH = "QuotaAffinityNotMatch"
    QUOTA_ANTI_AFFINITY = "QuotaAntiAffinity"
    NO_ZONE_FITS = "NoZoneFits"
    ZONE_MISMATCH = "ZoneMismatch"
    SPEC_MISMATCH = "SpecMismatch"
    TOPOLOGY_ORDER = "TopologyOrder"
    STATIC_BIND_NODE_NOT_READY = "StaticBindNodeNotReady"
    STORAGE_NOT_READY = "StorageNotReady"
    HOLDING_NODES = "HoldingNodes"  # a waiting gang holds nodes (topology/holds.py)
    NODE_HELD_FOR_GANG = "NodeHeldForGang"  # another job is kept off a held node
    # the gang fits only across a tier above its hard highestTierAllowed: it waits
    FITS_ONLY_ABOVE_ALLOWED_TIER = "FitsOnlyAboveAllowedTier"
    # pod → node (hop ③)
    INSUFFICIENT_IDLE = "InsufficientIdle"
    LOWER_PRIORITY_PODS_USE_NODE = "LowerPriorityPodsUseNode"
    SPOT_POOL_EXHAUSTED = "SpotPoolExhausted"
    SPOT_POOL_INVALID = "SpotPoolInvalid"  # the node's spot-shared annotation is no quantity, or too much
    WAITING_FOR_BIND = "WaitingForBind"
    BIND_FAILED = "BindFailed"
    # release / back-off
    RELEASED_UNSCHEDULABLE = "QuotaReleasedUnschedulable"
    BACKOFF = "BackOff"
    # service state
    CACHE_NOT_SYNCED = "CacheNotSynced"
    UNKNOWN_POD = "UnknownPod"
    INVALID_POD = "InvalidPod"  # a pod of ours the cache cannot read (a bad annotation, quantity …)
    INTERNAL = "InternalError"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Failure:
    reason: Reason
    detail: str = ""
    plugin: str = ""

    def __str__(self) -> str:
        return f"{self.reason.value}({self.detail})" if self.detail else self.reason.value


@dataclass(frozen=True, slots=True)
class Status:
    code: Code
    failures: tuple[Failure, ...] = ()
    # success or skip: read on every predicate of every node, so kept, not computed on each read
    ok: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ok", self.code <= Code.SKIP)

    # --- constructors ------------------------------------------------------------------------
    @staticmethod
    def unschedulable(reason: Reason, detail: str = "", plugin: str = "") -> Status:
        return Status(Code.UNSCHEDULABLE, (Failure(reason, detail, plugin),))

    @staticmethod
    def unresolvable(reason: Reason, detail: str = "", plugin: str = "") -> Status:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (Failure(reason, detail, plugin),))

    @staticmethod
    def error(detail: str, plugin: str = "") -> Status:
        return Status(Code.ERROR, (Failure(Reason.INTERNAL, detail, plugin),))

    # --- reading -----------------------------------------------------------------------------
    @property
    def reason(self) -> Reason | None:
        return self.failures[0].reason if self.failures else None

    def with_plugin(self, plugin: str) -> Status:
        if not self.failures or all(f.plugin for f in self.failures):
            return self
        return Status(self.code, tuple(f if f.plugin else Failure(f.reason, f.detail, plugin) for f in self.failures))

    def message(self) -> str:
        """The text a person reads: ``InsufficientQuotaIdle(nvidia.com/gpu 8 > 7); TaintNotTolerated(...)``."""
        if self.ok:
            return "Success"
        return "; ".join(str(f) for f in self.failures) or self.code.name

    def __str__(self) -> str:
        return self.message()

    @staticmethod
    def merge(statuses: Iterable[Status]) -> Status:
        """Joint outcome: the highest code, all failures in order."""
        code = Code.SUCCESS
        failures: list[Failure] = []
        for s in statuses:
            code = max(code, s.code)
            if not s.ok:
                failures.extend(s.failures)
        if code == Code.SKIP:
            code = Code.SUCCESS
        return Status(code, tuple(failures))


@dataclass(frozen=True, slots=True)
class Prefixed(Status):
    """A failure read after what already went right (a gang that runs while the rest of it
    waits): ``prefix`` comes before the message — ``placed 3 of 4 (minMember 2); 1 waits:
    NoZoneFits(…)`` —; the code and the reasons are the failure's own."""

    prefix: str = ""

    @staticmethod
    def of(status: Status, prefix: str) -> Status:
        return Prefixed(status.code, status.failures, prefix) if prefix and not status.ok else status

    def message(self) -> str:
        return f"{self.prefix}: {Status.message(self)}"


@dataclass(frozen=True, slots=True)
class Refused(Status):
    """A gang's failure that names the nodes refusing its quotas on their own: ``per_node`` (node
    → its refusal) and ``elsewhere``, what the other nodes wait for (the gang's own reason). The
    failures tell the whole story, as ``/diagnose`` reads it; the extender tells each node its
    part (kube-scheduler counts nodes per message)."""

    per_node: Mapping[str, Status] = field(default_factory=dict, compare=False)
    elsewhere: Status | None = field(default=None, compare=False)

    @staticmethod
    def of(status: Status, per_node: Mapping[str, Status], elsewhere: Status) -> Status:
        return Refused(status.code, status.failures, per_node, elsewhere) if per_node and not status.ok else status


SUCCESS = Status(Code.SUCCESS)
SKIP = Status(Code.SKIP)


def aggregate(per_target: Mapping[str, Status], *, limit: int = 6) -> Status:
    """One status for "no target fits", readable at any cluster size: failures that repeat are
    counted (``InsufficientQuotaIdle(3 nodes: nvidia.com/gpu 8 > 7)``), at most ``limit`` kinds are
    listed, the rest counted per reason."""
    code = Code.SUCCESS
    groups: dict[tuple[Reason, str, str], int] = {}
    for status in per_target.values():
        if status.ok:
            continue
        code = max(code, status.code)
        for f in status.failures:
            key = (f.reason, f.detail, f.plugin)
            groups[key] = groups.get(key, 0) + 1
    if code == Code.SUCCESS:
        return SUCCESS
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1], kv[0][0].value, kv[0][1]))
    failures = []
    for (reason, detail, plugin), n in ranked[:limit]:
        text = f"{n} nodes: {detail}" if n > 1 and detail else (f"{n} nodes" if n > 1 else detail)
        failures.append(Failure(reason, text, plugin))
    rest: dict[Reason, int] = {}
    for (reason, _detail, _plugin), n in ranked[limit:]:
        rest[reason] = rest.get(reason, 0) + n
    for reason, n in sorted(rest.items(), key=lambda kv: -kv[1]):
        failures.append(Failure(reason, f"{n} more node{'s' if n != 1 else ''}"))
    return Status(code, tuple(failures))


def summarize(per_node: Mapping[str, Status], *, limit: int = 6) -> list[str]:
    """Aggregate per-node failures the way /diagnose and events show them.

    ``{"n0": InsufficientQuotaIdle(...), "n1": same, "n2": NodeNotReady}`` →
    ``["2 nodes: InsufficientQuotaIdle(nvidia.com/gpu 8 > 7)", "1 node: NodeNotReady"]``.
    """
    counts: Counter[str] = Counter()
    for status in per_node.values():
        if not status.ok:
            counts[status.message()] += 1
    out = []
    for msg, n in counts.most_common(limit):
        out.append(f"{n} node{'s' if n != 1 else ''}: {msg}")
    rest = len(counts) - limit
    if rest > 0:
        out.append(f"… and {rest} other reason{'s' if rest != 1 else ''}")
    return out
