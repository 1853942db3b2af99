"""The webhook's candidate index: each queue's quotas kept ordered by the TQ score, per request shape.

The rule. An admission picks, among the quotas of the pod's queue that pass the pre-filter
(:func:`room_class`: room at all, and at least the request), the first one in the order
``(−tq.node_order(task, quota), quota name)`` that the TQ predicates accept
(``webhooks.search.search``). The index produces exactly that order without scoring the queue:

* the policy's ``tq.node_order`` depends on the task only through its *request shape* (the
  request restricted to the resource names quotas govern) — except on the quotas the task's job
  *touches*: those in the admission's overlay (in-flight claims, replaced predecessors), those a
  claim or a reservation of the job is on, those a reservation for the pod it inherits from is
  on, and those bound (or statically bound) to a node a task of the job, or a quota it claims,
  is on. Every plugin taking part in ``tq.node_order`` declares this by
  ``TQ_ORDER_BY_SHAPE = True`` (``quotaaffinity`` does: its tiers, sibling bonus and
  reservation bonus are all about the job; its best fit is about the shape). A policy whose
  ``tq.node_order`` has another participant, or whose TQ bundle decides among all feasible
  quotas (``batch_node_order``, ``best_n``, rank order), is served by the full scan instead;
* so for each (queue, shape) the quotas that pass the pre-filter are kept in a heap keyed by the
  score of a *neutral* task of that shape (no job, no siblings, no reservation, no claim), and a
  decision merges, lazily, the heap in order (touched quotas skipped) with the touched quotas
  scored for the real task. The merged stream is the full scan's order; the predicates run on
  it until the first feasible quota, as before. Cost: O(log n) per quota read and per change,
  plus the job's touched quotas — not O(quotas of the queue).

Kept current incrementally: the cache calls :meth:`CandidateIndex.changed` with a quota's name
whenever any of it changes (claim, release, bind, status, reservations, add / update / delete:
``ClusterCache.quota_listeners``); the next decision rescores just those quotas — one heap push
per (queue, shape) they serve — and updates the reverse maps (job → quotas it claims or reserves,
pod → quotas reserved for it, node → quotas bound there) the touched set is read from.
Stale heap entries are popped when they reach the top (the quotas claimed first are the best
scored: that is where they gather), skipped when read below it, and compacted away when they
outnumber live ones.

Time. The neutral score does not depend on time: the only time-dependent part of the TQ score,
whether a reservation is still live (``QuotaInfo.reservation_for``), concerns a quota only for a
task its reservation admits — a touched quota, scored live at each decision.

A policy reload, a different cache mapping, or a quota that governs a resource name no quota
governed before (shapes change) rebuilds the index on the next decision. At most
:data:`MAX_ORDERS` (queue, shape) orders are kept (least recently used dropped, rebuilt on use).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Final, TypeVar

from extender.framework.policy import Policy
from extender.framework.session import Session
from extender.model.job import JobInfo
from extender.model.quota import QuotaInfo
from extender.model.resources import Resource
from extender.model.task import TaskInfo

__all__ = ["CANDIDATE", "MAX_ORDERS", "NO_ROOM", "TOO_SMALL", "CandidateIndex", "room_class"]

MAX_ORDERS: Final = 64
NO_ROOM: Final = 0
TOO_SMALL: Final = 1
CANDIDATE: Final = 2

Shape = tuple[tuple[str, int], ...]
Score = Callable[[TaskInfo, QuotaInfo], float]
K = TypeVar("K")


def room_class(q: QuotaInfo, want: Mapping[str, int]) -> int:
    """The pre-filter (cheap necessary conditions, no allocation): :data:`NO_ROOM` when the quota
    has no room at all (``allocate_job.has_room``), :data:`TOO_SMALL` when the request on the
    quota's names exceeds ``request + shadow − allocated`` (reservations and the TQ filters only
    take more away), else :data:`CANDIDATE`."""
    used = q.allocated.q
    cap = q.capacity.q if q.shadow.q else q.request.q
    room = small = False
    for name, c in cap.items():
        free = c - used.get(name, 0)
        if free > 0:
            room = True
        if want.get(name, 0) > free:
            small = True
    if not room:
        return NO_ROOM
    return TOO_SMALL if small else CANDIDATE


def _governs(q: QuotaInfo) -> Iterable[str]:
    yield from q.request.q
    yield from q.shadow.q
    yield from q.capacity.q


def _nodes_of(q: QuotaInfo) -> set[str]:
    """Every node the quota names: bound, statically bound, or the node its static bind reports."""
    out = {q.node_name, q.static_bind_node}
    if q.static_bind_status is not None:
        out.add(q.static_bind_status.node_name)
    out.discard("")
    return out


class _Order:
    """One (queue, shape): a heap of ``(−neutral score, name)`` over the queue's candidates.
    ``key`` holds each member's current entry; heap entries that differ from it are stale."""

    __slots__ = ("heap", "key", "neutral", "queue")

    def __init__(self, queue: str, neutral: TaskInfo) -> None:
        self.queue = queue
        self.neutral = neutral
        self.heap: list[tuple[float, str]] = []
        self.key: dict[str, float] = {}

    def put(self, q: QuotaInfo, score: Score) -> None:
        """(Re)place ``q`` by its current state (or drop it when it is no candidate any more)."""
        name = q.name
        if not q.serves_queue(self.queue) or room_class(q, self.neutral.request.q) != CANDIDATE:
            self.key.pop(name, None)
            return
        neg = -score(self.neutral, q)
        if self.key.get(name) == neg:
            return
        self.key[name] = neg
        heapq.heappush(self.heap, (neg, name))
        if len(self.heap) > 2 * len(self.key) + 64:
            self.heap = [(v, k) for k, v in self.key.items()]
            heapq.heapify(self.heap)

    def drop(self, name: str) -> None:
        self.key.pop(name, None)

    def ordered(self) -> Iterator[tuple[float, str]]:
        """Live entries, best first: stale entries at the top are popped for good (the quotas
        claimed first are the best scored, so that is where they gather), the rest is read
        without changing the heap (a frontier over its tree: the reader may stop at any entry)."""
        heap, key = self.heap, self.key
        while heap and key.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        if not heap:
            return
        seen: set[str] = set()
        frontier = [(heap[0], 0)]
        size = len(heap)
        while frontier:
            entry, i = heapq.heappop(frontier)
            for child in (2 * i + 1, 2 * i + 2):
                if child < size:
                    heapq.heappush(frontier, (heap[child], child))
            neg, name = entry
            if key.get(name) == neg and name not in seen:
                seen.add(name)
                yield entry


