"""The candidate index gives the full scan's answers after any sequence of cache events.

One cache, one :class:`~webhooks.candidates.CandidateIndex` listening to it from the start, and a
random sequence of what the informers and the webhook do: quotas added, updated (bound, unbound,
resized, statically bound, moved to another queue, reservations) and deleted; pods claiming,
placed on nodes, deleted (releasing, leaving reservations); claims recorded on the quota the way
the webhook's atomic claim records them (``status.tasks`` entries fed back through the cache);
in-flight entries; the clock moving past reservations' expiry. At every admission the decision
with the index (kept current only by the events since the last one) must equal the decision of
the full scan on the same state — chosen quota, tier, reason and patch.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender import wellknown
from extender.cache.cache import ClusterCache
from extender.cache.claims import NoRoom, record_claim
from tests import builders as b
from tests.webhooks import helpers as h
from webhooks import candidates as cand
from webhooks.candidates import CandidateIndex
from webhooks.inflight import InFlightRegistry
from webhooks.mutate import Decision, decide
from webhooks.namespaces import NamespaceLabelStore
from webhooks.review import parse_review
from webhooks.state import WebhookConfig

NS = "ml"
NODES = ("N0", "N1", "N2", "N3")
QUOTAS = tuple(f"q{i}" for i in range(10))
JOBS = ("j", "k")
TEAM_A = {"podAffinity": {"podSelector": {"matchLabels": {"team": "a"}}}}

nodes_or_none = st.one_of(st.none(), st.sampled_from(NODES))

quota_op = st.tuples(
    st.just("quota"),
    st.sampled_from(QUOTAS),
    st.sampled_from(["research", "research", "prod"]),
    st.sampled_from([1, 2, 8]),  # GPUs
    st.booleans(),  # shared with research (prod quotas)
    nodes_or_none,  # bound to
    nodes_or_none,  # statically bound to
    st.integers(0, 5),  # 0: podAffinity team a
    st.sampled_from([None, "index", "name", "other"]),  # a reservation in its status
)
pod_op = st.tuples(
    st.just("pod"),
    st.integers(0, 7),  # pod number
    st.sampled_from(JOBS),
    st.sampled_from(QUOTAS),
    nodes_or_none,
    st.sampled_from([1, 2]),
)
delete_quota_op = st.tuples(st.just("delete-quota"), st.sampled_from(QUOTAS))
delete_pod_op = st.tuples(st.just("delete-pod"), st.integers(0, 7), st.sampled_from(["Failed", "Succeeded", ""]))
move_op = st.tuples(st.just("move"), st.integers(0, 7), st.sampled_from(NODES))
tick_op = st.tuples(st.just("tick"), st.sampled_from([1.0, 20.0, 70.0, 400.0]))
admit_op = st.tuples(
    st.just("admit"),
    st.sampled_from([*JOBS, "", "t"]),  # job ("" a lone pod, t an RDMA job: topology rules)
    st.sampled_from([1, 2]),  # GPUs
    st.one_of(st.none(), st.integers(0, 3)),  # task index
    st.booleans(),  # inherits from old-pod
    st.booleans(),  # labelled team a
    st.frozensets(st.sampled_from(QUOTAS), max_size=3),  # excluded (claimed first elsewhere)
    st.sampled_from(["record", "inflight", "nothing"]),  # what becomes of the claim
)
ops = st.lists(
    st.one_of(quota_op, quota_op, pod_op, pod_op, delete_quota_op, delete_pod_op, move_op, tick_op, admit_op, admit_op),
    min_size=1,
    max_size=40,
)


@dataclass
class World:
    clock: h.Clock = field(default_factory=h.Clock)
    cache: ClusterCache = field(init=False)
    index: CandidateIndex = field(default_factory=CandidateIndex)
    inflight: InFlightRegistry = field(default_factory=InFlightRegistry)
    pods: dict[int, dict[str, Any]] = field(default_factory=dict)
    rv: int = 10
    admissions: int = 0
    compared: int = 0

    def __post_init__(self) -> None:
        self.cache = ClusterCache(clock=self.clock, reservation_ttl=60.0)
        self.cache.quota_listeners.append(self.index.changed)
        objs: list[dict[str, Any]] = [b.node(n) for n in NODES]
        objs += [b.queue("research"), b.queue("prod")]
        objs += [b.podgroup(j, namespace=NS, queue="research") for j in JOBS]
        objs.append(b.podgroup("t", namespace=NS, queue="research"))
        b.feed(self.cache, objs)

    def next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    # --- events ---------------------------------------------------------------------------
    def apply(self, op: tuple[Any, ...]) -> None:
        kind = op[0]
        if kind == "quota":
            self.put_quota(*op[1:])
        elif kind == "delete-quota":
            obj = self.cache.quota_object(op[1])
            if obj is not None:
                self.cache.on_quota_delete(obj)
        elif kind == "pod":
            _, k, job, quota, node, gpu = op
            old = self.pods.get(k)
            pod = b.pod(
                f"{job}-worker-{k}",
                namespace=NS,
                group=job,
                quota=quota,
                gpu=gpu,
                index=k,
                node=node,
                phase="Running" if node else "Pending",
            )
            pod["metadata"]["resourceVersion"] = self.next_rv()
            if old is not None and old["metadata"]["uid"] == pod["metadata"]["uid"]:
                self.cache.on_pod_update(old, pod)
            else:
                if old is not None:
                    self.cache.on_pod_delete(old)
                self.cache.on_pod_add(pod)
            self.pods[k] = pod
        elif kind == "delete-pod":
            old = self.pods.pop(op[1], None)
            if old is not None:
                gone = copy.deepcopy(old)
                if op[2]:
                    gone["status"]["phase"] = op[2]
                self.cache.on_pod_delete(gone)
        elif kind == "move":
            old = self.pods.get(op[1])
            if old is not None:
                new = copy.deepcopy(old)
                new["spec"]["nodeName"] = op[2]
                new["status"] = {"phase": "Running", "startTime": b.TS}
                new["metadata"]["resourceVersion"] = self.next_rv()
                self.cache.on_pod_update(old, new)
                self.pods[op[1]] = new
        elif kind == "tick":
            self.clock.now += op[1]
        else:
            self.admit(*op[1:])

    def put_quota(
        self,
        name: str,
        queue: str,
        gpu: int,
        shared: bool,
        node: str | None,
        static: str | None,
        affinity: int,
        reserved: str | None,
    ) -> None:
        status: dict[str, Any] = h.bound(node) if node else {"phase": "QuotaEmpty"}
        if reserved is not None:
            status["reservedTasks"] = [
                h.reservation(
                    job=f"{NS}/{'k' if reserved == 'other' else 'j'}",
                    index=1 if reserved in ("index", "other") else None,
                    namespace=NS,
                    pod_name="old-pod" if reserved == "name" else "gone",
                    gpu=1,
                    ttl=100.0 + self.clock.now - h.NOW,
                )
            ]
        obj = b.quota(
            name,
            queue=queue,
            gpu=gpu,
            shared_queues=["research"] if shared and queue == "prod" else None,
            static_bind_node=static if node is None else None,
            affinity=TEAM_A if affinity == 0 else None,
            status=status,
        )
        old = self.cache.quota_object(name)
        if old is not None and (old.get("status") or {}).get("tasks"):
            obj["status"]["tasks"] = copy.deepcopy(old["status"]["tasks"])  # recorded claims stay
        obj["metadata"]["resourceVersion"] = self.next_rv()
        if old is None:
            self.cache.on_quota_add(obj)
        else:
            self.cache.on_quota_update(old, obj)

    # --- admissions -------------------------------------------------------------------------
    def admit(
        self, job: str, gpu: int, index: int | None, inherit: bool, team_a: bool, exclude: frozenset[str], then: str
    ) -> None:
        self.admissions += 1
        annotations = {wellknown.ANNO_QUEUE_NAME: "research"}
        if inherit:
            annotations[wellknown.ANNO_INHERIT_RESOURCE_FROM] = "old-pod"
        pod = h.admission_pod(
            f"{job or 'lone'}-new-{self.admissions}",
            namespace=NS,
            group=job or None,
            gpu=gpu,
            hca=1 if job == "t" else None,
            index=index,
            labels={"team": "a"} if team_a else {},
            annotations=annotations,
        )
        req = parse_review(orjson.dumps(h.review(pod)))
        scan = self.decide(req, exclude, None)
        got = self.decide(req, exclude, self.index)
        assert _answer(got) == _answer(scan)
        self.compared += 1
        if then == "inflight" and got.claim is not None:
            self.inflight.add(got.claim)
        elif then == "record" and got.entry is not None:
            obj = self.cache.quota_object(got.quota)
            assert obj is not None
            try:
                status = record_claim(obj, got.entry, now=self.clock.now, known=self.cache.quotas.get(got.quota))
            except NoRoom:
                return
            if status is not None:
                new = {**obj, "status": status, "metadata": {**obj["metadata"], "resourceVersion": self.next_rv()}}
                self.cache.on_quota_update(obj, new)

    def decide(self, req: Any, exclude: frozenset[str], index: CandidateIndex | None) -> Decision:
        return decide(
            req,
            cache=self.cache,
            policy=h.policy(),
            namespaces=NamespaceLabelStore({}),
            inflight=self.inflight,
            config=WebhookConfig(),
            now=self.clock.now,
            synced=True,
            exclude=exclude,
            candidates=index,
        )


def _answer(d: Decision) -> tuple[object, ...]:
    return (d.outcome, d.quota, d.tier, d.reason, d.ops, d.warnings)


@given(initial=st.lists(quota_op, min_size=1, max_size=10), sequence=ops, last=admit_op)
@settings(max_examples=300, deadline=None)
def test_the_index_answers_what_the_full_scan_answers(
    initial: list[tuple[Any, ...]], sequence: list[tuple[Any, ...]], last: tuple[Any, ...]
) -> None:
    world = World()
    for op in [*initial, *sequence, last]:  # at least one comparison per sequence
        world.apply(op)


# A sequence where the order matters: a free 1-GPU quota, a statically bound one (the bound
# tier scores 100 against the free tier's 10), and one a sibling of the job claims on N0.
ORDERED: list[tuple[Any, ...]] = [
    ("quota", "q0", "research", 1, False, None, None, 5, None),
    ("quota", "q1", "research", 2, False, None, "N1", 5, None),
    ("quota", "q2", "research", 2, False, "N0", None, 5, None),
    ("admit", "k", 1, 1, False, False, frozenset(), "nothing"),
    ("pod", 3, "j", "q2", "N0", 1),
    ("quota", "q3", "research", 8, False, "N0", None, 5, None),
    ("admit", "j", 1, 2, False, False, frozenset(), "record"),
    ("delete-pod", 3, "Failed"),
    ("admit", "j", 1, 3, False, False, frozenset(), "nothing"),
]


def test_the_ordered_sequence_passes() -> None:
    world = World()
    for op in ORDERED:
        world.apply(op)
    assert world.compared == 3


def test_a_reversed_order_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison can fail: heaps keyed by the opposite score pick the worst quota."""
    put = cand._Order.put

    def reversed_put(self: cand._Order, q: Any, score: Any) -> None:
        put(self, q, lambda t, x: -score(t, x))

    monkeypatch.setattr(cand._Order, "put", reversed_put)
    world = World()
    with pytest.raises(AssertionError):
        for op in ORDERED:
            world.apply(op)


