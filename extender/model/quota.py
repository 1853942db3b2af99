"""Quotas: logical resource containers that tasks claim (hop ①) and that get bound to nodes (hop ②).

A quota's ``request`` (plus its ``shadow`` oversell pool) bounds what the tasks claiming it may
ask for together (invariant 3) — for the resource names the quota declares. A quota of
``{nvidia.com/gpu: 8, rdma/hca: 8}`` governs GPUs and HCAs; the CPU and memory its pods ask for
are not its business (they are checked against the node at hop ③). A claim records the task's
request projected onto the quota's names. Its placement is ``node_name``; its lifecycle is ``phase``
(``QuotaEmpty`` → ``QuotaBound`` → back to ``QuotaEmpty``). ``reserved`` keeps the place of a
preempted or deleted task for a while so that its restarted pod gets the same quota back
(seed 2.4 ②).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from extender.model.enums import Enum
from extender.model.resources import Resource, Shortfall
from extender.model.selectors import LabelSelector, NodeAffinity, Toleration, map_key
from extender.model.task import TaskInfo
from extender.wellknown import ANNO_CLAIM_ENTRY

__all__ = [
    "ClaimError",
    "PodQuotaAffinity",
    "QuotaAffinityTerm",
    "QuotaClaim",
    "QuotaInfo",
    "QuotaPhase",
    "ReservedTask",
    "StaticBindStatus",
]


class QuotaPhase(Enum):
    EMPTY = "QuotaEmpty"
    BOUND = "QuotaBound"

    def __str__(self) -> str:
        return self.value


class ClaimError(RuntimeError):
    """A claim that would break invariant 3 (claims exceed request + shadow) or a bad claim edit."""


@dataclass(frozen=True, slots=True)
class QuotaAffinityTerm:
    """Selects quotas by name or by label; a term with both matches either."""

    quota_names: tuple[str, ...] = ()
    selector: LabelSelector | None = None

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if name in self.quota_names:
            return True
        return self.selector is not None and self.selector.matches(labels)

    def describe(self) -> str:
        parts = []
        if self.quota_names:
            parts.append("quotas " + ",".join(self.quota_names))
        if self.selector is not None:
            parts.append("quotas matching a label selector")
        return " or ".join(parts) or "nothing"


@dataclass(frozen=True, slots=True)
class PodQuotaAffinity:
    """Pod→quota affinity: only pods matching ``selector`` (in ``namespaces``, if any) may claim."""

    selector: LabelSelector
    namespaces: tuple[str, ...] = ()

    def admits(self, task: TaskInfo) -> bool:
        if self.namespaces and task.namespace not in self.namespaces:
            return False
        return self.selector.matches(task.labels)


@dataclass(frozen=True, slots=True)
class StaticBindStatus:
    node_name: str
    bound: bool


@dataclass(frozen=True, slots=True)
class QuotaClaim:
    """A task claiming a quota (one entry of ``status.tasks``)."""

    uid: str
    namespace: str
    name: str
    job: str
    index: int | None
    request: Resource
    created: float = 0.0
    entry: str = ""  # the in-flight entry its pod was admitted with (annotation claim-entry), "" if none
    # the claimant's TaskInfo.placement_key when the claim was made (a pod's update re-makes its
    # claim): what node filters read of it, without looking the task up (None: not known)
    placement_key: tuple[object, ...] | None = field(default=None, repr=False, compare=False)


def claimant_order(c: QuotaClaim) -> tuple[bool, int, str]:
    """The order of a quota's claimants: task index (claims without one last), then pod name."""
    return (c.index is None, c.index or 0, c.name)


@dataclass(frozen=True, slots=True)
class ReservedTask:
    """A place kept for a task that was preempted or deleted (seed 2.4 ②)."""

    job: str
    index: int | None
    namespace: str
    pod_name: str
    pod_uid: str
    reason: str  # Preempted | Deleted | Evicted | Failed
    expires_at: float  # epoch seconds
    request: Resource = field(default_factory=Resource.empty)  # what the slot keeps free

    def admits(self, task: TaskInfo) -> bool:
        """Whether ``task`` is the restarted pod this reservation waits for."""
        if task.namespace != self.namespace:
            return False
        if task.inherit_from and task.inherit_from == self.pod_name:
            return True
        if task.job != self.job:
            return False
        # the same task index, or a pod recreated under the same name (no index)
        return (task.index is not None and task.index == self.index) or task.name == self.pod_name

    def expired(self, now: float) -> bool:
        return now >= self.expires_at