class CandidateIndex:
    """See the module docstring. One per webhook process, fed by the cache's quota listeners."""

    __slots__ = ("_base", "_by_job", "_by_node", "_by_pod", "_dirty", "_names", "_orders", "_policy", "_refs")

    def __init__(self) -> None:
        self._dirty: set[str] = set()
        self._policy: Policy | None = None
        self._base: Mapping[str, QuotaInfo] | None = None
        self._names: frozenset[str] = frozenset()
        self._orders: OrderedDict[tuple[str, Shape], _Order] = OrderedDict()
        self._by_job: dict[str, set[str]] = {}  # job → quotas a claim or reservation of it is on
        self._by_pod: dict[tuple[str, str], set[str]] = {}  # (namespace, pod) → quotas reserved for it
        self._by_node: dict[str, set[str]] = {}  # node → quotas naming it
        self._refs: dict[str, tuple[frozenset[str], frozenset[tuple[str, str]], frozenset[str]]] = {}

    def changed(self, name: str) -> None:
        """The cache's listener: something of quota ``name`` changed (O(1); work is lazy)."""
        self._dirty.add(name)

    @staticmethod
    def serves(policy: Policy) -> bool:
        """Whether the policy's TQ scores obey the rule the index relies on (else: full scan)."""
        stages = policy.stages
        order = stages["tq.node_order"].participants
        if not order or stages["tq.batch_node_order"].participants or stages["tq.best_n"].participants:
            return False
        return all(getattr(policy.plugins[p], "TQ_ORDER_BY_SHAPE", False) is True for p in order)

    # --- the decision's side ---------------------------------------------------------------------
    def candidates(
        self,
        ssn: Session,
        task: TaskInfo,
        job: JobInfo,
        *,
        base: Mapping[str, QuotaInfo],
        overlaid: Iterable[str],
        exclude: frozenset[str],
    ) -> Iterator[QuotaInfo] | None:
        """The queue's candidate quotas for ``task`` (as the session sees them) in the full scan's
        order, lazily; None when the policy is not one the index serves. ``base``: the cache's
        quotas; ``overlaid``: names the session's view replaces (in-flight claims, predecessors)."""
        bundle = ssn.tq
        if bundle.rank_ordered or not bundle.has_scores or not self.serves(ssn.policy):
            return None
        score = bundle.node_order
        self._refresh(ssn.policy, base, score)
        order = self._order(job.queue, task.request, ssn.snap.quotas_by_queue.get(job.queue, ()), base, score)
        touched = self._touched(ssn, overlaid, task, job)
        return self._merge(ssn, task, order, touched=touched, exclude=exclude, score=score)

    @staticmethod
    def _merge(
        ssn: Session, task: TaskInfo, order: _Order, *, touched: set[str], exclude: frozenset[str], score: Score
    ) -> Iterator[QuotaInfo]:
        quotas = ssn.snap.quotas
        want = task.request.q
        mine: list[tuple[float, str, QuotaInfo]] = []
        for name in touched:
            q = quotas.get(name)
            if q is None or name in exclude or not q.serves_queue(order.queue):
                continue
            if room_class(q, want) == CANDIDATE:
                mine.append((-score(task, q), name, q))
        mine.sort(key=lambda e: (e[0], e[1]))
        i = 0
        for neg, name in order.ordered():
            if name in touched or name in exclude:
                continue
            while i < len(mine) and (mine[i][0], mine[i][1]) < (neg, name):
                yield mine[i][2]
                i += 1
            q = quotas.get(name)
            if q is not None:
                yield q
        for _, _, q in mine[i:]:
            yield q

    def _touched(self, ssn: Session, overlaid: Iterable[str], task: TaskInfo, job: JobInfo) -> set[str]:
        """A superset of the quotas whose score for ``task`` may differ from the neutral one."""
        out = set(overlaid)
        out.update(self._by_job.get(task.job, ()))
        if task.inherit_from:
            out.update(self._by_pod.get((task.namespace, task.inherit_from), ()))
        nodes: set[str] = set()
        for t in job.tasks.values():
            if t.node:
                nodes.add(t.node)
            if t.quota:
                q = ssn.quota(t.quota)
                if q is not None and q.node_name:
                    nodes.add(q.node_name)
        for name in list(out):
            q = ssn.quota(name)
            if q is not None and q.node_name:
                nodes.add(q.node_name)
        for n in nodes:
            out.update(self._by_node.get(n, ()))
        return out

    # --- upkeep --------------------------------------------------------------------------------
    def _refresh(self, policy: Policy, base: Mapping[str, QuotaInfo], score: Score) -> None:
        names = self._names
        if (
            policy is not self._policy
            or base is not self._base
            or any(n not in names for d in self._dirty if (q := base.get(d)) is not None for n in _governs(q))
        ):
            self._rebuild(policy, base)
            return
        dirty, self._dirty = self._dirty, set()
        for name in dirty:
            q = base.get(name)
            self._reref(name, q)
            for order in self._orders.values():
                if q is None:
                    order.drop(name)
                elif name in order.key or q.serves_queue(order.queue):
                    order.put(q, score)

    def _rebuild(self, policy: Policy, base: Mapping[str, QuotaInfo]) -> None:
        self._policy, self._base = policy, base
        self._dirty.clear()
        self._orders.clear()
        self._by_job.clear()
        self._by_pod.clear()
        self._by_node.clear()
        self._refs.clear()
        names: set[str] = set()
        for name, q in base.items():
            names.update(_governs(q))
            self._reref(name, q)
        self._names = frozenset(names)

    def _reref(self, name: str, q: QuotaInfo | None) -> None:
        """The reverse maps' entries of quota ``name`` from its current state."""
        old = self._refs.pop(name, None)
        if old is not None:
            for job in old[0]:
                _unlink(self._by_job, job, name)
            for node in old[2]:
                _unlink(self._by_node, node, name)
            for pod in old[1]:
                _unlink(self._by_pod, pod, name)
        if q is None:
            return
        jobs = {c.job for c in q.claims.values()} | {r.job for r in q.reserved}
        pods = {(r.namespace, r.pod_name) for r in q.reserved}
        nodes = _nodes_of(q)
        if not (jobs or pods or nodes):
            return
        self._refs[name] = (frozenset(jobs), frozenset(pods), frozenset(nodes))
        for j in jobs:
            self._by_job.setdefault(j, set()).add(name)
        for p in pods:
            self._by_pod.setdefault(p, set()).add(name)
        for n in nodes:
            self._by_node.setdefault(n, set()).add(name)

    def _order(
        self, queue: str, request: Resource, members: Iterable[str], base: Mapping[str, QuotaInfo], score: Score
    ) -> _Order:
        shape: Shape = tuple(sorted((k, v) for k, v in request.q.items() if k in self._names))
        key = (queue, shape)
        order = self._orders.get(key)
        if order is not None:
            self._orders.move_to_end(key)
            return order
        neutral = TaskInfo(uid="", namespace="", name="", job="", request=Resource(dict(shape)))
        order = _Order(queue, neutral)
        for name in members:
            q = base.get(name)
            if q is not None:
                order.put(q, score)
        self._orders[key] = order
        if len(self._orders) > MAX_ORDERS:
            self._orders.popitem(last=False)
        return order


def _unlink(index: dict[K, set[str]], key: K, name: str) -> None:
    members = index.get(key)
    if members is not None:
        members.discard(name)
        if not members:
            del index[key]