def test_an_index_deaf_to_events_is_caught() -> None:
    """The comparison can fail: an index that misses the cache's events answers from old state."""
    world = World()
    world.cache.quota_listeners.clear()
    with pytest.raises(AssertionError):
        for op in ORDERED:
            world.apply(op)


def test_a_touched_set_left_empty_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison can fail: without the job's touched quotas the sibling bonus is missed."""
    monkeypatch.setattr(CandidateIndex, "_touched", lambda self, ssn, overlaid, task, job: set(overlaid))
    world = World()
    with pytest.raises(AssertionError):
        for op in ORDERED:
            world.apply(op)


@given(
    steps=st.lists(
        st.tuples(st.sampled_from(QUOTAS), st.one_of(st.none(), st.sampled_from([0.5, 10.0, 10.5, 100.0, 150.0]))),
        max_size=200,
    )
)
@settings(max_examples=200, deadline=None)
def test_the_heap_walk_yields_live_entries_best_first(steps: list[tuple[str, float | None]]) -> None:
    """``_Order.ordered`` (a frontier over the heap, stale entries skipped) is the sorted live set,
    whatever the sequence of re-scorings and drops (and the compactions they trigger)."""
    from extender.model.quota import QuotaInfo
    from extender.model.resources import Resource
    from extender.model.task import TaskInfo

    order = cand._Order("research", TaskInfo(uid="", namespace="", name="", job="", request=Resource({})))
    live: dict[str, float] = {}
    for name, value in steps:
        if value is None:
            order.drop(name)
            live.pop(name, None)
        else:
            q = QuotaInfo(name=name, queue="research", request=Resource({wellknown.RESOURCE_GPU: 1000}))
            order.put(q, _constant(value))
            live[name] = -value
    assert list(order.ordered()) == sorted((v, k) for k, v in live.items())


def _constant(value: float) -> cand.Score:
    """A score that gives every quota ``value``."""
    return lambda _t, _q: value


def test_stale_entries_at_the_top_are_dropped_when_read() -> None:
    """The best-scored quotas are claimed first, so their stale entries gather at the top of the
    heap: a read pops them for good instead of walking past them at every admission."""
    from extender.model.quota import QuotaInfo
    from extender.model.resources import Resource
    from extender.model.task import TaskInfo

    order = cand._Order("research", TaskInfo(uid="", namespace="", name="", job="", request=Resource({})))
    for i in range(40):
        q = QuotaInfo(name=f"q{i:02d}", queue="research", request=Resource({wellknown.RESOURCE_GPU: 1000}))
        order.put(q, _constant(float(i)))
    for i in range(39, 29, -1):  # the ten best claimed: stale, not enough to compact
        order.drop(f"q{i:02d}")
    assert len(order.heap) == 40
    assert next(order.ordered()) == (-29.0, "q29")
    assert len(order.heap) == 30 and order.heap[0] == (-29.0, "q29")
    assert list(order.ordered()) == [(-float(i), f"q{i:02d}") for i in range(29, -1, -1)]