@dataclass(slots=True)
class QuotaInfo:
    name: str
    queue: str
    request: Resource
    labels: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    node_affinity: NodeAffinity | None = None
    quota_affinity: tuple[QuotaAffinityTerm, ...] = ()
    quota_anti_affinity: tuple[QuotaAffinityTerm, ...] = ()
    pod_affinity: PodQuotaAffinity | None = None
    shared_queues: tuple[str, ...] = ()
    static_bind_node: str = ""
    spec: str = ""  # GPU spec code from the nodeSelector ("" = any)
    created: float = 0.0
    resource_version: str = ""
    generation: int = 0

    # status
    phase: QuotaPhase = QuotaPhase.EMPTY
    node_name: str = ""
    shadow: Resource = field(default_factory=Resource.empty)
    static_bind_status: StaticBindStatus | None = None
    bound_by: str = ""  # status.boundBy: who bound it to node_name ("": another controller)
    # node_name is a binding of this replica whose write the API has not answered yet
    # (extender/cache/bindings.py): its room is taken, but no pod may go to it before the API shows it
    in_flight: bool = False
    claims: dict[str, QuotaClaim] = field(default_factory=dict)
    allocated: Resource = field(default_factory=Resource.empty)  # Σ claim requests, kept exact
    reserved: tuple[ReservedTask, ...] = ()
    reason: str = ""
    message: str = ""
    # what node filters read of the spec, built on first use (the spec never changes once built)
    _placement_key: tuple[object, ...] | None = field(default=None, repr=False, compare=False)
    # the quota's rank within its job: the smallest task index among its claimants (None: no
    # claimant has one), kept by the claim methods below as claims come and go (_reindex)
    rank: int | None = field(default=None, repr=False, compare=False)
    # claims and allocated may be shared with a copy (clone): whichever edits them first copies
    # them (_own_claims). A bind clones every quota it binds and never edits its claims.
    _claims_shared: bool = field(default=False, repr=False, compare=False)
    # the claimants' placement keys in task-index order (what node filters read of its pods),
    # kept by the claim methods; None when not known (a claim made without one, or claims put
    # in other than through those methods): the session then finds them through the tasks
    claimant_keys: tuple[tuple[object, ...], ...] | None = field(default=None, repr=False, compare=False)

    def placement_key(self) -> tuple[object, ...]:
        """A hashable key of what node filters read of this quota's spec: request, node selector
        (and the GPU model it names), tolerations, node affinity. Not its name and labels: only
        quota (anti-)affinity reads those, and that is the caller's to consider."""
        key = self._placement_key
        if key is None:
            key = self._placement_key = (
                map_key(self.request.q),
                map_key(self.node_selector),
                self.spec,
                self.tolerations,
                self.node_affinity,
            )
        return key

    # --- capacity ----------------------------------------------------------------------------
    @property
    def capacity(self) -> Resource:
        """What claims may add up to: ``request + shadow``."""
        return self.request + self.shadow

    def claim_shortfalls(
        self, request: Resource, *, task: TaskInfo | None = None, now: float | None = None
    ) -> list[Shortfall]:
        """Why a task of ``request`` cannot join the current claims (empty: it can).

        With ``now`` given, unexpired reservations keep their slots free for the task they wait
        for: they count against every other task.
        """
        free = self.capacity
        free.isub(self.allocated)
        if now is not None:
            for r in self.reserved:
                if not r.expired(now) and (task is None or not r.admits(task)):
                    free.isub(self.governed(r.request))
        return self.governed(request).shortfalls(free)

    def governed(self, request: Resource) -> Resource:
        """``request`` restricted to the resource names this quota declares."""
        names = self.request.q.keys() | self.shadow.q.keys()
        return Resource({k: v for k, v in request.q.items() if k in names})

    def serves_queue(self, queue: str) -> bool:
        return queue == self.queue or queue in self.shared_queues

    @property
    def bound(self) -> bool:
        return bool(self.node_name)

    def bind_in_flight(self, node_name: str) -> None:
        """Bound to ``node_name`` by a write of this replica the API has not answered yet
        (``extender/cache/bindings.py``)."""
        self.node_name = node_name
        self.phase = QuotaPhase.BOUND
        self.in_flight = True

    # --- claims ------------------------------------------------------------------------------
    def add_claim(self, task: TaskInfo, *, force: bool = False) -> QuotaClaim:
        if task.uid in self.claims:
            raise ClaimError(f"quota {self.name}: task {task.key} already claims it")
        if not force:
            short = self.claim_shortfalls(task.request)
            if short:
                raise ClaimError(f"quota {self.name}: task {task.key} does not fit: " + ", ".join(map(str, short)))
        request = self.governed(task.request)
        claim = QuotaClaim(
            task.uid,
            task.namespace,
            task.name,
            task.job,
            task.index,
            request,
            task.created,
            task.annotations.get(ANNO_CLAIM_ENTRY, ""),
            task.placement_key(),
        )
        self._own_claims()
        self.claims[task.uid] = claim
        self.allocated.iadd(request)
        self._reindex()
        return claim

    def remove_claim(self, uid: str) -> QuotaClaim:
        if uid not in self.claims:
            raise ClaimError(f"quota {self.name}: task {uid} does not claim it")
        self._own_claims()
        claim = self.claims.pop(uid)
        self.allocated.isub(claim.request)
        self._reindex()
        return claim

    def restore_claim(self, claim: QuotaClaim) -> None:
        """Put in a claim made earlier: the undo of remove_claim, or a webhook's in-flight claim."""
        if claim.uid in self.claims:
            raise ClaimError(f"quota {self.name}: task {claim.uid} already claims it")
        self._own_claims()
        self.claims[claim.uid] = claim
        self.allocated.iadd(claim.request)
        self._reindex()

    def take_claims(self, old: QuotaInfo) -> None:
        """Carry the claims of an older copy of this quota over (claims come from pods, not
        from the quota object), with what is kept of them: ``allocated``, ``rank``,
        ``claimant_keys``, and whether they are shared with a clone."""
        self.claims, self.allocated, self.rank = old.claims, old.allocated, old.rank
        self.claimant_keys = old.claimant_keys
        self._claims_shared = old._claims_shared

    def _own_claims(self) -> None:
        """Before editing claims: a copy of its own, if they are shared with a clone."""
        if self._claims_shared:
            self.claims = dict(self.claims)
            self.allocated = self.allocated.clone()
            self._claims_shared = False

    def _reindex(self) -> None:
        """``rank`` and ``claimant_keys`` from the claims, after an edit (most quotas have one)."""
        claims = self.claims
        if len(claims) == 1:
            (claim,) = claims.values()
            self.rank = claim.index
            self.claimant_keys = None if claim.placement_key is None else (claim.placement_key,)
            return
        ordered = sorted(claims.values(), key=claimant_order)
        self.rank = ordered[0].index if ordered else None  # claims without an index sort last
        keys: list[tuple[object, ...]] = []
        for c in ordered:
            if c.placement_key is None:
                self.claimant_keys = None
                return
            keys.append(c.placement_key)
        self.claimant_keys = tuple(keys)

    def over_claimed(self) -> list[Shortfall]:
        """Invariant 3 check: how Σ claims exceeds request + shadow (empty when it holds)."""
        cap = self.request if not self.shadow.q else self.capacity
        if self.allocated.less_equal_with_resource_names(cap):  # the rule of shortfalls, no list
            return []
        return self.allocated.shortfalls(cap)

    # --- reservations ------------------------------------------------------------------------
    def reservation_for(self, task: TaskInfo, now: float) -> ReservedTask | None:
        for r in self.reserved:
            if not r.expired(now) and r.admits(task):
                return r
        return None

    def live_reservations(self, now: float) -> tuple[ReservedTask, ...]:
        return tuple(r for r in self.reserved if not r.expired(now))

    def is_idle(self, now: float) -> bool:
        """No claims and no live reservations: nothing holds this quota's place."""
        return not self.claims and not self.live_reservations(now)

    # --- copies ------------------------------------------------------------------------------
    def clone(self) -> QuotaInfo:
        q = QuotaInfo.__new__(QuotaInfo)
        q.name = self.name
        q.queue = self.queue
        q.request = self.request
        q.labels = self.labels
        q.node_selector = self.node_selector
        q.tolerations = self.tolerations
        q.node_affinity = self.node_affinity
        q.quota_affinity = self.quota_affinity
        q.quota_anti_affinity = self.quota_anti_affinity
        q.pod_affinity = self.pod_affinity
        q.shared_queues = self.shared_queues
        q.static_bind_node = self.static_bind_node
        q.spec = self.spec
        q.created = self.created
        q.resource_version = self.resource_version
        q.generation = self.generation
        q.phase = self.phase
        q.node_name = self.node_name
        q.shadow = self.shadow
        q.static_bind_status = self.static_bind_status
        q.bound_by = self.bound_by
        q.in_flight = self.in_flight
        q.claims = self.claims  # shared until either side edits them (_own_claims)
        q.allocated = self.allocated
        q._claims_shared = self._claims_shared = True
        q.reserved = self.reserved
        q._placement_key = self._placement_key
        q.rank = self.rank
        q.claimant_keys = self.claimant_keys
        q.reason = self.reason
        q.message = self.message
        return q

    def state(self) -> tuple[object, ...]:
        """Everything mutable, for field-by-field equality checks."""
        return (
            self.phase,
            self.node_name,
            tuple(sorted(self.claims)),
            self.allocated,
            self.reserved,
            self.static_bind_status,
        )
